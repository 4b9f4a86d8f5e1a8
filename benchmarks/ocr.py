"""What reading every image by OCR costs before it leaves the machine (`copilot.panel.ocr.ImageGuard`, Tesseract).

Run: `.venv/bin/python benchmarks/ocr.py` (needs the `tesseract` program; about a minute). Renders the MNI T1
template (nilearn) in the three views at 512² with their corner text, plus the same axial view with a patient's
name and ID burnt into it, and times the guard on each image (a fresh guard per read, so nothing is cached):
wall-clock median / 95th percentile in ms, images per second, and for the burnt-in image whether the words were
blanked. A request's images are read once each: an image sent again in the next round is the guard's cache hit.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import sys
import time

import SimpleITK as sitk
from PIL import ImageDraw, ImageFont

from copilot.cases.brain import TEMPLATE_FILES, template_dir
from copilot.engine.png import ENCODERS, PNG_ENCODER
from copilot.engine.volume.image import volume_from_sitk
from copilot.engine.volume.viewer import EmbeddedVolumeViewer
from copilot.panel import ocr
from copilot.panel.redactor import Redactor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=8)
    args = parser.parse_args()
    if not ocr.available():
        sys.exit("the tesseract program is missing (Debian: apt-get install tesseract-ocr)")
    volume = volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"])), "t1")
    viewer = EmbeddedVolumeViewer()
    vid = viewer.add_volume(volume)
    viewer.recover_standard_views(vid)
    images = {view: viewer.render(view, (512, 512)) for view in ("red", "yellow", "green")}
    burnt = viewer.render("red", (512, 512)).copy()
    ImageDraw.Draw(burnt).text((30, 40), "MULLER, HANS  PAT-4471-0932", fill=255, font=ImageFont.load_default(size=20))
    images["red + burnt-in name"] = burnt
    redactor = Redactor(["MÜLLER^HANS", "MÜLLER", "HANS", "PAT-4471-0932"])
    encode = ENCODERS[PNG_ENCODER]
    print(f"{'image 512²':<20} {'med ms':>7} {'p95 ms':>7} {'images/s':>9}  blanked words")
    total = []
    for name, image in images.items():
        url = "data:image/png;base64," + base64.b64encode(encode(image)).decode()
        samples, words = [], 0
        for _ in range(args.repeats):
            events: list[int] = []
            guard = ocr.ImageGuard(redactor.found_in, lambda kind, p, e=events: e.append(p.get("words", 0)))
            start = time.perf_counter()
            guard.data_url(url)
            samples.append((time.perf_counter() - start) * 1000)
            words = sum(events)
        med = statistics.median(samples)
        p95 = sorted(samples)[max(0, round(0.95 * len(samples)) - 1)]
        total += samples
        print(f"{name:<20} {med:7.0f} {p95:7.0f} {1000 / med:9.2f}  {words}")
    print(f"all images: {1000 / statistics.median(total):.2f} images/s (median); load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")  # fmt: skip


if __name__ == "__main__":
    main()
