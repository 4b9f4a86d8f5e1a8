"""Orientation letters of a 2D view and the axes of the 3D orientation marker (Qt-free).

A slice pane's picture maps to RAS through its image→RAS matrix (Slicer's XYToRAS for the pane's size): the
screen's rightward direction is the matrix's first column, its downward direction the second. Each edge is
labelled with the patient direction it points to, as radiology viewers do: R/L, A/P, S/I for the RAS
components of that direction, the major one first and every component that leans more than `OBLIQUE_MIN`
after it (the DICOM Patient Orientation rule for oblique images), so an axial view reads R on the left and
L on the right (radiological convention), and a view turned by 30° about S reads e.g. `RA` / `LP`.
"""

from __future__ import annotations

import numpy as np

AXIS_LETTERS = (("R", "L"), ("A", "P"), ("S", "I"))
OBLIQUE_MIN = 0.17  # |cos| of a minor component still named: a tilt of about 10° or more


def direction_letters(direction: np.ndarray | list[float], minimum: float = OBLIQUE_MIN) -> str:
    """Letters of a RAS direction: `R` for (1, 0, 0), `LP` for (−0.9, −0.4, 0), '' for a zero vector."""
    d = np.asarray(direction, dtype=float)
    norm = float(np.linalg.norm(d))
    if not np.isfinite(norm) or norm == 0:
        return ""
    d = d / norm
    order = sorted(range(3), key=lambda a: -abs(d[a]))
    out = []
    for rank, axis in enumerate(order):
        if rank > 0 and abs(d[axis]) < minimum:
            break
        out.append(AXIS_LETTERS[axis][0 if d[axis] > 0 else 1])
    return "".join(out)


def edge_letters(image_to_ras: np.ndarray) -> dict[str, str]:
    """{'left', 'right', 'top', 'bottom'} → the patient direction each edge of the picture faces."""
    m = np.asarray(image_to_ras, dtype=float)
    right, down = m[:3, 0], m[:3, 1]
    return {
        "left": direction_letters(-right),
        "right": direction_letters(right),
        "top": direction_letters(-down),
        "bottom": direction_letters(down),
    }


def marker_axes(direction: np.ndarray, up: np.ndarray) -> list[tuple[str, float, float, float]]:
    """The 3D orientation marker: for each of R, A, S, its screen direction (x right, y down) as seen by a
    camera looking along −`direction` (eye minus focal point) with `up` upward, and its depth towards the
    viewer (to draw the far axes first)."""
    back = np.asarray(direction, dtype=float)
    back = back / np.linalg.norm(back)
    u = np.asarray(up, dtype=float)
    u = u - back * float(u @ back)
    u = u / np.linalg.norm(u)
    right = np.cross(u, back)  # the camera's right: up × (eye − focus)
    out = []
    for letter, axis in (("R", (1.0, 0.0, 0.0)), ("A", (0.0, 1.0, 0.0)), ("S", (0.0, 0.0, 1.0))):
        a = np.array(axis)
        out.append((letter, float(a @ right), float(-(a @ u)), float(a @ back)))
    return sorted(out, key=lambda t: t[3])
