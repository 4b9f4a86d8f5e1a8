"""Lung PET/CT (NSCLC Radiogenomics): five staging questions with evidence on the source series."""

from copilot.agent.baselines import LungBaseline
from copilot.bench.parsers import parse_compact
from copilot.bench.scoring import score_lung
from copilot.cases.lung import make_lung_case
from copilot.medflow.registry import BenchModule, register

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
    )
)
