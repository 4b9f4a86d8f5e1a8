"""Where study sessions are kept, and for how long: one trace folder per desktop or `chat` session, in a per-user,
owner-only folder, listed, shown, exported (de-identified on request) and purged by `medcopilot sessions`.

`$MEDCOPILOT_SESSIONS` if set, else `$XDG_DATA_HOME/medcopilot/sessions` (by default
`~/.local/share/medcopilot/sessions`). A session folder is named by its start time, the kind of study and a
random suffix, never by the study's own folder or file names (they may name the patient). Sessions are kept
`retention_days()` days (30 unless `$MEDCOPILOT_RETENTION_DAYS` or `medcopilot sessions retention DAYS` says
otherwise); `medcopilot sessions purge` removes older ones when asked.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.privatefs import make_private, private_dir, remove_inside, write_private
from copilot.trace.recorder import GENESIS, TRACE_FILE, canonical_json, event_hash
from copilot.trace.study_ref import SIDECAR, sessions_root, study_record

__all__ = ["new_session_dir", "sessions_root"]

DEFAULT_RETENTION_DAYS = 30
RETENTION_ENV = "MEDCOPILOT_RETENTION_DAYS"
DAY = 86400.0
LEFT_OUT = (SIDECAR, "report.html")  # what a de-identified export never carries
DERIVED = "derived"  # the session's DICOM exports (copied de-identified) and the record of its PACS stores


def new_session_dir(kind: str, root: str | Path | None = None) -> Path:
    """A fresh, not yet created folder for one session's trace (the sessions folder made or narrowed to 0700)."""
    base = private_dir(Path(root) if root is not None else sessions_root())
    return base / f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(3)}"


# ----- retention -----


def retention_file() -> Path:
    """Where `medcopilot sessions retention DAYS` keeps the user's choice."""
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "medcopilot" / "sessions.json"


def retention_days() -> float:
    """How many days sessions are kept: `$MEDCOPILOT_RETENTION_DAYS`, else the user's setting, else 30."""
    for raw in (os.environ.get(RETENTION_ENV), _setting()):
        if raw is not None:
            try:
                return check_days(float(raw))
            except ValueError:
                continue
    return float(DEFAULT_RETENTION_DAYS)


def _setting() -> Any:
    try:
        return json.loads(retention_file().read_text(encoding="utf-8")).get("retention_days")
    except (OSError, ValueError, AttributeError):
        return None


def check_days(days: float) -> float:
    """A number of days a retention or a purge may use (ValueError otherwise)."""
    if not days >= 0 or days == float("inf"):
        raise ValueError(f"days must be a number ≥ 0, not {days}")
    return days


def set_retention(days: float) -> Path:
    """Keep sessions `days` days from now on (written owner-only in the user's config folder)."""
    path = retention_file()
    private_dir(path.parent)
    write_private(path, json.dumps({"retention_days": check_days(days)}) + "\n")
    return path


# ----- listing -----


@dataclass(frozen=True)
class SessionInfo:
    """One session folder as the list shows it."""

    folder: Path
    started: float
    last: float
    kind: str
    study_ref: str
    status: str
    events: int
    size: int

    @property
    def name(self) -> str:
        return self.folder.name

    def age_days(self, now: float | None = None) -> float:
        """Days since the session last wrote its trace."""
        return ((now if now is not None else time.time()) - self.last) / DAY


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").split("\n") if line]


def _event(line: str) -> dict[str, Any]:
    """One trace line's event, {} for a line cut short or edited."""
    try:
        event = json.loads(line) if line else {}
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def session_info(folder: Path) -> SessionInfo | None:
    """What a session folder holds (None: not a session folder)."""
    trace = folder / TRACE_FILE
    if not trace.is_file():
        return None
    lines = _lines(trace)
    head, end = _event(lines[0] if lines else ""), _event(lines[-1] if lines else "")
    # without its closing event (a full disk, a crash, or still running) a trace is never called complete
    status = str(end.get("status") or "ended") if end.get("type") == "episode_end" else "truncated"
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    return SessionInfo(folder, float(head.get("time") or trace.stat().st_mtime), trace.stat().st_mtime,
                       str(head.get("kind", "?")), str(head.get("study_ref") or head.get("case_id") or "?"),
                       status, len(lines), size)  # fmt: skip


