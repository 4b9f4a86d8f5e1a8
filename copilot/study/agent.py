"""A conversation with a model (any provider of `copilot.llm`) about one study: a question, tool-calling rounds on the
audited handlers, an answer; then follow-ups in the same conversation.

The first question goes with the study-agnostic system prompt (`resources/prompts/study_<kind>_system.txt`),
the study inventory and the opening views (radiology: baseline axial, sagittal and coronal; slides: the
viewer's screenshot with its state). Each follow-up goes with where the views now are (and, for slides,
the current screenshot). Context bound: only the images of the last `KEEP_IMAGE_MESSAGES` image-bearing
messages are sent; older ones are replaced by a one-line note naming what they showed, and tool results of
earlier questions are cut to `OLD_RESULT_CHARS` characters. Every request is scrubbed of the study's
identifiers just before it leaves (copilot.study.privacy).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from collections.abc import Callable
from typing import Any

from copilot.agent.loop import ChatAgent, TransportFailure, _image_parts, tool_decls
from copilot.agent.policy import EpisodeResult
from copilot.agent.prompts import pathology_round, template
from copilot.agent.settings import AgentSettings
from copilot.kinds import viewer_kind
from copilot.llm.types import Reply, ToolDecl
from copilot.study.observation import radiology_lines, slide_lines
from copilot.study.privacy import Redactor, check_images, disclosure, is_local

KEEP_IMAGE_MESSAGES = int(os.environ.get("MEDCOPILOT_KEEP_IMAGES", "3"))  # the image budget of a conversation
OLD_RESULT_CHARS = 1500
DEFAULT_QUESTION = "Describe this study: what does it show, and is anything abnormal?"


def bound_context(
    messages: list[dict[str, Any]], turn_start: int, keep: int = KEEP_IMAGE_MESSAGES
) -> list[dict[str, Any]]:
    """The messages as sent: images only in the last `keep` image-bearing messages, older tool results cut."""
    out = copy.deepcopy(messages)
    with_images = [n for n, m in enumerate(out) if isinstance(m.get("content"), list)
                   and any(p.get("type") == "image_url" for p in m["content"])]  # fmt: skip
    for n in with_images[:-keep] if keep else with_images:
        parts = out[n]["content"]
        dropped = sum(1 for p in parts if p.get("type") == "image_url")
        kept = [p for p in parts if p.get("type") != "image_url"]
        kept.append({"type": "text", "text": f"[{dropped} earlier image(s) omitted to keep the conversation short]"})
        out[n]["content"] = kept
    for m in out[:turn_start]:
        if m.get("role") == "tool" and isinstance(m.get("content"), str) and len(m["content"]) > OLD_RESULT_CHARS:
            m["content"] = m["content"][:OLD_RESULT_CHARS] + " …(cut: result of an earlier question)"
    return out


def short_reason(exc: TransportFailure, setting: str = "OPENAI_BASE_URL") -> str:
    """One line for a failed model service: the HTTP status, or the setting to check."""
    if exc.kind == "retryable" and exc.status is not None:
        return f"model service at {exc.where} answered HTTP {exc.status}"
    if exc.kind == "retryable":
        return f"model service at {exc.where} is not reachable (check {setting} or --base-url)"
    return " ".join(str(exc).split())[:300]


class StudyConversation(ChatAgent):
    """Answers the clinician's questions about one study, keeping the conversation between them."""

    follow_ups = True

    def __init__(
        self,
        settings: AgentSettings,
        redactor: Redactor,
        client: Any = None,
        sleep: Any = time.sleep,
        on_text: Callable[[str], None] | None = None,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(settings, client, sleep)
        self.redactor = redactor
        self.messages: list[dict[str, Any]] = []
        self.questions = 0
        self.on_text = on_text  # what the model says along with its calls, as it arrives (the terminal prints it)
        self.announce = announce  # the one-line disclosure before the first request to a remote service
        self._announced = False
        self._turn_start = 0

    # ----- what is sent -----
    def outgoing(self) -> list[dict[str, Any]]:
        """The messages exactly as the next request will carry them (bounded, scrubbed)."""
        return self.redactor.scrub(bound_context(self.messages, self._turn_start))  # type: ignore[no-any-return]

    def _request(
        self, session: Any, messages: list[dict[str, Any]], tools: list[ToolDecl] | None, round_no: int,
        deadline: float,
    ) -> Reply:  # fmt: skip
        """The conversation, bounded and scrubbed, after the one-line disclosure for a remote service."""
        if not self._announced:
            self._announced = True
            base = self.spec.base_url or str(getattr(self.wire, "base_url", "") or "") or None
            if not is_local(base):
                from copilot.llm.providers import PROVIDERS

                line = disclosure(base or PROVIDERS[self.spec.provider].default_base_url, session.kind)
                session.note("model_disclosure", {"text": line})
                if self.announce is not None:
                    self.announce(line)
        reply = self._complete(session, self.outgoing(), tools, round_no, deadline)
        if reply.text and reply.tool_calls and self.on_text is not None:  # what it says while it works
            self.on_text(reply.text)
        return reply

    # ----- one question -----
    def run(self, session: Any, case: Any, budget: int) -> EpisodeResult:
        question = (self.instructions or "").strip() or DEFAULT_QUESTION
        self.instructions = ""
        deadline = time.monotonic() + self.settings.wall_clock_s
        pathology = viewer_kind(session.kind).stepwise
        tools = tool_decls(session)
        self._start_usage()  # tokens and cost per question; `session_usage` keeps the whole conversation's
        self._turn_start = len(self.messages)
        if not self.messages:
            check_images(session, self.redactor)
            system = template(f"study_{session.kind}_system").replace("{budget}", str(budget))
            digest = hashlib.sha256(system.encode()).hexdigest()
            session.note("agent_start", self.start_record(budget, digest, mode="study"))
            self.messages.append({"role": "system", "content": system})
            self.messages.append({"role": "user", "content": self._first(session, question, pathology)})
        else:
            self.messages.append({"role": "user", "content": self._follow_up(session, question, pathology)})
        self.questions += 1
        return self._rounds(session, self.messages, tools, budget, deadline, pathology, question)

    def _round_results(self, session: Any, tool_calls: list[Any], pathology: bool, task: str) -> list[dict[str, Any]]:
        try:
            return super()._round_results(session, tool_calls, pathology, task)
        except BaseException:  # stopped: the conversation stays well formed for the next question
            self.messages.extend(
                {"role": "tool", "tool_call_id": c.id,
                 "content": json.dumps({"ok": False, "error": {"code": "stopped_by_clinician",
                                        "message": "the clinician stopped this question"}})}
                for c in tool_calls
            )  # fmt: skip
            raise

    def _failed(self, session: Any, exc: TransportFailure, content: str, rounds: int) -> EpisodeResult:
        from copilot.llm.providers import PROVIDERS

        reason = short_reason(exc, PROVIDERS[self.spec.provider].base_url_env or "the server URL")
        self._trace(session, "agent_error", {"error": str(exc), "reason": reason, "rounds": rounds})
        if self.messages and self.messages[-1].get("role") == "user":
            self.messages.pop()  # the unanswered question leaves the conversation (the clinician asks again)
        if len(self.messages) == 1:
            self.messages.clear()  # nothing was answered yet: the next question opens the study again
        return self._result(content, "error", rounds, reason)  # the failed question's tokens still count

    def _final(self, session: Any, content: str, status: str, rounds: int) -> EpisodeResult:
        self.messages.append({"role": "assistant", "content": content})  # the answer stays in the conversation
        return super()._final(session, content, status, rounds)

    def _first(self, session: Any, question: str, pathology: bool) -> list[dict[str, Any]]:
        detail = self.settings.image_detail
        name, args = viewer_kind(session.kind).opening
        shot = session.call(name, args, actor="system")
        if pathology:
            inventory = "Study inventory:\n" + "\n".join(slide_lines(session.snapshot()))
            text = pathology_round(
                f"{question}\n\n{inventory}", shot.result.get("direct_state_summary", ""),
                shot.result.get("gui_state_summary", ""),
            )  # fmt: skip
        else:
            lines = radiology_lines(shot.result.get("inventory", []))
            inventory = "Study inventory:\n" + "\n".join(lines or ["- no series is loaded"])
            views = "Baseline axial, sagittal and coronal views follow."
            text = f"Clinician's question: {question}\n\n{inventory}\n{views}"
        return [{"type": "text", "text": text}, *_image_parts(shot.images, detail)]

    def _follow_up(self, session: Any, question: str, pathology: bool) -> str | list[dict[str, Any]]:
        if pathology:
            shot = session.call("focus_qupath", {}, actor="system")
            text = pathology_round(
                question, shot.result.get("direct_state_summary", ""), shot.result.get("gui_state_summary", "")
            )
            return [{"type": "text", "text": text}, *_image_parts(shot.images, self.settings.image_detail)]
        views = session.snapshot().get("views", {})
        where = ", ".join(
            f"{v['orientation'].lower()} {v['axis']} = {v['offset']:.1f} mm" for name, v in sorted(views.items())
        )
        return f"Follow-up question: {question}\n(The views now stand at {where}.)"
