"""Track C input (Appendix C.2) for pipelines that do not drive a viewer: a case's pictures, drawn by its viewer
kind (`ViewerKind.montage`: slice montages per series, a slide's thumbnail), written as PNGs with `montage.json`."""

from __future__ import annotations

import json
from pathlib import Path

from copilot.cases.pack import load_case
from copilot.engine.volume.render import encode_png
from copilot.kinds import kinds


def write_montages(case_dir: str | Path, out_dir: str | Path) -> list[Path]:
    """Write a case's montages as PNGs plus `montage.json` describing them."""
    case = load_case(case_dir)
    out = Path(out_dir) / case.case_id
    out.mkdir(parents=True, exist_ok=True)
    kind = kinds().get(case.kind)
    if kind is None or kind.montage is None:
        raise ValueError(f"no Track C montage for {case.kind} cases")
    images = kind.montage(case)
    written = []
    for name, image in images.items():
        path = out / f"{name}.png"
        path.write_bytes(encode_png(image))
        written.append(path)
    (out / "montage.json").write_text(
        json.dumps({"case_id": case.case_id, "module": case.module, "images": [p.name for p in written]}, indent=2)
    )
    return written
