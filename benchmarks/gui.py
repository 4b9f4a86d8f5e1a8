"""Desktop interaction latency: wheel-scroll one slice → the three views repainted (offscreen Qt).

Run: `.venv/bin/python benchmarks/gui.py [--case CASE_DIR]`. The alternative measured in the same run is
what a remote viewer client does for the same scroll: the handler call's PNGs decoded into pixmaps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtGui import QPixmap
from PySide6.QtWidgets import QApplication

from copilot.gui.app import build_window
from copilot.medflow import make_cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--case", default=None)
    parser.add_argument("--repeats", type=int, default=40)
    ns = parser.parse_args()
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        case = Path(ns.case) if ns.case else make_cases("brain_mri", 1, 0, Path(tmp), spacing=1.0)[0]
        window = build_window(case)
        window.resize(1400, 720)
        window.show()
        app.processEvents()
        red = window.views["red"]
        ours, alt = [], []
        for n in range(ns.repeats):
            before = red.pixmap().cacheKey()
            t0 = time.perf_counter()
            window.model.scroll("red", 1 if n % 2 == 0 else -1)
            while red.pixmap().cacheKey() == before:
                app.processEvents()
            ours.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            out = window.model.session.call(
                "scroll", {"view": "red", "num_slices": 1, "output": "keyframes", "size": red.side}, actor="benchmark"
            )
            pix = QPixmap()
            pix.loadFromData(out.images[0].data)
            alt.append((time.perf_counter() - t0) * 1000)
        o, a = statistics.median(ours), statistics.median(alt)
        p95 = sorted(ours)[int(0.95 * len(ours)) - 1]
        print(
            f"scroll → 3 views repainted at {red.side}px: median {o:.1f} ms, p95 {p95:.1f} ms; "
            f"handler PNG + decode (one view) {a:.1f} ms → ratio {a / o:.2f}x"
        )


if __name__ == "__main__":
    main()
