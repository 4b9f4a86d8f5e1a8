"""Longitudinal MRI (LUMIERE): RANO response from an OLD/CURRENT pair, with six lesion-state fields."""

from copilot.agent.baselines import LongitudinalBaseline
from copilot.bench.parsers import parse_rano
from copilot.bench.scoring import score_longitudinal
from copilot.cases.longitudinal import make_longitudinal_case
from copilot.medflow.registry import BenchModule, register

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
    )
)
