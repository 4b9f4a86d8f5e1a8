"""Galleries of final views across repeated runs (Figs 8–9): what a run ended on, one column per run, the
hidden lesion drawn at report time, and the links between the report, the galleries and the episode pages."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from copilot.bench.report.gallery import final_view, gallery_path
from copilot.bench.report.run_report import write_report
from copilot.medflow.bench_run import run_batch
from copilot.medflow.registry import report_columns
from copilot.medflow.runs import ResultsDB


def shot(seq: int, view: str, offset: float, actor: str = "agent", **more: Any) -> dict[str, Any]:
    return {"type": "handler_call", "seq": seq, "actor": actor, "ok": True,
            "images": [{"view": view, "artifact": f"artifacts/{seq:06d}_0_{view}.png"}],
            "state": {"views": {view: {"offset": offset}}}, **more}  # fmt: skip


def test_final_view_is_the_last_state_and_image_per_view() -> None:
    """Calls: 1 red at S 10 (system), 2 yellow at R −4, 3 red at S 22 with a recorded point, 4 a refused call
    with an image (ignored), 5 a record without an image. Final state: call 3's (S 22); last image per view:
    red ← call 3, yellow ← call 2; recorded points: call 3's RAS and call 5's."""
    events = [
        shot(1, "red", 10.0, actor="system"),
        shot(2, "yellow", -4.0),
        shot(3, "red", 22.0, result={"evidence": {"kind": "point", "ras": [1, 2, 22]}}),
        {**shot(4, "red", 99.0), "ok": False},
        {"type": "handler_call", "seq": 5, "actor": "agent", "ok": True,
         "result": {"evidence": {"kind": "point", "ras": [3.0, 4.0, 5.0]}}},
    ]  # fmt: skip
    final = final_view(events)
    assert final["state"]["views"]["red"]["offset"] == 22.0
    assert final["images"] == {"red": "artifacts/000003_0_red.png", "yellow": "artifacts/000002_0_yellow.png"}
    assert final["points"] == [[1.0, 2.0, 22.0], [3.0, 4.0, 5.0]]


def test_gallery_path_keys_configuration_and_case() -> None:
    """Same configuration and case → one gallery; another budget → another folder."""
    row = {"model": "m", "policy": "baseline", "track": "A", "budget": 20, "case_id": "c 1"}
    assert gallery_path(row) == gallery_path({**row, "repeat": 3})
    assert gallery_path(row).endswith("/c_1.html") and gallery_path(row).startswith("gallery/m_offline_")
    assert gallery_path({**row, "budget": 5}) != gallery_path(row)


def _green(uri: str) -> int:
    """Pixels where the mask's green fill dominates (G above R and B by 40)."""
    img = np.asarray(Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).convert("RGB")).astype(int)
    return int(((img[..., 1] - img[..., 0] > 40) & (img[..., 1] - img[..., 2] > 40)).sum())


def test_gallery_of_two_repeats(brain_case: Path, tmp_path: Path) -> None:
    """Two baseline runs of the brain case: one gallery with two run columns, each linking its episode page;
    each run's final axial plane (through the lesion: baseline Loc 1) drawn with the hidden mask in green; the
    report lists the gallery and each episode page links it. A report over the same runs keeps the gallery; one
    over other runs redraws it."""
    run = tmp_path / "run"
    run_batch(brain_case, "baseline", run, progress=None, repeats=2)
    db = ResultsDB(run / "results.sqlite")
    rows = db.rows()
    db.close()
    assert len(rows) == 2 and all(r["loc"] == 1.0 for r in rows)
    write_report(rows, run / "report.html", report_columns(), run_dir=run, galleries=True)
    gallery = run / gallery_path(rows[0])
    page = gallery.read_text(encoding="utf-8")
    assert page.count("/episode.html\">repeat ") == 2
    uris = re.findall(r'<img src="(data:image/png;base64,[^"]+)" alt="axial"', page)
    assert len(uris) == 2 and all(_green(u) > 0 for u in uris)
    shown = re.findall(r'<img src="([^"]+\.png)"', page)
    assert shown and all((gallery.parent / s).resolve().is_file() for s in shown)  # the agent's own images
    assert gallery_path(rows[0]) in (run / "report.html").read_text(encoding="utf-8")
    for r in rows:
        episode = (run / r["trace_dir"] / "episode.html").read_text(encoding="utf-8")
        (href,) = re.findall(r'class="gallery" href="([^"]+)"', episode)
        assert (run / r["trace_dir"] / href).resolve() == gallery.resolve()
    gallery.write_text(page + "<!-- kept -->", encoding="utf-8")  # the same runs again: not redrawn
    write_report(rows, run / "report.html", report_columns(), run_dir=run, galleries=True)
    assert gallery.read_text(encoding="utf-8").endswith("<!-- kept -->")
    write_report(rows[:1], run / "report.html", report_columns(), run_dir=run, galleries=True)  # runs changed
    assert gallery.read_text(encoding="utf-8").count("/episode.html\">repeat ") == 1
