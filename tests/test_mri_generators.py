"""The brain and longitudinal MRI generators work slab by slab and write each sequence as it is made, yet give the
very voxels the whole-volume generator gave (the offline baselines' scores stay what they were): the digests below
were taken from it, for every lesion phenotype and longitudinal scenario."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import SimpleITK as sitk

from copilot.cases.brain import make_brain_case
from copilot.cases.longitudinal import make_longitudinal_case

ROOT = Path(__file__).resolve().parent.parent
# case pack digests (voxels, geometry and pixel type of every NIfTI file; bytes of every other file) at 4 mm
WHOLE_VOLUME_DIGESTS = {
    ("brain", "A", 12): "8c91af4aca95d37fe646",
    ("brain", "D", 15): "6ec5a1ac0356de7b1006",
    ("brain", "E", 16): "3cc704a8fbca06d67556",
    ("brain", "F", 17): "1b656a47dcd65bcafadf",
    ("long", "A", 5): "d6699f011429713749aa",  # a new lesion
    ("long", "D", 7): "93c00c96bd6fb9d6252c",  # a satellite lesion, gone with the main one
}


def digest(case: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in case.rglob("*") if p.is_file()):
        h.update(f.relative_to(case).as_posix().encode())
        if f.name.endswith(".nii.gz"):
            image = sitk.ReadImage(str(f))
            h.update(sitk.GetArrayViewFromImage(image).tobytes())
            geometry = (image.GetSpacing(), image.GetOrigin(), image.GetDirection(), image.GetPixelIDTypeAsString())
            h.update(repr(geometry).encode())
        else:
            h.update(f.read_bytes())
    return h.hexdigest()[:20]


@pytest.mark.parametrize(("kind", "letter", "seed"), list(WHOLE_VOLUME_DIGESTS))
def test_slab_by_slab_cases_are_the_whole_volume_cases(tmp_path: Path, kind: str, letter: str, seed: int) -> None:
    if kind == "brain":
        case = make_brain_case(tmp_path, f"b{letter}", seed, spacing=4.0, label=letter)
    else:
        case = make_longitudinal_case(tmp_path, f"l{letter}{seed}", seed, spacing=4.0, label=letter)
    assert digest(case) == WHOLE_VOLUME_DIGESTS[(kind, letter, seed)]


def test_a_longitudinal_case_peaks_far_below_its_whole_volume_footprint(tmp_path: Path) -> None:
    """At 2 mm the whole-volume generator grew the process by 190 MB (eight studies' float64 volumes, full-size
    lesion fields); slab by slab it grows by about 80 MB, most of it the 1 mm templates being read."""
    code = (
        "import sys\nfrom pathlib import Path\nfrom copilot.cases.longitudinal import make_longitudinal_case\n"
        "def status(key):\n"
        "    return next(int(line.split()[1]) for line in open('/proc/self/status') if line.startswith(key))\n"
        "before = status('VmRSS')\n"
        "make_longitudinal_case(Path(sys.argv[1]), 'l', 5, spacing=2.0, label='A')\n"
        "print((status('VmHWM') - before) // 1024)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout  # fmt: skip
    assert int(out.strip()) < 130
