"""Longitudinal MRI (LUMIERE): RANO response from an OLD/CURRENT pair, with six lesion-state fields."""

from copilot.agent.baselines import LongitudinalBaseline
from copilot.bench.scoring.module_facts import DetailColumns
from copilot.bench.scoring.parsers import RANO_FIELDS, parse_rano
from copilot.bench.scoring.scorers import score_longitudinal
from copilot.cases.answers import RANO_NAMES, RANO_OPTIONS
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.kinds import Checkpoint
from copilot.medflow.registry import BenchModule, register

FIELD_TITLES = dict(zip(RANO_FIELDS, ("NML", "T2 Prog.", "Cur. TL", "New TL", "Cur. NTL", "New NTL"), strict=True))


def in_words(text: str) -> list[str]:
    """The RANO response and the findings marked present."""
    rano = parse_rano(text)
    code = RANO_OPTIONS[rano.label]
    yes = [k.replace("_", " ").lower() for k, v in rano.fields.items() if v == "YES"]
    return [f"RANO response: {RANO_NAMES[code]} ({code}, option {rano.label})",
            "Present: " + (", ".join(yes) if yes else "none of the six findings")]  # fmt: skip


MODULE = register(
    BenchModule(
        name="longitudinal_mri",
        kind="radiology",
        title="Longitudinal MRI",
        has_loc=False,
        generate=lambda out, case_id, seed, o: make_longitudinal_case(out, case_id, seed, spacing=o.spacing or 1.0),
        parse=parse_rano,
        score=score_longitudinal,
        prior="Prior answer (no image reading).\nNON_MEASURABLE_LESION: NO\nT2_PROGRESSION: NO\n"
        "CURRENT_TARGET_LESION: YES\nNEW_TARGET_LESION: NO\nCURRENT_NON_TARGET_LESION: NO\n"
        "NEW_NON_TARGET_LESION: NO\nANSWER: B",
        baseline=LongitudinalBaseline,
        order=0,
        results_table=1,
        paper_cases=139,
        operations=("segmentation", "registration", "all"),
        registration_control=True,  # registration is read against the unregistered control
        details=(
            DetailColumns("Evidence fields", tuple((FIELD_TITLES[f], f"field:{f}") for f in RANO_FIELDS)),
            DetailColumns("Answer + evidence", (("Task", "task"), ("Strict", "strict"))),
        ),
        structures={
            "target": ("lesion", "tumor", "tumour", "enhanc", "residual", "progression", "response", "spd"),
            "off_target": ("ventricle", "choroid plexus", "pineal", "falx", "skull", "orbit", "sinus", "scalp"),
        },
        checkpoints=(Checkpoint("A6", "both time points were shown", True, "both_timepoints"),),
        precedence=(
            ("register the time points before a fusion", frozenset({"register_volumes"}), frozenset({"fusion"}), 2.0),
        ),
        answer_words=in_words,
        layout="side_by_side",  # the prior and current studies side by side
    )
)
