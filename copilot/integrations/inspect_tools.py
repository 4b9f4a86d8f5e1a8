"""A sample's session as Inspect AI sees it: each handler of its track an Inspect tool that goes through the same
`Session.call` (validation, rollback, trace) within the episode's round budget, returning the JSON envelope as
text and the rendered views as images; and the approval policy that refuses every call that would write outside
the session (a MedFlow-Bench run stores nothing), the refusal traced as a write attempt.

The tools are shared by every sample of a task; each finds its own sample's `Episode` through a context variable
set by the solver for the duration of the sample.
"""

from __future__ import annotations

import base64
import json
from contextvars import ContextVar
from typing import Any

import anyio
from inspect_ai.approval import Approval, ApprovalPolicy, approver, auto_approver
from inspect_ai.model import ContentImage, ContentText
from inspect_ai.tool import ToolDef, ToolParams

from copilot.session import Session
from copilot.tools.registry import HandlerSpec
from copilot.tools.study_text import printable
from copilot.tools.writes import WRITE_EVENT, attempt
from copilot.trace.outcome import CallOutcome, EncodedImage

ONE_TOOL = "Not executed: this protocol allows one tool call per round; call the next tool in the next round."
REFUSED_BY = "inspect approval policy"
_EPISODE: ContextVar[Episode | None] = ContextVar("medflow_episode", default=None)


class Episode:
    """One sample's session, reached through its round budget (`medflow.bench_run.CallBudget`): the calls of the
    current round, the last outcome and the images the round returned (a pathology round shows its last)."""

    def __init__(self, session: Session, budgeted: Any, stepwise: bool, detail: str = "auto") -> None:
        self.session, self.budgeted, self.stepwise, self.detail = session, budgeted, stepwise, detail
        self.calls_in_round = 0
        self.last: CallOutcome | None = None
        self.round_images: list[EncodedImage] = []
        self.call_ids: list[tuple[str, str]] = []  # (tool, id) of the round's calls, in the order they run

    def new_round(self, calls: list[tuple[str, str]]) -> None:
        self.calls_in_round, self.last, self.round_images, self.call_ids = 0, None, [], list(calls)

    def _call_id(self, name: str) -> str | None:
        """The model's id of the next call of this tool in the round (the trace joins turns and calls by it)."""
        for n, (tool, call_id) in enumerate(self.call_ids):
            if tool == name:
                del self.call_ids[n]
                return call_id
        return None

    def note(self, event_type: str, payload: dict[str, Any]) -> None:
        self.budgeted.note(event_type, payload)

    async def call(self, name: str, args: dict[str, Any]) -> list[ContentText | ContentImage]:
        """One tool call of the model: through the budget and the session, in a worker thread."""
        call_id = self._call_id(name)
        if self.stepwise and self.calls_in_round > 0:
            self.note("model_error", {"kind": "extra_tool_call", "tool": name})
            error = {"ok": False, "error": {"code": "one_tool_per_round", "message": ONE_TOOL}}
            return [ContentText(text=json.dumps(error))]
        self.calls_in_round += 1
        outcome: CallOutcome = await anyio.to_thread.run_sync(
            lambda: self.budgeted.call(name, args, actor="agent", call_id=call_id)
        )
        self.last = outcome
        self.round_images.extend(outcome.images)
        content: list[ContentText | ContentImage] = [
            ContentText(text=json.dumps(printable(outcome.envelope(with_images=False))))  # study text: data only
        ]
        if not self.stepwise:  # a pathology round shows its screenshot with the round's summaries instead
            content += image_content(outcome.images, self.detail)
        return content

    def refused_write(self, name: str, args: dict[str, Any]) -> None:
        """Trace a call the approval policy refused before it reached the session (what it would have written)."""
        plan = self.session.plan_write(name, args, "agent")
        if plan is not None:
            self.session.note(WRITE_EVENT, attempt(plan, args, "agent", "refused", REFUSED_BY))
        else:
            self.session.note(WRITE_EVENT, {"handler": name, "args": args, "actor": "agent", "decision": "refused",
                                            "by": REFUSED_BY})  # fmt: skip


def image_content(images: list[EncodedImage], detail: str = "auto") -> list[ContentText | ContentImage]:
    """Rendered views as Inspect images (data URLs of the exact bytes the trace records)."""
    out: list[ContentText | ContentImage] = []
    for im in images:
        mime = "image/png" if im.mime == "image/apng" else im.mime
        url = f"data:{mime};base64,{base64.b64encode(im.data).decode('ascii')}"
        out.append(ContentImage(image=url, detail=detail))
    return out


def current() -> Episode:
    """The episode of the sample being run."""
    episode = _EPISODE.get()
    if episode is None:
        raise RuntimeError("a MedFlow-Bench tool was called outside a sample's episode")
    return episode


def enter(episode: Episode) -> Any:
    """Make `episode` the current sample's; returns the token `leave` takes."""
    return _EPISODE.set(episode)


def leave(token: Any) -> None:
    _EPISODE.reset(token)


def _runner(name: str) -> Any:
    async def run(**kwargs: Any) -> list[ContentText | ContentImage]:
        return await current().call(name, kwargs)

    return run


def handler_tools(specs: list[HandlerSpec]) -> list[ToolDef]:
    """Each handler as an Inspect tool with its own name, description and JSON schema."""
    return [ToolDef(_runner(s.name), name=s.name, description=s.description,
                    parameters=ToolParams.model_validate(s.parameters_schema())) for s in specs]  # fmt: skip


@approver(name="medflow_refuse_writes")
def refuse_writes() -> Any:
    """Refuses every call of the second kind (an export, a PACS store): a benchmark episode writes nothing."""

    async def approve(message: str, call: Any, view: Any, history: list[Any]) -> Approval:
        episode = _EPISODE.get()
        if episode is not None:
            await anyio.to_thread.run_sync(lambda: episode.refused_write(call.function, dict(call.arguments)))
        return Approval(decision="reject", explanation=f"{call.function} writes outside the session; a MedFlow-Bench "
                        "episode stores nothing (refused by the task's approval policy)")  # fmt: skip

    return approve


def approval_policy(write_handlers: list[str]) -> list[ApprovalPolicy]:
    """Writes refused, every other handler approved."""
    refuse = [ApprovalPolicy(refuse_writes(), write_handlers)] if write_handlers else []
    return [*refuse, ApprovalPolicy(auto_approver(), "*")]
