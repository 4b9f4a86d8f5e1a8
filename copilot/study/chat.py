"""`medcopilot chat STUDY`: a conversation with the model about a study, in a terminal or without one.

Interactive: type a question; the model's messages and each call with its result are printed as they come;
`/approve`, `/reject REASON` answer a proposal (with --approve), `/stop` ends the running question,
`/report [FILE]` writes the session report, `/store` stores the evidence with the last question and answer
(and any segment) to the study's PACS, or as files, after showing what and where and asking, `/quit` (or end
of input) ends the session. With `--ask`, one
question per turn and no terminal: the answers and their evidence are printed, and the exit status is 1 when
the model service failed (the reason in one line), 2 for a study or setting that cannot be used.
"""

from __future__ import annotations

import argparse
import json
import queue
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Any

from copilot.trace.redact import redact_text

EXIT_OK, EXIT_SERVICE, EXIT_INPUT = 0, 1, 2


def add_parser(sub: Any) -> None:
    """Register the `chat` subcommand."""
    chat = sub.add_parser("chat", help="a conversation with the model about a study (a terminal, or --ask)")
    chat.add_argument("study", help="a DICOM folder or file, a NIfTI/NRRD/MHA file, a slide, a case pack, or a "
                      "DICOMweb study or series URL (docs/pacs.md)")
    chat.add_argument("--series", default=None, help="the series of a DICOM folder or PACS study, as `gui` reads it: "
                      "its number, a word of its description or the end of its UID; several, comma-separated, open "
                      "together (the first as the background; a PET with a CT is fused over it)")  # fmt: skip
    chat.add_argument("--ask", action="append", default=[], metavar="QUESTION",
                      help="ask this (repeat for follow-ups) without a terminal")  # fmt: skip
    chat.add_argument("--policy", default="openai", help="openai[:MODEL] (or an offline policy on a case pack)")
    chat.add_argument("--model", default=None)
    chat.add_argument("--base-url", default=None, help="OpenAI-compatible service (default: $OPENAI_BASE_URL)")
    chat.add_argument("--trace-dir", default=None, help="where the session's trace goes (default: the sessions folder)")
    chat.add_argument("--approve", action="store_true", help="ask the clinician before each proposed action")
    chat.add_argument("--track", choices=["A", "B"], default="A", help="B: the model may also run the operators")
    chat.add_argument("--budget", type=int, default=20, help="tool-calling rounds per question")
    chat.add_argument("--reasoning", default=None, help="a level of the model's reasoning control (its profile's)")
    chat.add_argument("--tool-protocol", choices=["native", "text"], default=None,
                      help="tool calls natively or in text (default: the model's profile)")  # fmt: skip
    chat.add_argument("--max-images", type=int, default=None, help="images per request (default: the profile's)")
    chat.set_defaults(func=run_chat)


def resolve_study(location: str, series: str | None) -> Any:
    """The study a path or a DICOMweb study/series URL (retrieved into the PACS cache first) and an optional series
    choice name (StudyError with the series list when ambiguous); a PACS study carries its origin."""
    from copilot.pacs.fetch import local_study, with_origin

    local = local_study(location)
    return with_origin(_resolve_local(str(local.path), series), local.origin)


def _resolve_local(path: str, series: str | None) -> Any:
    from copilot.panel.banner import place_label
    from copilot.panel.same_patient import series_mismatch
    from copilot.panel.studies import StudyError, classify, dicom_series, select_series_list, study_for

    if classify(path) == "dicom" and Path(path).is_dir():
        found = dicom_series(path)
        if series is not None:  # as the desktop reads it: numbers, description words or UID ends, comma-separated
            chosen = select_series_list(found, series)
            other = series_mismatch(chosen)
            if other is not None:  # never side by side without a dialog showing both patients: open them apart
                raise StudyError(f"the series chosen are of different patients ({', '.join(other.differs)} differ); "
                                 "open them one at a time")  # fmt: skip
            return study_for(path, chosen)
        if len(found) > 1:
            raise StudyError(f"{place_label(path)} holds {len(found)} series; pick one with --series: {_titles(found)}")
    return study_for(path)


