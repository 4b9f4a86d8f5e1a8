"""Lung PET/CT (NSCLC Radiogenomics): five staging questions with evidence on the source series."""

from copilot.agent.baselines import LungBaseline
from copilot.bench.scoring.module_facts import DetailColumns
from copilot.bench.scoring.parsers import parse_compact
from copilot.bench.scoring.scorers import score_lung
from copilot.cases.answers import LUNG_OPTION_NAMES, LUNG_QUESTIONS
from copilot.cases.lung import make_lung_case
from copilot.kinds import Checkpoint
from copilot.medflow.registry import BenchModule, register

LUNG_TITLES = {"1": "Tumor Loc.", "2": "T Stage", "3": "Path. N", "4": "Hist.", "5": "Grade"}


def in_words(text: str) -> list[str]:
    """Each staging question with the option chosen."""
    answers = parse_compact(text)
    return [f"{LUNG_QUESTIONS[q]}: {LUNG_OPTION_NAMES[q][letter]} ({q}{letter})" for q, letter in answers.items()]


MODULE = register(
    BenchModule(
        name="lung_petct",
        kind="radiology",
        title="Lung PET/CT",
        has_loc=True,
        generate=lambda out, case_id, seed, o: make_lung_case(out, case_id, seed, spacing=o.spacing or 2.5),
        parse=parse_compact,
        score=score_lung,
        prior="Prior answer (no image reading).\n{evidence}1A2A3A4A5B",
        baseline=LungBaseline,
        order=2,
        results_table=1,
        paper_cases=162,
        label_field="1",  # tumour location, Q1
        operations=("segmentation", "vista3d", "all"),
        details=(
            DetailColumns("Answer + subtasks", (("Task", "task"), *((LUNG_TITLES[q], f"field:{q}") for q in "12345"))),
            DetailColumns("Evidence + grounding", (("Strict", "strict"), ("Loc.", "loc"))),
        ),
        structures={
            "target": ("lesion", "tumor", "tumour", "mass", "nodule", "primary", "node", "metasta", "suv"),
            "off_target": (
                "heart",
                "myocard",
                "aorta",
                "liver",
                "bladder",
                "kidney",
                "spleen",
                "brain",
                "spine",
                "vertebra",
                "rib",
            ),
        },
        checkpoints=(Checkpoint("D4", "evidence read on the source series", True, "source_series"),),
        answer_words=in_words,
        layout="four_up",  # PET/CT with the 3D view
        preset="ct_lung",
    )
)
