"""Ground truth from QuPath projects (`.qpproj`) with paquo, falling back to exported GeoJSON.

paquo needs a QuPath installation (found through `PAQUO_QUPATH_DIR`); where there is none, the
annotations exported by QuPath as GeoJSON are read with the core's plain reader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from copilot.cases.annotations import Annotation, read_geojson


def paquo_available() -> bool:
    try:
        import paquo.projects  # noqa: F401
    except Exception:  # paquo raises at import when it cannot find QuPath
        return False
    return True


def project_annotations(project_dir: str | Path, image_name: str | None = None) -> dict[str, list[Annotation]]:
    """Annotations per image of a QuPath project, read read-only with paquo."""
    from paquo.projects import QuPathProject

    out: dict[str, list[Annotation]] = {}
    with QuPathProject(Path(project_dir), mode="r") as project:
        for image in project.images:
            if image_name is not None and image.image_name != image_name:
                continue
            out[image.image_name] = hierarchy_annotations(image.hierarchy)
    return out


def hierarchy_annotations(hierarchy: Any) -> list[Annotation]:
    """Polygon annotations (with holes, MultiPolygons split) of a paquo hierarchy, with class names."""
    anns = []
    for ann in hierarchy.annotations:
        cls = ann.path_class.name if ann.path_class is not None else ""
        for poly in getattr(ann.roi, "geoms", [ann.roi]):
            if poly.geom_type != "Polygon":
                continue
            holes = tuple(np.asarray(r.coords)[:-1] for r in poly.interiors)
            anns.append(Annotation(cls, np.asarray(poly.exterior.coords)[:-1], holes))
    return anns


def load_annotations(path: str | Path, image_name: str | None = None) -> list[Annotation]:
    """Annotations from a `.qpproj` (paquo, when QuPath is installed) or a GeoJSON export."""
    p = Path(path)
    if p.suffix == ".qpproj" or (p / "project.qpproj").is_file():
        if not paquo_available():
            raise RuntimeError("reading .qpproj needs paquo and a QuPath installation (PAQUO_QUPATH_DIR)")
        per_image = project_annotations(p.parent if p.suffix == ".qpproj" else p, image_name)
        return [a for anns in per_image.values() for a in anns]
    return read_geojson(p)
