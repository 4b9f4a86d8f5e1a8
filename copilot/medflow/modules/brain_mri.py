"""Brain MRI (UCSF-PDGM): diagnosis A–F with three key slices and a RAS point as evidence."""

from copilot.agent.baselines import BrainBaseline
from copilot.bench.scoring.module_facts import DetailColumns
from copilot.bench.scoring.parsers import parse_answer_letter
from copilot.bench.scoring.scorers import score_brain
from copilot.cases.answers import BRAIN_OPTIONS
from copilot.cases.brain import make_brain_case
from copilot.medflow.registry import BenchModule, register


def in_words(text: str) -> list[str]:
    """The diagnosis the answer letter names."""
    letter = parse_answer_letter(text, "".join(BRAIN_OPTIONS))
    return [f"Diagnosis: {BRAIN_OPTIONS[letter]} ({letter})"]


MODULE = register(
    BenchModule(
        name="brain_mri",
        kind="radiology",
        title="Brain MRI",
        has_loc=True,
        generate=lambda out, case_id, seed, o: make_brain_case(out, case_id, seed, spacing=o.spacing or 1.0),
        parse=lambda text: parse_answer_letter(text, "".join(BRAIN_OPTIONS)),
        score=score_brain,
        prior="Prior answer (no image reading).\n{evidence}ANSWER: A",
        baseline=BrainBaseline,
        order=1,
        results_table=1,
        paper_cases=495,
        operations=("segmentation", "all"),
        details=(
            DetailColumns("Answer + evidence", (("Task", "task"), ("Strict", "strict"))),
            DetailColumns("Grounding", (("Loc.", "loc"),)),
        ),
        structures={
            "target": ("lesion", "tumor", "tumour", "mass", "glioma", "enhanc", "oedema", "edema", "neoplasm", "cyst"),
            "off_target": (
                "ventricle",
                "choroid plexus",
                "pineal",
                "falx",
                "skull",
                "orbit",
                "sinus",
                "cerebellum",
                "basal ganglia",
                "corpus callosum",
                "scalp",
            ),
        },
        answer_words=in_words,
    )
)
