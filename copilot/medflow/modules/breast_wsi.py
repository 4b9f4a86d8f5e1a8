"""Breast WSI (BRACS): seven-class slide label with level-0 localisations."""

from copilot.agent.baselines import SlideBaseline
from copilot.bench.parsers import parse_bracs
from copilot.bench.scoring import score_breast
from copilot.cases.wsi import make_breast_case
from copilot.medflow.registry import BenchModule, register

MODULE = register(
    BenchModule(
        name="breast_wsi",
        kind="pathology",
        title="Breast WSI (BRACS)",
        has_loc=True,
        generate=lambda out, case_id, seed, o: make_breast_case(
            out, case_id, seed, size=o.slide_size, mpp=o.mpp or 0.5
        ),
        parse=parse_bracs,
        score=score_breast,
        prior='{{"selected_option": "G", "wsi_label": "IC", "confidence": 0.1, '
        '"brief_rationale": "prior", "localizations": [{{"x": {x}, "y": {y}}}]}}',
        baseline=SlideBaseline,
        order=3,
    )
)
