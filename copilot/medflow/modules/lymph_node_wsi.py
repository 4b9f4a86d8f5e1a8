"""Lymph-node WSI (CAMELYON17): tumour presence and largest metastasis size with localisations."""

from copilot.agent.baselines import SlideBaseline
from copilot.bench.scoring.parsers import parse_camelyon
from copilot.bench.scoring.scorers import score_lymph
from copilot.cases.answers import CAMELYON_NAMES, CAMELYON_PRESENCE
from copilot.cases.wsi import make_lymph_case
from copilot.medflow.registry import BenchModule, points_in_words, register


def in_words(text: str) -> list[str]:
    """Tumour presence, the largest metastasis and how many locations the answer marks."""
    cam = parse_camelyon(text)
    return [f"Tumour: {CAMELYON_NAMES[cam.presence]}", f"Largest metastasis: {CAMELYON_NAMES[cam.largest]}",
            points_in_words(len(cam.localizations))]  # fmt: skip


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
        table_title="Lymph-node WSI",
        results_table=2,
        paper_cases=550,
        label_field="largest_metastasis",
        cited=lambda text: {"points": parse_camelyon(text).localizations},
        structures={
            "target": ("metasta", "tumor", "tumour", "carcinoma", "node", "cluster", "macro", "micro", "itc"),
            "off_target": ("adipose only", "vessel wall", "capsule only"),
        },
        diagnosis=("tumor_presence", CAMELYON_PRESENCE[0]),
        answer_words=in_words,
    )
)
