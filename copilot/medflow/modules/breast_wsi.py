"""Breast WSI (BRACS): seven-class slide label with level-0 localisations."""

from copilot.agent.baselines import SlideBaseline
from copilot.bench.scoring.parsers import parse_bracs
from copilot.bench.scoring.scorers import score_breast
from copilot.cases.answers import BRACS_NAMES
from copilot.cases.wsi import make_breast_case
from copilot.medflow.registry import BenchModule, points_in_words, register


def in_words(text: str) -> list[str]:
    """The slide label and how many locations the answer marks."""
    bracs = parse_bracs(text)
    return [f"Slide label: {BRACS_NAMES[bracs.label]} ({bracs.label})", points_in_words(len(bracs.localizations))]


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
        baseline=lambda: SlideBaseline(slide_label=True),
        order=3,
        table_title="Breast WSI",
        results_table=2,
        paper_cases=113,
        roi_label=("label", "N"),  # the slide label names the target ROI class; N: a normal slide
        cited=lambda text: {"points": parse_bracs(text).localizations},
        structures={
            "target": (
                "lesion",
                "carcinoma",
                "atypi",
                "hyperplasia",
                "duct",
                "tumor",
                "tumour",
                "papilloma",
                "benign",
                "normal",
                "invasive",
                "in situ",
                "dcis",
                "adh",
                "fea",
            ),
            "off_target": ("lymph node", "adipose only", "skin", "nipple"),
        },
        diagnosis=("label", "N"),
        answer_words=in_words,
    )
)
