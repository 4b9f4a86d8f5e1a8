"""A clinician's study named in its trace by a stable pseudonymous reference, never by its path or UIDs.

The trace header of a desktop or `chat` session records `study_ref` (`study-` and 20 hex digits: an HMAC-SHA256,
under a per-user key kept owner-only in the sessions folder, of the study's resolved folder, opened files and
series, and PACS study). The same study gets the same reference in every session of that user, while the
reference says nothing of the patient. The folder path, case name and inputs (series and PACS UIDs) go to an
owner-only sidecar, `study.json`, beside the trace: replay and the session report read it; a de-identified export
leaves it out.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path
from typing import Any

from copilot.privatefs import private_dir, write_private

SIDECAR = "study.json"
KEY_FILE = ".pseudonym-key"
STUDY_FIELDS = ("case_id", "case_root", "case_inputs")
REF_INPUTS = ("volumes", "series_uid", "series_uids", "slide", "frame")


def sessions_root() -> Path:
    """The per-user folder of session traces: `$MEDCOPILOT_SESSIONS`, else `$XDG_DATA_HOME/medcopilot/sessions`
    (by default `~/.local/share/medcopilot/sessions`)."""
    if os.environ.get("MEDCOPILOT_SESSIONS"):
        return Path(os.environ["MEDCOPILOT_SESSIONS"]).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "medcopilot" / "sessions"


_SESSION_KEY = secrets.token_bytes(32)  # where no key can be kept: references stable within this process only


def pseudonym_key(root: Path | None = None) -> bytes:
    """The user's secret key for study references (made once, 0600, in the sessions folder); where that folder
    cannot be written or the key read, a key of this process (references then differ between runs)."""
    try:
        folder = private_dir(root if root is not None else sessions_root())
        path = folder / KEY_FILE
        try:
            with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w", encoding="ascii") as fh:
                fh.write(secrets.token_hex(32))
        except FileExistsError:  # made before (or by another session at the same moment)
            pass
        with os.fdopen(os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), encoding="ascii") as fh:
            key = bytes.fromhex(fh.read().strip())  # a link planted there is not read (this process's key instead)
    except (OSError, ValueError):  # a read-only home, a damaged key file
        return _SESSION_KEY
    return key if len(key) >= 16 else _SESSION_KEY


def study_reference(root: str | Path, inputs: dict[str, Any] | None, key: bytes | None = None) -> str:
    """The stable pseudonymous reference of a study: its resolved folder, the files and series opened, and for a
    PACS study its service and UIDs, under the user's key."""
    inputs = dict(inputs or {})
    origin = inputs.get("origin") or {}
    what = {
        "root": str(Path(root).resolve()),
        **{k: inputs[k] for k in REF_INPUTS if k in inputs},
        "origin": {k: origin[k] for k in ("dicomweb", "study", "series") if k in origin},
    }
    body = json.dumps(what, sort_keys=True, separators=(",", ":")).encode("utf-8")
    digest = hmac.new(key if key is not None else pseudonym_key(), body, hashlib.sha256).hexdigest()
    return f"study-{digest[:20]}"


def pseudonymous_header(header: dict[str, Any], trace_dir: str | Path) -> dict[str, Any]:
    """The trace header with the study named by its reference; its path, name and inputs written to the owner-only
    sidecar of the trace folder."""
    ref = study_reference(header.get("case_root") or ".", header.get("case_inputs"))
    folder = private_dir(trace_dir)
    record = {"study_ref": ref, **{k: header.get(k) for k in STUDY_FIELDS}}
    write_private(folder / SIDECAR, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return {**{k: v for k, v in header.items() if k not in STUDY_FIELDS}, "case_id": ref, "study_ref": ref}


def study_record(trace_dir: str | Path) -> dict[str, Any] | None:
    """What the sidecar of a trace folder says of its study (None: no sidecar, e.g. a de-identified export)."""
    try:
        data = json.loads((Path(trace_dir) / SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def with_study(trace_dir: str | Path, header: dict[str, Any]) -> dict[str, Any]:
    """A trace header with the study's path, name and inputs put back from its sidecar (as it is without one)."""
    if "study_ref" not in header:
        return header
    record = study_record(trace_dir) or {}
    return {**header, **{k: record[k] for k in STUDY_FIELDS if record.get(k) is not None}}
