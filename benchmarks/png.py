"""Lossless encoding of rendered views: the project's PNG writer against Pillow's PNG at zlib level 1.

Run: `.venv/bin/python benchmarks/png.py`. Renders the MNI T1 template (nilearn) in the three views at
512² (grey) and a fused CT+PET-like view (RGB), then times each encoder in CPU time (`process_time`, so a
busy machine changes the figures less), median / 95th percentile in ms over `--repeats` encodes, with the
byte sizes, the ratio Pillow / ours (> 1: ours faster) and a check that both decode to the same pixels.
"""

from __future__ import annotations

import argparse
import io
import statistics
import time
from collections.abc import Callable

import numpy as np
import SimpleITK as sitk
from PIL import Image

from copilot.cases.brain import TEMPLATE_FILES, template_dir
from copilot.engine.png import ENCODERS, LEGACY_PNG_ENCODER, PNG_ENCODER
from copilot.engine.volume.image import volume_from_sitk
from copilot.engine.volume.viewer import EmbeddedVolumeViewer


def cpu_ms(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        samples.append((time.process_time() - t0) * 1000.0)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    volume = volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"])), "t1")
    viewer = EmbeddedVolumeViewer()
    vid = viewer.add_volume(volume)
    viewer.recover_standard_views(vid)
    images = {view: viewer.render(view, (512, 512)) for view in ("red", "yellow", "green")}
    pet = viewer.add_volume(volume_from_sitk(sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"])), "pet"))
    viewer.apply_preset(pet, "pet_auto")
    viewer.set_fusion(vid, pet, 0.5)
    images["fused (RGB)"] = viewer.render("red", (512, 512))
    ours, pillow = ENCODERS[PNG_ENCODER], ENCODERS[LEGACY_PNG_ENCODER]
    head = f"{'view 512²':<12} {'ours med/p95':>14} {'Pillow med/p95':>16} {'ratio':>6} {'ours B':>8} {'Pillow B':>9}"
    print(head + "  same pixels")
    for name, image in images.items():
        a, b = ours(image), pillow(image)
        same = np.array_equal(np.asarray(Image.open(io.BytesIO(a))), np.asarray(Image.open(io.BytesIO(b))))
        om, op = cpu_ms(lambda i=image: ours(i), args.repeats)
        pm, pp = cpu_ms(lambda i=image: pillow(i), args.repeats)
        print(f"{name:<12} {om:6.2f} / {op:5.2f} {pm:8.2f} / {pp:5.2f} {pm / om:5.1f}× {len(a):8d} {len(b):9d}  {same}")


if __name__ == "__main__":
    main()
