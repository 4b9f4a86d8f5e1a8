"""Annotations of a standalone QuPath data file (`.qpdata`, as BRACS ships them) read with paquo.

paquo starts QuPath's JVM (it needs a QuPath installation, found through `PAQUO_QUPATH_DIR`);
`qupath.lib.io.PathIO.readHierarchy` reads the object hierarchy without opening the slide.
Where QuPath is not installed, export the annotations to GeoJSON with
`qupath_ext/export_bracs_geojson.groovy` and read those instead.
"""

from __future__ import annotations

from pathlib import Path

from copilot.cases.annotations import Annotation
from qupath_ext.projects import hierarchy_annotations, paquo_available

__all__ = ["hierarchy_annotations", "paquo_available", "read_qpdata"]


def read_qpdata(path: str | Path) -> list[Annotation]:
    """Polygon and rectangle annotations of a `.qpdata` file, with their class names."""
    from paquo.hierarchy import QuPathPathObjectHierarchy
    from paquo.java import File, PathIO

    hierarchy = PathIO.readHierarchy(File(str(Path(path).resolve())))
    return hierarchy_annotations(QuPathPathObjectHierarchy(hierarchy, readonly=True))