def derived_results(study: Any) -> str:
    """The line naming a DICOM study's derived results (SEG, SR, KO, PR), '' for anything else or none."""
    from copilot.panel.derived import derived_line

    inputs = getattr(study, "inputs", None) or {}
    if not ("series_uid" in inputs or "series_uids" in inputs) or not Path(study.root).is_dir():
        return ""
    return derived_line(study.root)


def _titles(found: list[Any]) -> str:
    return "; ".join(f"{s.title} (…{s.uid[-6:]})" for s in found)


def terminal_safe(text: str) -> str:
    """Text with nothing a terminal would act on: control characters (escape sequences, carriage returns, bells) and
    invisible format characters (bidirectional overrides) dropped; new lines and tabs kept."""
    return "".join(ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in ("Cc", "Cf"))


class Terminal:
    """The clinician's side: lines from stdin (read by a thread, so /stop works while the model runs), output."""

    def __init__(self, out: Any = None, err: Any = None) -> None:
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        self.eof = False
        self._streaming = False  # a streamed `model:` line is open
        self.streamed = ""  # the text of the streamed line open now, or of the last one closed

    def start(self) -> None:
        def read() -> None:
            for line in sys.stdin:
                self.lines.put(line.rstrip("\n"))
            self.lines.put(None)

        self._reader = threading.Thread(target=read, daemon=True, name="chat-stdin")
        self._reader.start()

    def say(self, text: str) -> None:
        self.end_stream()
        self.streamed = ""
        print(terminal_safe(redact_text(text)), file=self.out, flush=True)

    def end_stream(self) -> None:
        """A streamed line ends before the next one."""
        if self._streaming:
            self._streaming = False
            print(file=self.out, flush=True)

    def stream(self, piece: str) -> None:
        """The model's text as it arrives, on one `model:` line (made printable: a model's escape codes never reach
        the terminal)."""
        if not self._streaming:
            self._streaming, self.streamed = True, ""
            self.out.write("model: ")
        self.streamed += piece
        self.out.write(terminal_safe(piece))
        self.out.flush()

    def note(self, text: str) -> None:
        print(redact_text(text), file=self.err, flush=True)  # a URL's password or key is never printed

    def peek(self) -> str | None:
        """The next line without taking it (None when none is waiting)."""
        with self.lines.mutex:
            head = self.lines.queue[0] if self.lines.queue else None
        return head.strip() if head else None

    def next_line(self, timeout: float | None = None) -> str | None:
        """The next line (None at end of input); raises queue.Empty after `timeout`."""
        if self.eof:
            return None
        if self._reader is None:
            self.start()
        line = self.lines.get(timeout=timeout) if timeout is not None else self.lines.get()
        self.eof = line is None
        return line


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # a closed or plain object: not a terminal
        return False


def terminal_ask(term: Terminal) -> Any:
    """The clinician's yes or no at the terminal (opt-in to a remote service, a series with burnt-in details);
    None without a terminal (`--ask` in a script: the refusal names `medcopilot optin`)."""
    if not sys.stdin.isatty():
        return None

    def ask(text: str) -> bool:
        term.say(text)
        term.out.write("[y/N] ")
        term.out.flush()
        return (term.next_line() or "").strip().lower() in ("y", "yes")

    return ask


def _short(value: Any, limit: int = 160) -> str:
    from copilot.pacs.printable import printable  # a proposal's arguments are the model's: shown as plain text

    text = printable(json.dumps(value, ensure_ascii=False, separators=(",", ":")), 1 << 20)
    return text if len(text) <= limit else text[:limit] + "…"


