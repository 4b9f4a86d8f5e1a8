"""Inspect AI tasks of MedCopilot, found through the `inspect_ai` entry point: `inspect eval medcopilot/medflow -T
module=brain_mri -T track=A -T protocol=paper --model PROVIDER/MODEL`. The task is built by
`copilot.integrations.inspect_task`; it is declared here so that Inspect names it after the distribution."""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.util import registry_info

from copilot.integrations.inspect_task import medflow_task

TASK = "medcopilot/medflow"


def _medflow(
    module: str = "brain_mri",
    track: str = "A",
    protocol: str = "paper",
    budget: int = 20,
    cases: str = "",
    n: int = 1,
    seed: int = 0,
    run_dir: str = "medflow-run",
    ops: str = "",
    backend: str = "embedded",
) -> Task:
    """MedFlow-Bench cases of one module as samples: the handlers as tools, the budget as the round limit,
    Task/Strict/Loc from the benchmark's scorers. `cases`: a folder of case packs (default: `n` synthetic cases
    made with `seed` under RUN_DIR/cases); each episode's hash-chained trace goes under RUN_DIR/episodes/."""
    return medflow_task(module=module, track=track, protocol=protocol, budget=budget, cases=cases, n=n, seed=seed,
                        run_dir=run_dir, ops=ops, backend=backend)  # fmt: skip


medflow = task(name="medflow")(_medflow)  # Inspect prefixes the installed distribution's name
if registry_info(medflow).name != TASK:  # a source tree's own metadata (run from its root) hides the distribution
    medflow = task(name=TASK)(_medflow)
