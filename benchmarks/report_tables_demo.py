"""The benchmark report in docs/, screenshotted in headless Chromium: a run of the offline floors with repeats
(traces, galleries) and scored answer files under named models on Tracks A, B and C, so Tables 3, 5 and 6 have
rows in the paper's groups. The named models' answers are made from the cases' hidden truth with fixed error
patterns — a layout demonstration, not a measurement of those models.

    python -m benchmarks.report_tables_demo docs [KEEP_DIR]   (KEEP_DIR: keep the cases and the run there)
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.bench_report_demo import CHROMIUM_FLAGS
from copilot.bench.report.run_report import write_report
from copilot.cases.pack import find_cases
from copilot.medflow.bench_run import run_batch
from copilot.medflow.registry import make_cases, report_columns
from copilot.medflow.runs import ResultsDB
from copilot.medflow.score_cli import AnswerFile, result_rows, score_answers
from tests.oracle import perfect_response

# name → (tracks with Track B's operation sets, share of answers kept perfect); the rest lose their evidence
# point or their answer line, by a hash of (model, case)
MODELS: dict[str, tuple[tuple[str, ...], float]] = {
    "gpt-5-mini": (("A", "B:segmentation", "B:registration", "B:vista3d", "C"), 0.8),
    "claude-sonnet-4.5": (("A", "C"), 0.7),
    "qwen3-vl-32b": (("A", "B:segmentation", "B:registration", "C"), 0.6),
    "gpt-oss-120b": (("A",), 0.5),
    "medgemma-27b": (("A", "B:segmentation", "C"), 0.5),
    "lingshu-32b": (("A", "C"), 0.4),
    "m3d-llama2-7b": (("C",), 0.3),
    "radfm": (("C",), 0.2),
}
BROWSER_FLAGS = (*CHROMIUM_FLAGS, "--disable-quic", "--hide-scrollbars")


def _answer(model: str, case: Path, keep: float) -> str:
    """The perfect answer, or (by a fixed hash) one whose RAS point is moved 80 mm, or no answer line."""
    good = perfect_response(case)
    h = int(hashlib.sha256(f"{model}/{case.name}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if h < keep:
        return good
    if h < (1 + keep) / 2 and "RAS: [" in good:
        return re.sub(r"RAS: \[(-?[\d.]+)", lambda m: f"RAS: [{float(m.group(1)) + 80:.3f}", good)
    return good.split("ANSWER:")[0] if "ANSWER:" in good else "I cannot tell."


def make_run(tmp: Path) -> Path:
    """Cases, the floors' traced run and the named models' scored answers in one results.sqlite."""
    cases_dir = tmp / "cases"
    for module in ("brain_mri", "longitudinal_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"):
        make_cases(module, 3, 0, cases_dir, spacing=6.0)
    run = tmp / "run"
    run_batch(cases_dir, "baseline", run, progress=None, repeats=2)
    run_batch(cases_dir, "prior", run, progress=None)
    cases = find_cases(cases_dir)
    db = ResultsDB(run / "results.sqlite")
    try:
        for model, (tracks, keep) in MODELS.items():
            for track in tracks:
                name, _, ops = track.partition(":")
                shift = {"A": 0.0, "B": 0.15, "C": -0.15}[name]  # the operations help, the montage hurts
                answers = {c.case_id: _answer(f"{model}/{track}", c.root, keep + shift) for c in cases}
                scores = score_answers(cases, answers)
                for row in result_rows(scores, AnswerFile(answers), model, name):
                    db.insert({**row, "ops": ops, "budget": 20, "backend": "embedded" if name != "C" else "none"})
        rows = db.rows()
    finally:
        db.close()
    write_report(rows, run / "report.html", report_columns(), run_dir=run, galleries=True)
    return run


def extract(report: Path, keys: tuple[str, ...], out: Path) -> Path:
    """A page holding the report's head and the named tables only (what the screenshot shows)."""
    text = report.read_text(encoding="utf-8")
    head = text.split("<body>")[0]
    parts = []
    for key in keys:
        m = re.search(rf'<h2 id="{key}">.*?</table>(?:<p class="caption">.*?</p>)?', text, re.S)
        if m:
            parts.append(m.group(0))
    out.write_text(f"{head}<body>{''.join(parts)}</body></html>", encoding="utf-8")
    return out


def screenshot(page: Path, png: Path, size: str) -> None:
    browser = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile:
        args = [browser, *BROWSER_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size}"]
        subprocess.run([*args, page.as_uri()], check=True, capture_output=True, timeout=120)


def main(out: Path, keep: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        run = make_run(keep or Path(tmp))
        for key, size in (("table3", "1250,1000"), ("table5", "2300,1250"), ("table6", "2000,1150")):
            page = extract(run / "report.html", (key,), run / f"{key}.html")
            screenshot(page, out / f"report_{key}.png", size)
        gallery = sorted((run / "gallery").rglob("brain_mri_*.html"))[0]
        screenshot(gallery, out / "report_gallery.png", "1100,620")
        print(json.dumps({"episodes": len(ResultsDB(run / "results.sqlite").rows())}))


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs"), Path(sys.argv[2]) if len(sys.argv) > 2 else None)
