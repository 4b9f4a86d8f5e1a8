"""The model agent: any provider behind the `copilot.llm` seam drives the viewer through the registry's tools.

Protocol (Appendix H): the task prompt plus the scene inventory and baseline views (radiology) or the
per-round QuPath summaries and screenshot (pathology); tool-calling rounds up to the budget, one tool
per round for pathology; when the budget is spent, one more request without tools asks for the final
answer now. Model mistakes (unknown tool, malformed JSON arguments, schema violations) go back to the
model as tool errors and are recorded. Each round has one deadline (`round_deadline_s`) bounding its retries;
retryable faults (429 honouring Retry-After, 5xx, timeouts, dropped connections) are retried with capped
exponential backoff, other refusals are not; if a round fails the episode ends with status `error`, recorded, and
a batch goes on. `cancel` (the clinician's Stop) ends an in-flight request at once: status `stopped`, traced.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from copilot.agent.policy import EpisodeResult
from copilot.agent.prompts import pathology_round, task_prompt
from copilot.agent.settings import AgentSettings
from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.llm.calls import RetryPolicy, request_round
from copilot.llm.connect import connect, explain
from copilot.llm.types import ChatRequest, ModelError, Reply, ToolCall, ToolDecl, Usage
from copilot.session import Session
from copilot.tools.study_text import printable
from copilot.trace.outcome import CallOutcome
from copilot.trace.redact import redact_text

BUDGET_MESSAGE = (
    "The tool budget is exhausted. Give your final answer now, in the required format, using only the "
    "evidence already in this conversation."
)
ONE_TOOL_MESSAGE = "Not executed: this protocol allows one tool call per round; call the next tool in the next round."


class TransportFailure(RuntimeError):
    """The model service kept failing (or refused the request); the episode ends with status error."""

    def __init__(self, message: str, kind: str = "retryable", status: int | None = None, where: str = "") -> None:
        super().__init__(message)
        self.kind, self.status, self.where = kind, status, where


class RequestStopped(RuntimeError):
    """The clinician stopped the question while a model request was in flight."""


def _image_parts(images: list[Any], detail: str) -> list[dict[str, Any]]:
    parts = []
    for im in images:
        mime = "image/png" if im.mime == "image/apng" else im.mime
        url = f"data:{mime};base64,{base64.b64encode(im.data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
    return parts


def _inventory_text(inventory: list[dict[str, Any]]) -> str:
    lines = ["Scene inventory:"]
    for v in inventory:
        lines.append(
            f"- {v['name']} (id {v['id']}, {v['modality']}): {v['dimensions'][0]}x{v['dimensions'][1]}x"
            f"{v['dimensions'][2]} voxels, spacing {v['spacing_mm']} mm"
        )
    return "\n".join(lines)


def tool_decls(session: Any) -> list[ToolDecl]:
    """The tools of the session's track, as every provider is offered them."""
    return [ToolDecl(s.name, s.description, s.parameters_schema()) for s in session.registry.specs(session.track)]


