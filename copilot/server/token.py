"""Where the server's bearer token comes from: a file, the environment, the command line, or chance.

`--token-file PATH` (first line; a file that other users may read is refused, with the `chmod 600` to run) and
`$MEDCOPILOT_TOKEN` keep the token out of the process list; `--token T` works too but is visible to every local
user (`ps`, `/proc`).
Any UTF-8 text without spaces or control characters is a token; it is compared as UTF-8 bytes.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

ENV = "MEDCOPILOT_TOKEN"
MAX_LENGTH = 1024


class TokenError(ValueError):
    """The token given cannot be used (empty, unreadable file, spaces or control characters)."""


def _checked(token: str, where: str) -> str:
    if not token:
        raise TokenError(f"the token from {where} is empty")
    if len(token) > MAX_LENGTH or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in token):
        raise TokenError(f"the token from {where} must be one line of at most {MAX_LENGTH} characters without spaces")
    return token


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The token on the file's first line (a regular file that other users may read is refused)."""
    p = Path(path)
    try:
        with p.open("rb") as fh:
            first = fh.read(MAX_LENGTH + 2).split(b"\n", 1)[0].rstrip(b"\r")
        mode = p.stat().st_mode
    except OSError as exc:
        raise TokenError(f"cannot read the token file {p}: {exc.strerror or exc}") from None
    try:
        token = _checked(first.decode("utf-8"), f"file {p}")
    except UnicodeDecodeError:
        raise TokenError(f"the token file {p} is not UTF-8 text") from None
    if stat.S_ISREG(mode) and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"the token file {p} is readable by other users: run `chmod 600 {p}`")
    return token


def resolve_token(given: str | None, token_file: str | None) -> tuple[str, str]:
    """(token, where it came from: file/option/env/random), in that order of precedence."""
    if token_file:
        return read_token_file(token_file), "file"
    if given:
        return _checked(given, "--token"), "option"
    if os.environ.get(ENV):
        return _checked(os.environ[ENV], f"${ENV}"), "env"
    return secrets.token_urlsafe(24), "random"