def list_sessions(root: Path | None = None) -> list[SessionInfo]:
    """Every session under the sessions folder, oldest first."""
    base = root if root is not None else sessions_root()
    if not base.is_dir():
        return []
    found = [i for c in base.iterdir() if not c.is_symlink() and c.is_dir() and (i := session_info(c)) is not None]
    return sorted(found, key=lambda i: (i.started, i.name))


def find_session(name: str, root: Path | None = None) -> Path:
    """A session folder by its name, a unique start of its name, or its path (ValueError otherwise)."""
    p = Path(name)
    if (p / TRACE_FILE).is_file():
        return p
    hits = [i.folder for i in list_sessions(root) if i.name == name] or [
        i.folder for i in list_sessions(root) if i.name.startswith(name)
    ]
    if len(hits) != 1:
        what = "no session" if not hits else f"{len(hits)} sessions"
        raise ValueError(f"{what} named {name!r} in {root or sessions_root()} (see `medcopilot sessions list`)")
    return hits[0]


# ----- showing -----


def describe(folder: Path) -> list[str]:
    """The lines `sessions show` prints: the session, its study as the owner-only sidecar records it (with the
    patient banner when the study's files are still there) and the files it holds."""
    from copilot.panel.banner import study_banner
    from copilot.panel.studies import Study

    info = session_info(folder)
    if info is None:
        raise ValueError(f"{folder} holds no session trace")
    head = json.loads(_lines(folder / TRACE_FILE)[0])
    out = [
        f"session   {info.name}",
        f"started   {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(info.started))}; last written "
        f"{info.age_days():.1f} days ago; {info.status}; {info.events} trace events; {info.size / 1024:.0f} KiB",
        f"study     {info.study_ref} ({info.kind}, track {head.get('track', '?')})",
    ]
    record = study_record(folder)
    if record is not None:
        out.append(f"  folder  {record.get('case_root')}   (owner-only {SIDECAR}; never in the trace)")
        out.append(f"  opened  {json.dumps(record.get('case_inputs') or {}, sort_keys=True)}")
        root = record.get("case_root")
        if root and Path(root).exists():
            study = Study(Path(root), str(record.get("case_id") or ""), "", info.kind, dict(record.get("case_inputs")
                                                                                           or {}))  # fmt: skip
            out.append(f"  patient {study_banner(study).line}")
    files = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.parent == folder)
    derived = sorted(p.name for p in (folder / "derived").glob("*")) if (folder / "derived").is_dir() else []
    out.append(f"files     {', '.join(files)}" + (f"; derived: {', '.join(derived)}" if derived else ""))
    return out


# ----- purging -----


def purge(
    days: float, root: Path | None = None, dry_run: bool = False, now: float | None = None,
    problems: list[str] | None = None,
) -> list[SessionInfo]:  # fmt: skip
    """Remove the sessions last written more than `days` days ago (only folders holding a session trace, never a
    link: links inside are removed themselves, their targets left alone). What could not be removed is added to
    `problems` and the purge goes on with the next session; the sessions removed are returned."""
    check_days(days)
    base = root if root is not None else sessions_root()
    old = [i for i in list_sessions(base) if i.age_days(now) > days]
    if dry_run:
        return old
    removed = []
    for info in old:
        left = remove_inside(base, info.folder)
        if problems is not None:
            problems.extend(left)
        if not os.path.lexists(info.folder):
            removed.append(info)
    return removed


# ----- exporting -----


def study_redactor(folder: Path, kind: str) -> Any:
    """What a de-identified export removes: the study's identifiers (from its files when they are still there) and
    every path, name and UID its sidecar records."""
    from copilot.panel.identifiers import MIN_LENGTH, study_identifiers
    from copilot.study.privacy import Redactor

    record = study_record(folder) or {}
    found: set[str] = set()
    root, inputs = record.get("case_root"), dict(record.get("case_inputs") or {})
    if root and Path(root).exists():
        with contextlib.suppress(Exception):  # unreadable headers: the sidecar's own values still go
            found |= study_identifiers(Path(root), inputs, kind)

    def strings(value: Any) -> None:
        if isinstance(value, str) and len(value) >= MIN_LENGTH:
            found.add(value)
        elif isinstance(value, dict):
            for v in value.values():
                strings(v)
        elif isinstance(value, list | tuple):
            for v in value:
                strings(v)

    strings([root, record.get("case_id"), inputs])
    if root:  # the study's folder and the one above it may be named after the patient
        found |= {p.name for p in (Path(root), Path(root).parent) if len(p.name) >= MIN_LENGTH}
    return Redactor(found)


