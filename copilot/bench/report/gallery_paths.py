"""Where a case's gallery of final views lies in a run folder, and the link an episode page carries to it: what
both the gallery writer and the episode pages need, kept apart so neither imports the other."""

from __future__ import annotations

import hashlib
import html
import os
import re
from pathlib import Path
from typing import Any

from copilot.bench.measures.configs import config_of, label

FOLDER = "gallery"
MARK = "<!-- gallery -->"  # where an episode page carries its gallery link


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60]


def gallery_path(row: dict[str, Any]) -> str:
    """The gallery of a row's configuration and case, relative to the run folder."""
    key = label(config_of(row))
    digest = hashlib.sha256(key.encode()).hexdigest()[:8]
    return f"{FOLDER}/{_slug(key)}-{digest}/{_slug(str(row['case_id']))}.html"


def link_html(run_dir: Path, row: dict[str, Any]) -> str:
    """The episode page's link to its gallery ('' when none was written)."""
    gallery = gallery_path(row)
    if not (run_dir / gallery).is_file():
        return ""
    href = os.path.relpath(run_dir / gallery, run_dir / row["trace_dir"]).replace(os.sep, "/")
    return f'<p><a class="gallery" href="{html.escape(href)}">Final views of every run of this case (Figs 8–9)</a></p>'
