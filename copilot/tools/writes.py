"""Actions of the second kind: handler calls that write outside the session (a PACS store, a file exported).

A handler that writes declares a planner, `(ctx, **args) -> WritePlan`, which says — without writing anything —
exactly what the call would write and where. The session runs such a call only with the clinician's consent for
that very plan (a `WriteConsent`, which a host's gate obtains by showing the plan, whatever its approve mode) or,
headless, when every destination was named with `--allow-store`; otherwise the call is refused by name and
nothing changes. Each attempt is traced as a `write_attempt` event (what, where, decision, by whom).

A plan carries a digest of exactly what the call would write (the session's evidence, the planner's own content
fingerprint such as a segment's voxels, the arguments, the destinations) and who asks; a consent covers that digest,
for that actor, for one call: an undo or new evidence after the yes changes the digest and the call asks again.
Every string a model controls (labels, question, answer) is shown as data: printable, one line, bounded, quoted;
the destination comes first, on its own line.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlsplit

from copilot.errors import HandlerError
from copilot.pacs.printable import printable
from copilot.pacs.urls import service_root, under
from copilot.privatefs import LinkedPathError, open_private, private_dir
from copilot.tools.study_text import clean
from copilot.trace.outcome import CallOutcome
from copilot.trace.redact import redact_text

WRITE_EVENT = "write_attempt"
REFUSED = "write_not_approved"


_BREAKS = re.compile("[\t\n\v\f\r\x85\u2028\u2029]")
QUOTED_CHARS = 160  # a model-controlled string in a plan beyond this is cut
WHAT_CHARS = 2000  # the whole description line of a plan


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """A model-controlled string as a plan shows it: data in «», printable, one line, at most `limit` characters
    (escape sequences, control and format characters removed; the quotes inside replaced)."""
    text = clean(_printable(value).replace("«", "‹").replace("»", "›"), limit)
    return f"«{text}»"


def plain_line(value: object, limit: int = WHAT_CHARS) -> str:
    """Any text of a plan as one printable line of at most `limit` characters."""
    return clean(_printable(value), limit)


def _printable(value: object) -> str:
    """Text with line breaks as spaces and escape sequences and controls removed (not yet cut)."""
    return printable(_BREAKS.sub(" ", str(value)), 1 << 20)


@dataclass(frozen=True)
class WritePlan:
    """What one call would write (`what`, in words) and where: PACS URLs or `file:` URIs (`destinations`).

    `content` is the planner's fingerprint of the bytes it would write beyond the session's evidence (a segment's
    voxels); `actor` and `digest` are set by the session (`bind`): who asks, and the digest a consent covers."""

    handler: str
    what: str
    destinations: tuple[str, ...]
    content: str = ""
    actor: str = "agent"
    digest: str = ""

    def text(self) -> str:
        """What the clinician is shown: each destination first on its own line, then what, as one clean line."""
        where = "\n".join(f"→ {plain_line(d, 400)}" for d in self.destinations) or "→ (no destination)"
        return f"{where}\n  {plain_line(self.what)}"

    def to_json(self) -> dict[str, Any]:
        return {"handler": self.handler, "what": self.what, "destinations": list(self.destinations),
                **({"actor": self.actor, "digest": self.digest} if self.digest else {})}  # fmt: skip


def bind(plan: WritePlan, args: dict[str, Any] | None, actor: str, evidence: str) -> WritePlan:
    """The plan with its actor and the digest of exactly what it would write: the planner's description and
    content, the arguments, the destinations and the session's evidence (`evidence`, as JSON text)."""
    body = json.dumps(
        {"handler": plan.handler, "what": plan.what, "destinations": list(plan.destinations),
         "content": plan.content, "args": canonical(args), "evidence": evidence, "actor": actor},
        sort_keys=True, separators=(",", ":"),
    )  # fmt: skip
    return replace(plan, actor=actor, digest=hashlib.sha256(body.encode("utf-8")).hexdigest())


@dataclass(frozen=True)
class WriteConsent:
    """The clinician's yes to one plan with its arguments (given by a host's gate): valid for one call by the plan's
    actor while what the call would write stays exactly as planned (`nonce` marks it used)."""

    plan: WritePlan
    args: str  # the arguments as canonical JSON
    nonce: str = field(default_factory=lambda: secrets.token_hex(16))

    def covers(self, plan: WritePlan, args: dict[str, Any] | None) -> bool:
        return bool(plan.digest) and self.plan == plan and self.args == canonical(args)


def refused_by(consent: object, plan: WritePlan, args: dict[str, Any] | None, used: bool) -> str:
    """Why a call's consent does not cover it (for the trace's `write_attempt`)."""
    if consent is None:
        return "no consent"
    if not isinstance(consent, WriteConsent):
        return "consent for another plan"
    if used:
        return "consent already used"
    if consent.plan.actor != plan.actor:
        return f"consent given for a call by the {consent.plan.actor}"
    if (consent.plan.handler, consent.args) == (plan.handler, canonical(args)):
        return "what it would write changed since the consent"
    return "consent for another plan"