def _links(folder: str, names: list[str]) -> list[str]:
    """The entries of a folder that are links (an export copies none of them, nor what they point to)."""
    return [n for n in names if os.path.islink(os.path.join(folder, n))]


def export_session(folder: Path, out: Path, deidentify: bool = False) -> list[str]:
    """Copy a session to `out` (owner-only); with `deidentify`, its trace with the study's identifiers removed
    and re-chained (a new, verifiable chain), its images, its DICOM exports de-identified (PS3.15 Basic profile,
    `copilot.study.deidentify`), and not the sidecar, the report or any other file of its exports folder.
    Returns what was left out."""
    if out.exists() and any(out.iterdir()):
        raise ValueError(f"{out} exists and is not empty")
    private_dir(out)
    if not deidentify:
        shutil.copytree(folder, out, dirs_exist_ok=True, ignore=_links)  # a link inside is not followed out
        make_private(out)
        return []
    events = [json.loads(line) for line in _lines(folder / TRACE_FILE)]
    redactor = study_redactor(folder, str(events[0].get("kind", "")) if events else "")
    prev, lines = GENESIS, []
    inputs = replay_inputs(folder, redactor)
    for n, event in enumerate(events):
        body = redactor.scrub({k: v for k, v in event.items() if k not in ("prev", "hash")})
        head = {"deidentified": True, **({"case_inputs": inputs} if inputs and "case_inputs" not in body else {})}
        body = {**body, "seq": n, "prev": prev, **(head if n == 0 else {})}
        body["hash"] = event_hash(body)
        line = canonical_json(body)
        lines.append(line)
        prev = hashlib.sha256(line.encode("utf-8")).hexdigest()
    write_private(out / TRACE_FILE, "".join(line + "\n" for line in lines))
    if (folder / "artifacts").is_dir():
        shutil.copytree(folder / "artifacts", out / "artifacts", ignore=_links)
    left = [name for name in LEFT_OUT if (folder / name).exists()]
    if (folder / DERIVED).is_dir():
        left += deidentified_exports(folder / DERIVED, out / DERIVED, redactor.text)
    make_private(out)
    return left


def replay_inputs(folder: Path, redactor: Any) -> dict[str, Any]:
    """What a replay of the de-identified copy needs besides the study folder (`replay --case`): the inputs'
    relative paths and frame that name nothing identifying (series UIDs and identifying names left out)."""
    record = study_record(folder) or {}
    inputs = dict(record.get("case_inputs") or {})
    out: dict[str, Any] = {}
    for key in ("volumes", "slide", "frame"):
        value = inputs.get(key)
        if value is not None and redactor.scrub(value) == value:
            out[key] = value
    if inputs.get("series_uid"):  # the replay finds it again in the folder it is given
        out["series_uid"] = "[uid]"
    return out


def deidentified_exports(src: Path, dst: Path, clean: Any) -> list[str]:
    """Copy the DICOM files of a session's exports folder de-identified (UIDs replaced alike in all of them);
    returns the other files, left out (`derived/NAME`)."""
    import pydicom

    from copilot.study.deidentify import UidMap, deidentify

    uids, left = UidMap(), []
    private_dir(dst)
    for path in sorted(src.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            ds = pydicom.dcmread(path)
        except Exception:  # not a DICOM file (the record of what went to a PACS names URLs and UIDs)
            left.append(f"{DERIVED}/{path.relative_to(src)}")
            continue
        deidentify(ds, uids, clean)
        name = clean(path.name).replace("[redacted]", "redacted").replace("[uid]", "uid")  # a name may identify
        target = dst / path.relative_to(src).parent / name
        while target.exists():
            target = target.with_name(f"{target.stem}-1{target.suffix}")
        private_dir(target.parent)
        buf = io.BytesIO()
        ds.save_as(buf, enforce_file_format=True)
        write_private(target, buf.getvalue())
    return left
