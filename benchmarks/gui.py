"""Desktop interaction latency: wheel-scroll one slice → the three slice views repainted (offscreen Qt).

Run: `.venv/bin/python benchmarks/gui.py [--case CASE_DIR]`. Three paths are timed in the same run, from
the scroll to the end of the repaint, for three full-size panes (each at least 512 px):
- screen path: the audited scroll call, then raw pixels of the changed pane painted (unchanged panes
  keep their pixels);
- screen path, all three re-rendered: the same with the pane cache cleared (every pane rendered);
- PNG path (the obvious alternative, what a remote viewer client does): the same scroll call, then each
  pane rendered, PNG-encoded, decoded into a pixmap and painted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QPainter, QPixmap
from PySide6.QtWidgets import QApplication

from copilot.engine.volume.render import encode_png
from copilot.gui.app import build_window
from copilot.medflow import make_cases
from copilot.session import Peek


def _stats(ms: list[float]) -> tuple[float, float]:
    ordered = sorted(ms)
    return statistics.median(ms), ordered[max(0, round(0.95 * len(ordered)) - 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", default=None)
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--size", default="2300x900", help="window size (the panes get what the panel leaves)")
    ns = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        case = Path(ns.case) if ns.case else make_cases("brain_mri", 1, 0, Path(tmp), spacing=1.0)[0]
        window = build_window(case)
        window.quiet = True
        window.resize(*(int(v) for v in ns.size.split("x")))
        window.show()
        for _ in range(5):
            app.processEvents()
        panes = [window.panes[n] for n in ("red", "yellow", "green")]
        sizes = [p.device_size() for p in panes]
        if min(min(s) for s in sizes) < 512:
            raise SystemExit(f"panes are smaller than 512 px: {sizes}; give a larger --size")
        red, model, screen = panes[0], window.model, window.screen_path

        def scroll(n: int) -> None:
            model.scroll("red", 1 if n % 2 == 0 else -1)

        def screen_path(n: int, clear: bool) -> float:
            before = red.paints
            t0 = time.perf_counter()
            if clear:
                screen.clear_cache()
            scroll(n)
            while red.paints == before:
                app.processEvents()
            return (time.perf_counter() - t0) * 1000

        pixmap = QPixmap(*sizes[0])

        def png_path(n: int) -> float:
            t0 = time.perf_counter()
            scroll(n)
            images = model.session.peek(Peek(("red", "yellow", "green"), sizes[0])) or {}
            for image in images.values():
                pix = QPixmap()
                pix.loadFromData(encode_png(image))
                painter = QPainter(pixmap)
                painter.drawPixmap(0, 0, pix)
                painter.end()
            return (time.perf_counter() - t0) * 1000

        ours, ours_all, png = [], [], []
        for n in range(ns.repeats):  # interleaved, so that the machine's load hits all three alike
            ours.append(screen_path(n, clear=False))
            ours_all.append(screen_path(n + 1, clear=True))
            png.append(png_path(n))
        (o, op), (a, ap), (p, pp) = _stats(ours), _stats(ours_all), _stats(png)
        dims = ", ".join(f"{w}×{h}" for w, h in sizes)
        print(f"scroll → 3 views repainted ({dims} device px), {ns.repeats} scrolls each:")
        print(f"  screen path (raw pixels, changed pane):  median {o:5.1f} ms  p95 {op:5.1f} ms")
        print(f"  screen path (all three re-rendered):     median {a:5.1f} ms  p95 {ap:5.1f} ms")
        print(f"  PNG encode + decode path:                median {p:5.1f} ms  p95 {pp:5.1f} ms")
        print(f"  ratio PNG / screen: {p / o:.2f}x (changed pane), {p / a:.2f}x (all three); 60 Hz frame = 16.7 ms")
        window.close()


if __name__ == "__main__":
    main()
