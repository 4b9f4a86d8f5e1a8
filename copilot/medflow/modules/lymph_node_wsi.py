"""Lymph-node WSI (CAMELYON17): tumour presence and largest metastasis size with localisations."""

from copilot.agent.baselines import SlideBaseline
from copilot.bench.parsers import parse_camelyon
from copilot.bench.scoring import score_lymph
from copilot.cases.wsi import make_lymph_case
from copilot.medflow.registry import BenchModule, register

MODULE = register(
    BenchModule(
        name="lymph_node_wsi",
        kind="pathology",
        title="Lymph node WSI (CAMELYON17)",
        has_loc=True,
        generate=lambda out, case_id, seed, o: make_lymph_case(out, case_id, seed, size=o.slide_size, mpp=o.mpp or 1.0),
        parse=parse_camelyon,
        score=score_lymph,
        prior='{{"tumor_presence_option": "A", "tumor_presence": "no_tumor", "largest_metastasis_option": "A", '
        '"largest_metastasis": "negative", "confidence": 0.1, "brief_rationale": "prior", "localizations": []}}',
        baseline=SlideBaseline,
        order=4,
    )
)
