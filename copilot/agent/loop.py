"""The chat-completions agent: any OpenAI-compatible service drives the viewer through the registry's tools.

Protocol (Appendix H): the task prompt plus the scene inventory and baseline views (radiology) or the
per-round QuPath summaries and screenshot (pathology); tool-calling rounds up to the budget, one tool
per round for pathology; when the budget is spent, one more request without tools asks for the final
answer now. Model mistakes (unknown tool, malformed JSON arguments, schema violations) go back to the
model as tool errors and are recorded. Transport faults (timeouts, connection errors, 429 honouring
Retry-After, 5xx) are retried with capped exponential backoff; if they persist the episode ends with
status `error`, recorded, and a batch goes on.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

import openai

from copilot.agent.policy import EpisodeResult
from copilot.agent.prompts import pathology_round, task_prompt
from copilot.agent.settings import AgentSettings
from copilot.cases.pack import CasePack
from copilot.kinds import viewer_kind
from copilot.session import Session
from copilot.trace.outcome import CallOutcome

BUDGET_MESSAGE = (
    "The tool budget is exhausted. Give your final answer now, in the required format, using only the "
    "evidence already in this conversation."
)
ONE_TOOL_MESSAGE = "Not executed: this protocol allows one tool call per round; call the next tool in the next round."
RETRYABLE = (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)


class TransportFailure(RuntimeError):
    """The model service kept failing (or refused the request); the episode ends with status error."""


def _image_parts(images: list[Any], detail: str) -> list[dict[str, Any]]:
    parts = []
    for im in images:
        mime = "image/png" if im.mime == "image/apng" else im.mime
        url = f"data:{mime};base64,{base64.b64encode(im.data).decode('ascii')}"
        parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
    return parts


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _inventory_text(inventory: list[dict[str, Any]]) -> str:
    lines = ["Scene inventory:"]
    for v in inventory:
        lines.append(
            f"- {v['name']} (id {v['id']}, {v['modality']}): {v['dimensions'][0]}x{v['dimensions'][1]}x"
            f"{v['dimensions'][2]} voxels, spacing {v['spacing_mm']} mm"
        )
    return "\n".join(lines)


class ChatAgent:
    """Runs one episode against an OpenAI-compatible chat-completions endpoint."""

    def __init__(self, settings: AgentSettings, client: Any = None, sleep: Any = time.sleep) -> None:
        self.settings = settings
        self.name = f"openai:{settings.model}"
        self.instructions = ""  # a clinician's note from the panel, added to the task
        self.client = client or openai.OpenAI(
            base_url=settings.base_url, api_key=settings.api_key, timeout=settings.timeout_s, max_retries=0
        )
        self._sleep = sleep

    # ----- model calls -----
    def _complete(
        self,
        session: Session,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        round_no: int,
        deadline: float,
    ) -> Any:
        s = self.settings
        for attempt in range(s.max_retries + 1):
            t0 = time.perf_counter()
            try:
                kwargs: dict[str, Any] = {"model": s.model, "messages": messages, "temperature": s.temperature}
                if tools:
                    kwargs["tools"] = tools
                response = self.client.chat.completions.create(**kwargs)
            except RETRYABLE as exc:
                wait = _retry_after(exc)
                wait = min(s.backoff_cap_s, wait if wait is not None else s.backoff_base_s * 2**attempt)
                self._trace(
                    session,
                    "model_retry",
                    {
                        "round": round_no,
                        "attempt": attempt + 1,
                        "wait_s": wait,
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )
                if attempt == s.max_retries or time.monotonic() + wait > deadline:
                    raise TransportFailure(
                        f"model service at {self.client.base_url} failed {attempt + 1} times: "
                        f"{type(exc).__name__}: {exc} (settings: OPENAI_BASE_URL, OPENAI_API_KEY, MEDCOPILOT_MODEL)"
                    ) from exc
                self._sleep(wait)
                continue
            except openai.APIStatusError as exc:  # 4xx other than 429: retrying cannot help
                raise TransportFailure(f"model service refused the request: {exc.status_code} {exc}") from exc
            latency = (time.perf_counter() - t0) * 1000.0
            self._record_turn(session, round_no, response, latency)
            return response
        raise TransportFailure("unreachable")

    def _record_turn(self, session: Session, round_no: int, response: Any, latency_ms: float) -> None:
        usage = getattr(response, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        msg = response.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in msg.tool_calls or []]
        self._trace(
            session,
            "model_turn",
            {
                "round": round_no,
                "latency_ms": round(latency_ms, 2),
                "usage": {"prompt_tokens": pt, "completion_tokens": ct},
                "cost_usd": self.settings.cost(pt, ct),
                "content": msg.content,
                "tool_calls": calls,
                "finish_reason": response.choices[0].finish_reason,
            },
        )

    @staticmethod
    def _trace(session: Session, kind: str, payload: dict[str, Any]) -> None:
        session.note(kind, payload)

    # ----- episode -----
    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        deadline = time.monotonic() + self.settings.wall_clock_s
        prompt = task_prompt(case, budget, getattr(session, "protocol", None))
        pathology = viewer_kind(case.kind).stepwise
        tools = [
            {
                "type": "function",
                "function": {"name": s.name, "description": s.description, "parameters": s.parameters_schema()},
            }
            for s in session.registry.specs(session.track)
        ]
        self._trace(
            session,
            "agent_start",
            {
                "model": self.settings.model,
                "base_url": self.settings.base_url,
                "budget": budget,
                "prompt_sha256": hashlib.sha256((prompt.system + prompt.user).encode()).hexdigest(),
            },
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": self._opening(session, prompt.user, pathology)},
        ]
        return self._rounds(session, messages, tools, budget, deadline, pathology, prompt.user)

    def _rounds(
        self, session: Session, messages: list[dict[str, Any]], tools: list[dict[str, Any]], budget: int,
        deadline: float, pathology: bool, task: str,
    ) -> EpisodeResult:  # fmt: skip
        """The round loop every conversation shares: ask, run the calls, until an answer, the budget or the clock."""
        rounds, status, content = 0, "done", ""
        try:
            while True:
                if time.monotonic() > deadline:
                    status = "timeout"
                    break
                response = self._request(session, messages, tools, rounds + 1, deadline)
                msg = response.choices[0].message
                content = msg.content or ""
                if not msg.tool_calls:
                    return self._final(session, content, status, rounds)
                if rounds >= budget:
                    status = "budget_exhausted"
                    break
                rounds += 1
                calls = [c.model_dump() for c in msg.tool_calls]
                messages.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
                messages.extend(self._round_results(session, msg.tool_calls, pathology, task))
                if rounds >= budget:
                    status = "budget_exhausted"
                    break
            messages.append({"role": "user", "content": BUDGET_MESSAGE})
            response = self._request(session, messages, None, rounds + 1, deadline + self.settings.timeout_s)
            return self._final(session, response.choices[0].message.content or content, status, rounds)
        except TransportFailure as exc:
            return self._failed(session, exc, content, rounds)

    def _request(
        self, session: Session, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, round_no: int,
        deadline: float,
    ) -> Any:  # fmt: skip
        """One completion request for the conversation so far."""
        return self._complete(session, messages, tools, round_no, deadline)

    def _round_results(
        self, session: Session, tool_calls: list[Any], pathology: bool, task: str
    ) -> list[dict[str, Any]]:
        """The messages answering one round's calls."""
        return self._execute(session, tool_calls, pathology, task)

    def _failed(self, session: Session, exc: TransportFailure, content: str, rounds: int) -> EpisodeResult:
        """The episode's end when the model service cannot be reached after the retries."""
        self._trace(session, "agent_error", {"error": str(exc), "rounds": rounds})
        return EpisodeResult(content, "error", rounds, str(exc))

    def _final(self, session: Session, content: str, status: str, rounds: int) -> EpisodeResult:
        self._trace(session, "final_answer", {"content": content, "status": status, "rounds": rounds})
        return EpisodeResult(content, status, rounds)

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

    def _execute(self, session: Session, tool_calls: list[Any], pathology: bool, task: str) -> list[dict[str, Any]]:
        """Tool messages for every call of a round (+ a user message carrying the images)."""
        out: list[dict[str, Any]] = []
        images: list[Any] = []
        last: CallOutcome | None = None
        for n, call in enumerate(tool_calls):
            if pathology and n > 0:
                self._trace(session, "model_error", {"kind": "extra_tool_call", "tool": call.function.name})
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
                args = json.loads(call.function.arguments or "{}")
            except json.JSONDecodeError as exc:
                self._trace(
                    session,
                    "model_error",
                    {"kind": "malformed_arguments", "tool": call.function.name, "arguments": call.function.arguments},
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
            last = session.call(call.function.name, args, actor="agent")
            out.append(
                {"role": "tool", "tool_call_id": call.id, "content": json.dumps(last.envelope(with_images=False))}
            )
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
