"""Where study sessions are kept: one trace folder per desktop or `chat` session, in a per-user folder.

`$MEDCOPILOT_SESSIONS` if set, else `$XDG_DATA_HOME/medcopilot/sessions` (by default
`~/.local/share/medcopilot/sessions`). A session folder is named by its start time, the kind of study and a
random suffix, never by the study's own folder or file names (they may name the patient).
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path


def sessions_root() -> Path:
    """The per-user folder that holds the session traces."""
    if os.environ.get("MEDCOPILOT_SESSIONS"):
        return Path(os.environ["MEDCOPILOT_SESSIONS"]).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "medcopilot" / "sessions"


def new_session_dir(kind: str, root: str | Path | None = None) -> Path:
    """A fresh, not yet created folder for one session's trace."""
    base = Path(root) if root is not None else sessions_root()
    return base / f"{time.strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(3)}"