def ask(model: Any, policy: Any, question: str, term: Terminal) -> str:
    """One question: run it, answer proposals from the terminal, print the answer and evidence; the status."""
    from copilot.panel.answer_evidence import evidence_label
    from copilot.panel.identifiers import removal_notice

    notice = removal_notice(policy, question)
    if notice:
        term.note(notice)
    model.run_episode(policy, question)
    try:
        _follow(model, term)
    except KeyboardInterrupt:  # Ctrl-C stops the question (the model request included), not the session
        model.stop()
        model.wait(2.0)
    if model.status == "error":
        term.note(f"error: {model.messages[-1][1] if model.messages else 'the model service failed'}")
        return "error"
    if model.status == "stopped":
        term.say("(stopped)")
        return "stopped"
    answer = next((t for who, t in reversed(model.messages) if who == "agent"), "")
    if answer.strip() and answer.strip() == term.streamed.strip():  # the answer was printed as it arrived
        term.end_stream()
    else:
        term.say(f"answer: {answer}")
    for ev in model.last_answer_items:  # this answer's own evidence, also where an earlier answer stated it
        term.say(f"evidence: {evidence_label(ev)}")
    usage = usage_line(policy)
    if usage:
        term.say(usage)
    return str(model.status)


def usage_line(policy: Any) -> str:
    """Tokens and cost of the last question and of the conversation (tokens only where no price is known)."""
    from copilot.llm.prices import usage_words

    summary = getattr(policy, "usage_summary", None)
    if summary is None:
        return ""
    return f"tokens: this question {usage_words(summary())}; conversation {usage_words(summary(whole=True))}"


def _follow(model: Any, term: Terminal) -> None:
    """Answer the running question's proposals from the terminal until it ends; /stop stops it."""
    asked = decided = None
    while not model.wait(0.05):
        pending = model.pending
        if pending is not None and pending is not asked:
            asked = pending
            term.say(f"proposed: {pending.handler}({_short(pending.args)}) — /approve, /reject REASON or /stop")
            if pending.write is not None:  # an action of the second kind: exactly what and where
                term.say("  writes outside the session:")
                for line in pending.write.text().splitlines():  # the destination first, then what, as data
                    term.say(f"    {line}")
        undecided = pending is not None and pending is not decided
        if not undecided:
            if term.peek() == "/stop":  # typed while the model works
                term.next_line(0.05)
                model.stop()
            continue
        if term.eof:
            model.stop()  # nobody is left to decide
            continue
        try:
            line = term.next_line(0.05)
        except queue.Empty:
            continue
        command = (line or "").strip()
        if command == "/stop":
            model.stop()
        elif command in ("/approve", "y", "yes"):
            model.approve()
            decided = pending
        elif command.startswith("/reject") or command in ("n", "no"):
            model.reject(command.partition(" ")[2])
            decided = pending
        elif command:
            term.note(f"(not a decision: {command!r}; use /approve, /reject REASON or /stop)")