class ChatAgent:
    """Runs one episode against a model service (OpenAI-compatible, Anthropic, Gemini: `settings.provider`)."""

    def __init__(
        self, settings: AgentSettings, client: Any = None, sleep: Callable[[float], Any] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.spec, self.wire = connect(settings.spec(), min(settings.timeout_s, settings.round_deadline_s),
                                       settings.stream, client)  # fmt: skip
        settings.model = self.spec.model  # a local server's model, once resolved, is the one prices and traces name
        self.name = self.spec.policy
        self.instructions = ""  # a clinician's note from the panel, added to the task
        self.cancel = cancel or threading.Event()  # set by the clinician's Stop; cleared when a question starts
        self.on_stream: Callable[[str], None] | None = None  # the model's text, piece by piece as it arrives
        self.scrub: Callable[[Any], Any] | None = None  # removes the patient's identifiers from every request
        self.usage = Usage()  # tokens of the current episode or question
        self.cost_usd: float | None = 0.0  # its cost; None once a turn had no price
        self.total_cost_usd: float | None = 0.0
        self.total_usage = Usage()  # the agent's whole life (a conversation's questions)
        self._sleep = sleep

    # ----- model calls -----
    def _complete(
        self, session: Session, messages: list[dict[str, Any]], tools: list[ToolDecl] | None, round_no: int,
        deadline: float,
    ) -> Reply:  # fmt: skip
        """One round's reply under the round's deadline (and the episode's), retried where it can help."""
        s = self.settings
        until = min(deadline, time.monotonic() + s.round_deadline_s)
        request = ChatRequest(messages, list(tools or []), s.temperature, s.max_tokens)
        attempts = [1]

        def retried(attempt: int, wait: float, exc: ModelError) -> None:
            attempts[0] = attempt + 1
            retry = {"round": round_no, "attempt": attempt, "wait_s": wait, "kind": exc.kind, "status": exc.status}
            self._trace(session, "model_retry", {**retry, "error": str(exc)})

        t0 = time.perf_counter()
        try:
            reply = request_round(self.wire, request, deadline=until, cancel=self.cancel,
                                  retry=RetryPolicy(s.max_retries, s.backoff_base_s, s.backoff_cap_s),
                                  on_text=self.on_stream, on_retry=retried, sleep=self._sleep)  # fmt: skip
        except ModelError as exc:
            if exc.kind == "cancelled":
                self._trace(session, "model_cancelled", {"round": round_no,
                                                         "after_s": round(time.perf_counter() - t0, 3)})  # fmt: skip
                raise RequestStopped(str(exc)) from exc
            where = redact_text(self.spec.base_url or str(getattr(self.wire, "base_url", "") or self.spec.provider))
            if exc.kind == "retryable":
                message = (f"model service at {where} failed {attempts[0]} times: {exc} "
                           f"({explain(exc, self.spec)})")  # fmt: skip
            else:
                message = explain(exc, self.spec, self.wire)
            raise TransportFailure(message, exc.kind, exc.status, where) from exc
        self._record_turn(session, round_no, reply, (time.perf_counter() - t0) * 1000.0)
        return reply

    def _record_turn(self, session: Session, round_no: int, reply: Reply, latency_ms: float) -> None:
        cost = self.settings.turn_cost(reply.usage)
        self.usage = self.usage + reply.usage
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost
        self.total_usage = self.total_usage + reply.usage
        self.total_cost_usd = None if cost is None or self.total_cost_usd is None else self.total_cost_usd + cost
        u = reply.usage
        self._trace(
            session,
            "model_turn",
            {
                "round": round_no,
                "latency_ms": round(latency_ms, 2),
                "usage": {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens, **u.as_dict()},
                "cost_usd": cost,
                "content": reply.text or None,
                "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                "finish_reason": reply.finish_reason,
                "streamed_chunks": reply.chunks,
            },
        )

    def usage_summary(self, whole: bool = False) -> dict[str, Any]:
        """Tokens and cost of this episode or question (`whole`: of every question so far); cost None for a model
        without a price, shown as tokens only."""
        usage, cost = (self.total_usage, self.total_cost_usd) if whole else (self.usage, self.cost_usd)
        return {**usage.as_dict(), "cost_usd": None if cost is None else round(cost, 6)}

    def _start_usage(self) -> None:
        self.usage, self.cost_usd = Usage(), 0.0

    @staticmethod
    def _trace(session: Session, kind: str, payload: dict[str, Any]) -> None:
        session.note(kind, payload)

    # ----- episode -----
    def start_record(self, budget: int, prompt_sha256: str, **more: Any) -> dict[str, Any]:
        """What `agent_start` records: the model as the result key names it (provider, id, wire), the budget."""
        base_url = redact_text(self.spec.base_url) if self.spec.base_url else None
        return {**self.spec.describe(), "base_url": base_url, "budget": budget, **more, "prompt_sha256": prompt_sha256}

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        deadline = time.monotonic() + self.settings.wall_clock_s
        prompt = task_prompt(case, budget, getattr(session, "protocol", None))
        pathology = viewer_kind(case.kind).stepwise
        self._start_usage()
        digest = hashlib.sha256((prompt.system + prompt.user).encode()).hexdigest()
        self._trace(session, "agent_start", self.start_record(budget, digest))
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": self._opening(session, prompt.user, pathology)},
        ]
        return self._rounds(session, messages, tool_decls(session), budget, deadline, pathology, prompt.user)

    def _rounds(
        self, session: Session, messages: list[dict[str, Any]], tools: list[ToolDecl], budget: int,
        deadline: float, pathology: bool, task: str,
    ) -> EpisodeResult:  # fmt: skip
        """The round loop every conversation shares: ask, run the calls, until an answer, the budget or the clock."""
        rounds, status, content = 0, "done", ""
        try:
            while True:
                if time.monotonic() > deadline:
                    status = "timeout"
                    break
                reply = self._request(session, messages, tools, rounds + 1, deadline)
                content = reply.text
                if not reply.tool_calls:
                    return self._final(session, content, status, rounds)
                if rounds >= budget:
                    status = "budget_exhausted"
                    break
                rounds += 1
                messages.append(reply.assistant_message())
                messages.extend(self._round_results(session, reply.tool_calls, pathology, task))
                if rounds >= budget:
                    status = "budget_exhausted"
                    break
            messages.append({"role": "user", "content": BUDGET_MESSAGE})
            reply = self._request(session, messages, None, rounds + 1, deadline + self.settings.round_deadline_s)
            return self._final(session, reply.text or content, status, rounds)
        except TransportFailure as exc:
            return self._failed(session, exc, content, rounds)
        except RequestStopped:
            return self._stopped(session, content, rounds)

    def _request(
        self, session: Session, messages: list[dict[str, Any]], tools: list[ToolDecl] | None, round_no: int,
        deadline: float,
    ) -> Reply:  # fmt: skip
        """One request for the conversation so far (scrubbed of the patient's identifiers where a host set `scrub`)."""
        outgoing = self.scrub(messages) if self.scrub is not None else messages
        return self._complete(session, outgoing, tools, round_no, deadline)

    def _round_results(
        self, session: Session, tool_calls: list[ToolCall], pathology: bool, task: str
    ) -> list[dict[str, Any]]:
        """The messages answering one round's calls."""
        return self._execute(session, tool_calls, pathology, task)

    def _result(self, content: str, status: str, rounds: int, error: str | None = None) -> EpisodeResult:
        return EpisodeResult(content, status, rounds, error, self.usage_summary())

    def _failed(self, session: Session, exc: TransportFailure, content: str, rounds: int) -> EpisodeResult:
        """The episode's end when the model service cannot be reached after the retries."""
        self._trace(session, "agent_error", {"error": str(exc), "kind": exc.kind, "rounds": rounds})
        return self._result(content, "error", rounds, str(exc))

    def _stopped(self, session: Session, content: str, rounds: int) -> EpisodeResult:
        """The episode's end when the clinician stopped an in-flight request."""
        self._trace(session, "final_answer", {"content": content, "status": "stopped", "rounds": rounds,
                                              "usage": self.usage_summary()})  # fmt: skip
        return self._result(content, "stopped", rounds)

    def _final(self, session: Session, content: str, status: str, rounds: int) -> EpisodeResult:
        self._trace(session, "final_answer", {"content": content, "status": status, "rounds": rounds,
                                              "usage": self.usage_summary()})  # fmt: skip
        return self._result(content, status, rounds)

    def _opening(self, session: Session, task: str, pathology: bool) -> list[dict[str, Any]]:
        """Task text plus what the runtime attaches: inventory and baseline views, or the QuPath observation."""
        detail = self.settings.image_detail
        if self.instructions:
            task = f"{task}\n\nClinician's instruction: {self.instructions}"
        name, args = viewer_kind(session.kind).opening
        if pathology:
            shot = session.call(name, args, actor="system")
            text = pathology_round(
                task, shot.result.get("direct_state_summary", ""), shot.result.get("gui_state_summary", ""),
                getattr(session, "protocol", None),
            )  # fmt: skip
            return [{"type": "text", "text": text}, *_image_parts(shot.images, detail)]
        views = session.call(name, args, actor="system")
        inventory = _inventory_text(views.result.get("inventory", []))
        text = f"{task}\n\n{inventory}\nBaseline axial, sagittal and coronal views follow."
        return [{"type": "text", "text": text}, *_image_parts(views.images, detail)]

    def _execute(
        self, session: Session, tool_calls: list[ToolCall], pathology: bool, task: str
    ) -> list[dict[str, Any]]:
        """Tool messages for every call of a round (+ a user message carrying the images)."""
        out: list[dict[str, Any]] = []
        images: list[Any] = []
        last: CallOutcome | None = None
        for n, call in enumerate(tool_calls):
            if pathology and n > 0:
                self._trace(session, "model_error", {"kind": "extra_tool_call", "tool": call.name})
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": json.dumps(
                            {"ok": False, "error": {"code": "one_tool_per_round", "message": ONE_TOOL_MESSAGE}}
                        ),
                    }
                )
                continue
            try:
                args = json.loads(call.arguments or "{}")
            except json.JSONDecodeError as exc:
                self._trace(
                    session,
                    "model_error",
                    {"kind": "malformed_arguments", "tool": call.name, "arguments": call.arguments},
                )
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call.id,
                        "content": json.dumps(
                            {
                                "ok": False,
                                "error": {"code": "malformed_arguments", "message": f"arguments are not JSON: {exc}"},
                            }
                        ),
                    }
                )
                continue
            last = session.call(call.name, args, actor="agent")
            result = printable(last.envelope(with_images=False))  # study text in results: printable data only
            out.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
            images.extend(last.images)
        detail = self.settings.image_detail
        if pathology:
            summary = last.result if last is not None and "direct_state_summary" in last.result else None
            if summary is None or not images:
                state = session.call("focus_qupath", {}, actor="system")
                summary, images = state.result, images or state.images
            text = pathology_round(task, summary.get("direct_state_summary", ""), summary.get("gui_state_summary", ""),
                                   getattr(session, "protocol", None))  # fmt: skip
            out.append(
                {"role": "user", "content": [{"type": "text", "text": text}, *_image_parts(images[-1:], detail)]}
            )
        elif images:
            labels = ", ".join(f"{im.view} ({im.label})" for im in images)
            out.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": f"Images returned by the tools: {labels}"},
                        *_image_parts(images, detail),
                    ],
                }
            )
        return out
