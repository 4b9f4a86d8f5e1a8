"""The task prompts of Appendix H, filled per case from `resources/prompts/` (or the template a module or kind
declares itself) and the case's `prompt` fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from copilot import plugins
from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.resources import prompt_template, resources_dir

DEFAULT_BUDGET = 20


class _Defaults(dict):
    def __missing__(self, key: str) -> str:
        return f"<{key}>"


def template(name: str, protocol: str | None = None) -> str:
    """A prompt template; under the `paper` protocol, the paper's own (resources/prompts/paper/, see SOURCES.json);
    a FileNotFoundError when nothing declares or holds one of that name."""
    if protocol == "paper":
        paper = resources_dir() / "prompts" / "paper" / f"{name}.txt"
        if paper.is_file():
            return paper.read_text(encoding="utf-8")
    text = prompt_template(name)
    if text is None:
        raise FileNotFoundError(f"no prompt {name!r}: no module or kind declares it and resources/prompts lacks it")
    return text


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


def task_prompt(case: CasePack, budget: int = DEFAULT_BUDGET, protocol: str | None = None) -> TaskPrompt:
    """System instruction and task text for a case (the scene inventory or screenshots are attached apart); the
    paper protocol has a system instruction per radiology module."""
    viewer_kind(case.kind)  # a plug-in kind declares its system prompt when discovered
    if case.module and prompt_template(case.module) is None:
        plugins.load(plugins.MODULES_GROUP)  # a plug-in module declares its task prompt when discovered
    if not case.module or prompt_template(case.module) is None:
        raise ValueError(
            f"no benchmark task for this study (module {case.module!r}); ask the model a question instead (study mode)"
        )
    fields = _Defaults(_fields(case, budget))
    own = resources_dir() / "prompts" / "paper" / f"{case.module}_system.txt"
    name = f"{case.module}_system" if protocol == "paper" and own.is_file() else f"{case.kind}_system"
    system = template(name, protocol)
    return TaskPrompt(system.format_map(fields), template(case.module, protocol).format_map(fields))


def pathology_round(task: str, direct_state_summary: str, gui_state_summary: str, protocol: str | None = None) -> str:
    """The per-round observation text of the pathology protocol."""
    return template("pathology_round", protocol).format(
        task=task, direct_state_summary=direct_state_summary, gui_state_summary=gui_state_summary
    )
