"""The task prompts of Appendix H, filled per case from `resources/prompts/` and the case's `prompt` fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from copilot.cases.pack import CasePack
from copilot.resources import resources_dir

DEFAULT_BUDGET = 20


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def template(name: str) -> str:
    return (resources_dir() / "prompts" / f"{name}.txt").read_text(encoding="utf-8")


@dataclass(frozen=True)
class TaskPrompt:
    system: str
    user: str


def _fields(case: CasePack, budget: int) -> dict[str, Any]:
    p = dict(case.prompt)
    fields: dict[str, Any] = {"case_id": case.case_id, "budget": budget, **p}
    if "loaded_files" in p:
        fields["loaded_files"] = ", ".join(p["loaded_files"])
    if "series" in p and isinstance(p["series"], dict):
        fields["series"] = ", ".join(f"{k} = {v}" for k, v in p["series"].items())
    return fields


def task_prompt(case: CasePack, budget: int = DEFAULT_BUDGET) -> TaskPrompt:
    """System instruction and task text for a case (the scene inventory or screenshots are attached apart)."""
    if not (resources_dir() / "prompts" / f"{case.module}.txt").is_file() or not case.module:
        raise ValueError(
            f"no benchmark task for this study (module {case.module!r}); ask the model a question instead (study mode)"
        )
    fields = _Defaults(_fields(case, budget))
    system = template(f"{case.kind}_system")
    return TaskPrompt(system.format_map(fields), template(case.module).format_map(fields))


def pathology_round(task: str, direct_state_summary: str, gui_state_summary: str) -> str:
    """The per-round observation text of the pathology protocol."""
    return template("pathology_round").format(
        task=task, direct_state_summary=direct_state_summary, gui_state_summary=gui_state_summary
    )
