"""The model agent: any provider behind the `copilot.llm` seam drives the viewer through the registry's tools.

Protocol (Appendix H): the task prompt plus the scene inventory and baseline views (radiology) or the
per-round QuPath summaries and screenshot (pathology); tool-calling rounds up to the budget, one tool
per round for pathology; when the budget is spent, one more request without tools asks for the final
answer now. Model mistakes (unknown tool, malformed JSON arguments, schema violations) go back to the
model as tool errors and are recorded. Each round has one deadline (`round_deadline_s`) bounding its retries;
retryable faults (429 honouring Retry-After, 5xx, timeouts, dropped connections) are retried with capped
exponential backoff, other refusals are not; if a round fails the episode ends with status `error`, recorded, and
a batch goes on. `cancel` (the clinician's Stop) ends an in-flight request at once: status `stopped`, traced.

The model's profile (`copilot.llm.profiles`) decides what each request carries: sampling only where the service
accepts it, the reasoning level, the tool protocol (native calls or text), and the image and context budget (the
oldest images left out of a request first, traced). A server's refusal for images, context or tools is met once by
adapting within that budget (traced as `model_adapted`), else the episode stops naming the server flag to change.
A reply that cannot be read is a named error, retried, never an empty answer. A turn's tool calls are bounded
(`MAX_TOOL_CALLS_PER_TURN`, the excess answered as tool errors) and so are the arguments kept and re-sent.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from copilot.agent.policy import EpisodeResult
from copilot.agent.prompts import pathology_round, task_prompt
from copilot.agent.settings import AgentSettings
from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.llm.budget import Fitted, ImageBudget, fit
from copilot.llm.calls import RetryPolicy, request_round
from copilot.llm.connect import connect, explain
from copilot.llm.profiles import check_reasoning, check_tool_protocol, configuration, profile_for
from copilot.llm.providers import PROVIDERS
from copilot.llm.text_tools import TextTools
from copilot.llm.types import PROVIDER_STATE, ChatRequest, ModelError, Reply, ToolCall, ToolDecl, Usage, image_limit_of
from copilot.session import Session
from copilot.tools.study_text import printable
from copilot.trace.outcome import CallOutcome
from copilot.trace.redact import redact_text

BUDGET_MESSAGE = (
    "The tool budget is exhausted. Give your final answer now, in the required format, using only the "
    "evidence already in this conversation."
)
ONE_TOOL_MESSAGE = "Not executed: this protocol allows one tool call per round; call the next tool in the next round."
MAX_TOOL_CALLS_PER_TURN = 32  # calls of one model turn that run; the rest are answered as tool errors
MAX_ARGUMENT_CHARS = 16_384  # a call's arguments beyond this are refused, and kept (and re-sent) only as a note
TRACE_ARGUMENT_CHARS = 2048  # arguments recorded in full up to this; longer ones by length, digest and head


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """A warning on stderr, once per process (a batch builds an agent per episode)."""
    if message not in _WARNED:
        _WARNED.add(message)
        logging.getLogger("medcopilot.models").warning(message)


def _tool_error(call_id: str, code: str, message: str) -> dict[str, Any]:
    error = {"ok": False, "error": {"code": code, "message": message}}
    return {"role": "tool", "tool_call_id": call_id, "content": json.dumps(error)}


def traced_call(call: ToolCall) -> dict[str, Any]:
    """A call as `model_turn` records it: arguments in full when short, else by length, digest and head."""
    out: dict[str, Any] = {"id": call.id, "name": call.name[:200]}
    if len(call.arguments) <= TRACE_ARGUMENT_CHARS:
        out["arguments"] = call.arguments
    else:
        out.update(arguments_chars=len(call.arguments), arguments_head=call.arguments[:256],
                   arguments_sha256=hashlib.sha256(call.arguments.encode("utf-8", "replace")).hexdigest())
    if call.problem:
        out["problem"] = call.problem
    return out


def turn_message(reply: Reply) -> dict[str, Any]:
    """The model's turn as the conversation keeps it: calls past the per-turn limit and arguments past their limit
    kept only as short notes (the service's own form of the turn dropped then, as it holds them in full)."""
    message = reply.assistant_message()
    calls = message.get("tool_calls") or []
    bounded = [c if n < MAX_TOOL_CALLS_PER_TURN and len(c["function"]["arguments"] or "") <= MAX_ARGUMENT_CHARS
               else {**c, "function": {"name": c["function"]["name"][:200], "arguments": "{}"}}
               for n, c in enumerate(calls)]  # fmt: skip
    if bounded != calls:
        message["tool_calls"] = bounded
        message.pop(PROVIDER_STATE, None)
    return message


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
                                       settings.stream, client, wire=settings.wire)  # fmt: skip
        settings.model = self.spec.model  # a local server's model, once resolved, is the one prices and traces name
        self.profile = profile_for(self.spec.provider, self.spec.model)
        self.reasoning = check_reasoning(self.profile, settings.reasoning)
        self.tool_protocol = check_tool_protocol(settings.tool_protocol, self.profile)
        if self.tool_protocol == "text":
            self.wire = TextTools(self.wire)
            self.spec = replace(self.spec, wire=self.wire.wire)
        self.budget = ImageBudget(settings.max_images or self.profile.max_images, self.profile.context_tokens,
                                  self.profile.tokens_per_image, settings.max_tokens)  # fmt: skip
        if self.profile.warning:
            _warn_once(self.profile.warning)
        self._adapted: set[str] = set()  # the refusals already adapted to (each once)
        self._dropped = 0  # images left out of the last request (a change is traced)
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
        fitted = self._fit(session, messages, round_no)
        request = ChatRequest(fitted.messages, list(tools or []), self.sent_temperature(), s.max_tokens,
                              self.reasoning)  # fmt: skip
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
            if self._adapt(session, exc, round_no, fitted):
                return self._complete(session, messages, tools, round_no, deadline)
            where = redact_text(self.spec.base_url or str(getattr(self.wire, "base_url", "") or self.spec.provider))
            if exc.kind == "retryable":
                message = (f"model service at {where} failed {attempts[0]} times: {exc} "
                           f"({explain(exc, self.spec)})")  # fmt: skip
            else:
                message = explain(exc, self.spec, self.wire)
            raise TransportFailure(message, exc.kind, exc.status, where) from exc
        self._record_turn(session, round_no, reply, (time.perf_counter() - t0) * 1000.0)
        return reply

    def sent_temperature(self) -> float | None:
        """The temperature requests carry: the setting where the profile accepts one, else none (the default)."""
        return self.settings.temperature if self.profile.temperature else None

    def _fit(self, session: Session, messages: list[dict[str, Any]], round_no: int) -> Fitted:
        """The request within the image and context budget; a change in what is left out is traced."""
        fitted = fit(messages, self.budget)
        if fitted.images_dropped != self._dropped:
            self._dropped = fitted.images_dropped
            change = {"round": round_no, "images_sent": fitted.images_sent, "images_dropped": fitted.images_dropped}
            self._trace(session, "images_dropped", {**change, **self.budget.record()})
        return fitted

    def _adapt(self, session: Session, exc: ModelError, round_no: int, fitted: Fitted) -> bool:
        """Meet a refusal for images, context or tools once, within the declared budget; False: nothing to adapt."""
        if not self.settings.adapt or exc.kind in self._adapted:
            return False
        change: dict[str, Any] = {}
        if exc.kind == "image_limit":
            limit = image_limit_of(str(exc))
            limit = limit if limit is not None else fitted.images_sent - 1
            if 1 <= limit < fitted.images_sent:
                self.budget = replace(self.budget, max_images=limit)
                change = {"max_images": limit}
        elif exc.kind == "context" and fitted.images_sent > 1:
            self.budget = replace(self.budget, max_images=max(1, fitted.images_sent // 2))
            change = {"max_images": self.budget.max_images}
        elif exc.kind == "tools_unsupported" and not isinstance(self.wire, TextTools):
            self.wire = TextTools(self.wire)
            self.tool_protocol = "text"
            self.spec = replace(self.spec, wire=self.wire.wire)
            change = {"tool_protocol": "text"}
        if not change:
            return False
        self._adapted.add(exc.kind)
        self._trace(session, "model_adapted", {"round": round_no, "refusal": exc.kind, "status": exc.status,
                                               "message": " ".join(str(exc).split())[:300], **change})  # fmt: skip
        return True

    def request_record(self) -> dict[str, Any]:
        """What every request of the episode carries, as sent: sampling, reasoning, tools, images, stream."""
        return {"temperature": self.sent_temperature(), "max_output_tokens": self.settings.max_tokens,
                "reasoning": self.reasoning, "tool_protocol": self.tool_protocol, "stream": self.settings.stream,
                **self.budget.record()}  # fmt: skip

    def config_key(self) -> str:
        """The model configuration as the result key names it: two runs differing in any of it never pool."""
        r = self.request_record()
        return configuration(self.profile, self.spec.wire, r["temperature"], r["reasoning"], r["tool_protocol"],
                             r["max_images"])  # fmt: skip

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
                "tool_calls": [traced_call(c) for c in reply.tool_calls[:MAX_TOOL_CALLS_PER_TURN]],
                "tool_calls_total": len(reply.tool_calls),
                "finish_reason": reply.finish_reason,
                "streamed_chunks": reply.chunks,
                "model_version": reply.model_version,
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
        record = {**self.spec.describe(), "base_url": base_url, "budget": budget, **more,
                  "prompt_sha256": prompt_sha256, "profile": self.profile.record(), "request": self.request_record(),
                  "config": self.config_key(),
                  "provider_telemetry_name": PROVIDERS[self.spec.provider].telemetry_name}  # fmt: skip
        if self.profile.warning:
            record["profile_warning"] = self.profile.warning
        return record

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
                messages.append(turn_message(reply))
                messages.extend(self._round_results(session, reply.tool_calls, pathology, task))
                if rounds >= budget or getattr(session, "budget_spent", False):  # a call budget spent mid-round
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

    def _refusal(self, session: Session, call: ToolCall, n: int, total: int) -> dict[str, Any] | None:
        """The tool error for a call that does not run (past the turn's limit, arguments too large, a malformed call
        of the text protocol), or None."""
        if n >= MAX_TOOL_CALLS_PER_TURN:
            if n == MAX_TOOL_CALLS_PER_TURN:
                self._trace(session, "model_error", {"kind": "too_many_tool_calls", "calls": total,
                                                     "limit": MAX_TOOL_CALLS_PER_TURN})  # fmt: skip
            return _tool_error(call.id, "too_many_tool_calls", f"not executed: at most {MAX_TOOL_CALLS_PER_TURN} "
                                                               "tool calls run per turn")  # fmt: skip
        if len(call.arguments) > MAX_ARGUMENT_CHARS:
            self._trace(session, "model_error", {"kind": "arguments_too_large", **traced_call(call)})
            size = len(call.arguments)
            return _tool_error(call.id, "arguments_too_large",
                               f"not executed: the arguments hold {size} characters; at most {MAX_ARGUMENT_CHARS}")
        if call.problem:
            self._trace(session, "model_error", {"kind": "malformed_call", **traced_call(call)})
            return _tool_error(call.id, "malformed_call", f"not executed: {call.problem}")
        return None

    def _execute(
        self, session: Session, tool_calls: list[ToolCall], pathology: bool, task: str
    ) -> list[dict[str, Any]]:
        """Tool messages for every call of a round (+ a user message carrying the images)."""
        out: list[dict[str, Any]] = []
        images: list[Any] = []
        last: CallOutcome | None = None
        for n, call in enumerate(tool_calls):
            refusal = self._refusal(session, call, n, len(tool_calls))
            if refusal is not None:
                out.append(refusal)
                continue
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
            last = session.call(call.name, args, actor="agent", call_id=call.id)
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
