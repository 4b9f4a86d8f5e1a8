"""Annotations of a standalone QuPath data file (`.qpdata`, as BRACS ships them) read with paquo.

paquo starts QuPath's JVM (it needs a QuPath installation, found through `PAQUO_QUPATH_DIR`);
`qupath.lib.io.PathIO.readHierarchy` reads the object hierarchy without opening the slide.
Where QuPath is not installed, export the annotations to GeoJSON with
`qupath_ext/export_bracs_geojson.groovy` and read those instead.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from copilot.cases.annotations import Annotation
from qupath_ext.projects import paquo_available

__all__ = ["paquo_available", "read_qpdata"]


def read_qpdata(path: str | Path) -> list[Annotation]:
    """Polygon and rectangle annotations of a `.qpdata` file, with their class names."""
    from paquo.hierarchy import QuPathPathObjectHierarchy
    from paquo.java import File, PathIO

    hierarchy = QuPathPathObjectHierarchy(PathIO.readHierarchy(File(str(Path(path).resolve()))), readonly=True)
    out = []
    for ann in hierarchy.annotations:
        cls = ann.path_class.name if ann.path_class is not None else ""
        geoms = getattr(ann.roi, "geoms", [ann.roi])
        for poly in geoms:
            if poly.geom_type != "Polygon":
                continue
            holes = tuple(np.asarray(r.coords)[:-1] for r in poly.interiors)
            out.append(Annotation(cls, np.asarray(poly.exterior.coords)[:-1], holes))
    return out
