"""Slice-view render + PNG encode time, against SimpleITK `Resample` + Pillow on the same slice.

Run: `.venv/bin/python benchmarks/render.py` (or `make bench`). Uses the 1 mm MNI T1 template that
nilearn ships (197×233×189), axis-aligned and with an oblique direction (20°/15° rotation), plus a
fused CT+PET-like pair. Prints median / 95th percentile in ms and the ratio alternative/ours
(> 1 means ours is faster), measured in the same run.
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
from copilot.engine.volume.display import to_uint8
from copilot.engine.volume.image import Volume, volume_from_sitk, volume_to_sitk
from copilot.engine.volume.render import encode_png
from copilot.engine.volume.reslice import view_grid
from copilot.engine.volume.viewer import EmbeddedVolumeViewer


def timed(fn: Callable[[int], object], repeats: int) -> tuple[float, float]:
    """Median and 95th percentile wall time in ms over `repeats` calls (after one warm-up)."""
    fn(0)
    samples = []
    for n in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        samples.append((time.perf_counter() - t0) * 1000.0)
    samples.sort()
    return statistics.median(samples), samples[min(len(samples) - 1, int(0.95 * len(samples)))]


def rotated(volume: Volume, ax: float, ay: float) -> Volume:
    """Same voxels, with the direction rotated about the volume centre (an oblique acquisition)."""
    ca, sa, cb, sb = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay)
    rot = np.array([[1, 0, 0], [0, ca, -sa], [0, sa, ca]]) @ np.array([[cb, 0, sb], [0, 1, 0], [-sb, 0, cb]])
    m = volume.ijk_to_ras.copy()
    centre = volume.center_ras()
    m[:3, :3] = rot @ m[:3, :3]
    m[:3, 3] = rot @ (m[:3, 3] - centre) + centre
    return Volume(volume.name + "_oblique", volume.data, m)


def sitk_slice(image: sitk.Image, viewer: EmbeddedVolumeViewer, view: str, size: int) -> sitk.Image:
    """The alternative: SimpleITK `Resample` of the volume onto the same view grid (linear)."""
    ref = view_grid(viewer.view(view).image_to_ras_matrix((size, size)), (size, size))
    return sitk.Resample(image, ref, sitk.Transform(), sitk.sitkLinear, 0.0)


def png_of(arr: np.ndarray, level: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG", compress_level=level)
    return buf.getvalue()


def bench_volume(volume: Volume, label: str, repeats: int) -> None:
    viewer = EmbeddedVolumeViewer()
    vid = viewer.add_volume(volume)
    viewer.recover_standard_views(vid)
    d = viewer.display(vid)
    image = volume_to_sitk(volume)
    for size in (256, 512):
        for view in ("red", "yellow", "green"):
            lo, hi = viewer.slice_offset_range(view)
            offsets = np.linspace(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo), repeats + 1)

            def ours(n: int, view: str = view, size: int = size, offsets: np.ndarray = offsets) -> bytes:
                viewer.set_slice_offset(view, float(offsets[n]))
                return encode_png(viewer.render(view, (size, size)))

            def alternative(n: int, view: str = view, size: int = size, offsets: np.ndarray = offsets) -> bytes:
                viewer.set_slice_offset(view, float(offsets[n]))
                arr = sitk.GetArrayViewFromImage(sitk_slice(image, viewer, view, size))[0]
                return png_of(to_uint8(arr, d.window, d.level), 1)

            o_med, o_p95 = timed(ours, repeats)
            a_med, a_p95 = timed(alternative, repeats)
            print(
                f"{label:<8} {view:<7} {size:>4}²  ours {o_med:6.1f} / {o_p95:6.1f} ms   "
                f"SimpleITK Resample+Pillow {a_med:6.1f} / {a_p95:6.1f} ms   ratio {a_med / o_med:4.1f}×"
            )


def bench_fusion(t1: Volume, repeats: int) -> None:
    viewer = EmbeddedVolumeViewer()
    ct = viewer.add_volume(Volume("CT", t1.data * 2.0 - 500.0, t1.ijk_to_ras, modality="CT"))
    pet = viewer.add_volume(Volume("PET", np.clip(t1.data - 60.0, 0, None) / 20.0, t1.ijk_to_ras, modality="PT"))
    viewer.recover_standard_views(ct)
    viewer.set_fusion(ct, pet, 0.5)

    def fused(n: int) -> bytes:
        viewer.set_slice_offset("red", -30.0 + n * 0.5)
        return encode_png(viewer.render("red", (512, 512)))

    med, p95 = timed(fused, repeats)
    print(f"fused CT+PET red 512²  {med:6.1f} / {p95:6.1f} ms")


def bench_conversion(t1: Volume) -> None:
    viewer = EmbeddedVolumeViewer()
    viewer.recover_standard_views(viewer.add_volume(rotated(t1, 0.35, 0.26)))
    v = viewer.view("green")
    pts = np.random.default_rng(0).uniform(0, 999, size=(20000, 2))
    t0 = time.perf_counter()
    ras = [v.norm1000_to_ras((p[0], p[1]), (512, 512)) for p in pts]
    per_point = (time.perf_counter() - t0) / len(pts) * 1e6
    back = np.array([v.ras_to_norm1000(r, (512, 512)) for r in ras])
    again = np.array([v.norm1000_to_ras((b[0], b[1]), (512, 512)) for b in back])
    err = float(np.abs(again - np.array(ras)).max())
    print(f"screen→RAS {per_point:.1f} µs/point (one point per call); round-trip error {err:.2e} mm")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=30)
    ns = parser.parse_args()
    t1_image = sitk.ReadImage(str(template_dir() / TEMPLATE_FILES["t1"]), sitk.sitkFloat32)
    t1 = volume_from_sitk(t1_image, "T1")
    print(f"volume {t1.dimensions} at {t1.spacing} mm; {ns.repeats} renders per row; median / p95")
    bench_volume(t1, "axis", ns.repeats)
    bench_volume(rotated(t1, 0.35, 0.26), "oblique", ns.repeats)
    bench_fusion(t1, ns.repeats)
    bench_conversion(t1)


if __name__ == "__main__":
    main()