def run_chat(ns: argparse.Namespace, term: Terminal | None = None) -> int:
    """The `chat` command; input problems are raised (the command line prints them as one `error:` line)."""
    from copilot.panel.banner import study_banner
    from copilot.panel.model import PanelModel
    from copilot.panel.studies import open_study
    from copilot.study.observation import study_summary
    from copilot.study.policies import PolicyUnavailable, is_model, model_settings, policy_problem, service_problem
    from copilot.study.policies import conversation as new_conversation
    from copilot.study.sessions import new_session_dir

    term = term or Terminal()
    study = resolve_study(ns.study, ns.series)
    problem = policy_problem(ns.policy, study)
    options = {k: v for k in ("reasoning", "tool_protocol", "max_images") if (v := getattr(ns, k, None)) is not None}
    settings = model_settings(ns.policy, ns.model, ns.base_url, **options) if is_model(ns.policy) else None
    if problem is None and settings is not None:
        problem = service_problem(settings)
    if problem:
        raise PolicyUnavailable(problem)
    policy: Any
    if settings is not None:
        streams = not ns.ask  # at a terminal the text appears as it arrives; with --ask, whole lines
        policy = new_conversation(settings, study, study.kind, ask=terminal_ask(term), announce=term.note,
                                  on_text=None if streams else (lambda t: term.say(f"model: {t}")))  # fmt: skip
        if streams:
            policy.on_stream = term.stream
    else:
        from copilot.medflow.policies import make_policy

        policy = make_policy(ns.policy)
    trace_dir = Path(ns.trace_dir) if ns.trace_dir else new_session_dir(study.kind)
    session = open_study(study, trace_dir, track=ns.track)
    term.note(f"session: {trace_dir}")
    if _is_terminal(term.out):  # for the clinician's eyes only: never sent to the model, nor into a file or pipe
        term.say(f"patient: {study_banner(study).line}")
    else:
        term.note("patient: shown at a terminal only (standard output is redirected)")
    if len((study.inputs or {}).get("volumes") or []) > 1:  # several series: hung as their modalities say
        from copilot.panel.hanging import hang

        rule = hang(session)
        if rule is not None:
            term.say(f"hanging protocol: {rule.name}")
    for line in study_summary(session, study):
        term.say(f"study {line}")
    derived = derived_results(study)
    if derived:
        term.say(derived)  # segmentations and reports of the study: listed apart, never opened as images
    model = PanelModel(session, study, ns.budget)
    model.set_approve_mode(ns.approve)

    def on_call(outcome: Any, args: Any, actor: str) -> None:
        if actor == "agent":
            result = outcome.result if outcome.ok else outcome.error
            term.say(f"  {outcome.name}({_short(args or {}, 120)}) → {'ok' if outcome.ok else 'refused'}: "
                     f"{_short(result, 200)}")  # fmt: skip

    session.subscribe(on_call)
    code = EXIT_OK
    try:
        if ns.ask:
            for question in ns.ask:
                if ask(model, policy, question, term) == "error":
                    code = EXIT_SERVICE
                    break
        else:
            code = _interactive(model, policy, term)
    finally:
        model.stop()
        session.close({"status": "error" if code else "closed", "questions": getattr(policy, "questions", None)})
        report = model.export_report(trace_dir / "report.html")
        term.note(f"report: {report}")
    return code


def _interactive(model: Any, policy: Any, term: Terminal) -> int:
    code = EXIT_OK
    term.say("Ask about the study (/report [FILE], /store, /quit).")
    while True:
        term.out.write("you> ")
        term.out.flush()
        line = term.next_line()
        if line is None or line.strip() in ("/quit", "/exit"):
            term.say("")
            return code
        line = line.strip()
        if not line:
            continue
        if line.startswith("/report"):
            target = line.partition(" ")[2].strip() or str(Path(model.session.trace_dir or ".") / "report.html")
            term.say(f"report: {model.export_report(target)}")
        elif line == "/store" or line.startswith("/store "):
            which = line.removeprefix("/store").strip()
            if which and not which.isdigit():
                term.say("/store stores the last answer; /store N the N-th answer of the conversation")
            else:
                store_command(model, term, int(which) - 1 if which else -1)
        elif line.startswith("/"):
            term.say("commands: /report [FILE], /store, /quit; /approve, /reject REASON, /stop while a question runs")
        elif ask(model, policy, line, term) == "error":
            code = EXIT_SERVICE


def store_command(model: Any, term: Terminal, answer: int = -1) -> None:
    """`/store [N]`: list what the clinician's Store would write (the last answer, or the N-th) and where, then write
    it on `/approve` only."""
    from copilot.panel.store import StorePlan, outcome_words, store_with

    def confirm(plan: StorePlan) -> tuple[str, str]:
        for line in plan.lines():  # each object: its destination first, then what, on lines of their own
            for part in line.splitlines():
                term.say(f"  {part}")
        term.say(f"{plan.title()}: writes outside the session as listed — /approve, or /reject REASON")
        answer = (term.next_line() or "").strip()
        if answer in ("/approve", "y", "yes"):
            return "approve", ""
        term.say("not stored")
        return "reject", answer.partition(" ")[2]

    plan, outcomes = store_with(model, confirm, answer)
    if not plan.steps:
        term.say("nothing to store: " + "; ".join(plan.problems))
    for out in outcomes:
        term.say(f"  {outcome_words(out)}")