def canonical(args: dict[str, Any] | None) -> str:
    """Arguments as canonical JSON (what a consent is compared by)."""
    return json.dumps(args or {}, sort_keys=True, default=str)


def consent(plan: WritePlan, args: dict[str, Any] | None) -> WriteConsent:
    """The consent a host's gate passes with the call after the clinician said yes to `plan`."""
    return WriteConsent(plan, canonical(args))


class DeclinedWrites(Protocol):
    """Where a declined write is traced (the session)."""

    def note_declined_write(self, plan: WritePlan, args: dict[str, Any] | None, actor: str, decision: str) -> None: ...


def settle(
    session: DeclinedWrites, plan: WritePlan | None, args: dict[str, Any] | None, actor: str, decision: str
) -> WriteConsent | None:
    """The clinician's answer to a planned write: `approve` gives the consent for exactly that plan; `reject` or
    `stop` traces the declined attempt with its destination. None when there is no plan or no yes."""
    if plan is None:
        return None
    if decision == "approve":
        return consent(plan, args)
    session.note_declined_write(plan, args, actor, "rejected" if decision == "reject" else "stopped")
    return None


def rejected(name: str, reason: str) -> CallOutcome:
    """The outcome the agent sees for a call the clinician rejected (with the reason given, if any)."""
    message = "the clinician rejected this action" + (f": {reason}" if reason else "")
    return CallOutcome(name, False, 403, error={"code": "rejected_by_clinician", "message": message})


def output_file(output_dir: Path | None, output_name: str, suffix: str = ".dcm") -> Path:
    """The file an export writes in the session's derived folder; refused by name when the session has none
    (`no_output`) or the file exists already (`name_taken`)."""
    if output_dir is None:
        raise HandlerError("no_output", "this session has no output folder (start it with a trace directory)")
    out = output_dir / f"{output_name}{suffix}"
    if out.exists():
        raise HandlerError("name_taken", f"{out.name} exists already")
    return out


def file_destination(path: Path) -> str:
    """A file a call would write, as a destination (`file:` URI of its absolute path)."""
    return Path(path).resolve().as_uri()


def pacs_destination(url: str) -> str:
    """A PACS a call would store to, as a destination: its DICOMweb URL normalised as the network sees it, secrets
    removed."""
    try:
        return redact_text(service_root(str(url)))
    except HandlerError:
        return redact_text(str(url).rstrip("/"))


def allowed(destination: str, allow_store: Sequence[str]) -> bool:
    """Whether `--allow-store` names this destination: the same URL or one under it, both normalised as the
    network sees them (a value that does not normalise names nothing); for files, a folder above it (a path or a
    `file:` URI)."""
    folders = [Path(unquote(urlsplit(e).path)) if e.startswith("file:") else Path(e)
               for e in allow_store if e.startswith("file:") or "://" not in e]  # fmt: skip
    if destination.startswith("file:"):
        target = Path(unquote(urlsplit(destination).path))
        return any(target.is_relative_to(f.expanduser().resolve()) for f in folders)
    try:
        url = service_root(destination)
    except HandlerError:
        return False
    return any(under(url, base) for base in _bases(allow_store))


def _bases(allow_store: Sequence[str]) -> list[str]:
    """The URLs `--allow-store` names, normalised (those that do not normalise left out)."""
    out = []
    for entry in allow_store:
        if "://" in entry and not entry.startswith("file:"):
            try:
                out.append(service_root(entry))
            except HandlerError:
                continue
    return out


def store_folder(allow_store: Sequence[str]) -> Path | None:
    """The first folder `--allow-store` names (a path or a `file:` URI): where a headless run's exports go."""
    for entry in allow_store:
        if entry.startswith("file:") or "://" not in entry:
            return Path(unquote(urlsplit(entry).path) if entry.startswith("file:") else entry).expanduser().resolve()
    return None


def save_dicom(ds: Any, out: Path) -> None:
    """Write an exported DICOM object at `out`, owner-only, created anew without following a link: a symlink or a
    file already there is refused by name (`linked_path`, `name_taken`) and nothing outside is touched."""
    try:
        private_dir(out.parent)
        with open_private(out, "xb") as fh:
            ds.save_as(fh)
    except LinkedPathError as exc:
        raise HandlerError("linked_path", str(exc)) from None
    except FileExistsError:
        raise HandlerError("name_taken", f"{out.name} exists already") from None


def attempt(plan: WritePlan, args: dict[str, Any] | None, actor: str, decision: str, by: str) -> dict[str, Any]:
    """The `write_attempt` trace event of one call of the second kind: what, where, the decision and by whom."""
    return {**plan.to_json(), "args": args or {}, "actor": actor, "decision": decision, "by": by}


def refusal_message(plan: WritePlan) -> str:
    """Why a write was refused, naming it and what would allow it."""
    return (
        f"{plan.handler} writes outside the session ({plain_line(plan.what)} → {', '.join(plan.destinations)}); "
        "nothing was written: it needs the clinician's "
        f"yes, or in a headless run --allow-store naming {plan.destinations[0] if plan.destinations else 'it'}"
    )
