"""Pillow's bilinear affine transform of an 8-bit image, compiled (numba).

The arithmetic is Pillow's, operation for operation, so the pixels are Pillow's bytes: each output pixel centre
(x + ½, y + ½) maps to the input point a·(x + ½) + b·(y + ½) + c, d·(x + ½) + e·(y + ½) + f in double precision;
a point outside [0, width) × [0, height) is black; otherwise the point less ½ is split into whole and fractional
parts (floor), the two columns clamped to the image, the row below taken only when it exists, each row
interpolated as a + (b − a)·t, then the rows, and the result truncated to a byte. Slice views zoomed out below a
pixel per voxel (the usual fitted view of a 512² CT in a desktop pane) and views rotated within the voxel plane
take this route. A map that only scales and shifts each axis (every voxel-plane view without a swap) works out
each column's input point once for all rows and each row's once for all columns, the same numbers as per pixel
(the cross terms are zeros): about nine times Pillow's speed; other maps about twice. One core: cutting the rows
into bands on a second thread cost more in hand-over than it saved on a loaded two-core machine.

`available()` says whether numba is installed; without it the callers use Pillow itself (the same bytes).
"""

from __future__ import annotations

import numpy as np

from copilot.engine.volume import compiled


def available() -> bool:
    """Whether the compiled transform can run (numba installed)."""
    return compiled.available()


def affine_uint8(src: np.ndarray, coeffs: tuple[float, ...], size: tuple[int, int]) -> np.ndarray:
    """The H×W (size: W, H) bilinear affine transform of an 8-bit image, as Pillow's `Image.transform(size, AFFINE,
    coeffs, BILINEAR)` computes it (black outside the source)."""
    w, h = size
    out = np.zeros((h, w), dtype=np.uint8)
    a = np.array(coeffs[:6], dtype=np.float64)
    image = np.ascontiguousarray(src, dtype=np.uint8)
    compiled.compiled(_rows)(image, a, 0, h, out)
    return out


def _rows(src: np.ndarray, a: np.ndarray, y0: int, y1: int, out: np.ndarray) -> None:
    """Rows y0 ≤ y < y1 of the transform (compiled by numba; plain Python is the same arithmetic, slowly)."""
    sh, sw = src.shape
    w = out.shape[1]
    if a[1] == 0.0 and a[3] == 0.0:  # a scale and shift per axis: b·(y + ½) and d·(x + ½) are zeros, adding nothing
        ok = np.zeros(w, dtype=np.bool_)  # the columns' input points, once for every row
        c0s, c1s, dxs = np.zeros(w, dtype=np.int64), np.zeros(w, dtype=np.int64), np.zeros(w, dtype=np.float64)
        for x in range(w):
            xx = a[0] * (x + 0.5) + a[1] * 0.5 + a[2]
            if xx < 0.0 or xx >= sw:
                continue
            xx -= 0.5
            xi = int(np.floor(xx)) if xx < 0.0 else int(xx)
            ok[x], dxs[x] = True, xx - xi
            c0s[x] = 0 if xi < 0 else (xi if xi < sw else sw - 1)
            c1s[x] = 0 if xi + 1 < 0 else (xi + 1 if xi + 1 < sw else sw - 1)
        for y in range(y0, y1):
            yy = a[3] * 0.5 + a[4] * (y + 0.5) + a[5]
            if yy < 0.0 or yy >= sh:
                continue
            yy -= 0.5
            yi = int(np.floor(yy)) if yy < 0.0 else int(yy)
            dy = yy - yi
            r0 = 0 if yi < 0 else (yi if yi < sh else sh - 1)
            below = 0 <= yi + 1 < sh
            r1 = yi + 1 if below else r0
            for x in range(w):
                if not ok[x]:
                    continue
                c0, c1, dx = c0s[x], c1s[x], dxs[x]
                p, q = float(src[r0, c0]), float(src[r0, c1])
                v1 = p + (q - p) * dx
                if below:
                    p, q = float(src[r1, c0]), float(src[r1, c1])
                    v2 = p + (q - p) * dx
                else:
                    v2 = v1
                out[y, x] = np.uint8(v1 + (v2 - v1) * dy)
        return
    for y in range(y0, y1):
        yin = y + 0.5
        for x in range(w):
            xin = x + 0.5
            xx = a[0] * xin + a[1] * yin + a[2]
            yy = a[3] * xin + a[4] * yin + a[5]
            if xx < 0.0 or xx >= sw or yy < 0.0 or yy >= sh:
                continue  # outside the source: stays black
            xx -= 0.5
            yy -= 0.5
            xi = int(np.floor(xx)) if xx < 0.0 else int(xx)
            yi = int(np.floor(yy)) if yy < 0.0 else int(yy)
            dx = xx - xi
            dy = yy - yi
            c0 = 0 if xi < 0 else (xi if xi < sw else sw - 1)
            c1 = 0 if xi + 1 < 0 else (xi + 1 if xi + 1 < sw else sw - 1)
            r0 = 0 if yi < 0 else (yi if yi < sh else sh - 1)
            p, q = float(src[r0, c0]), float(src[r0, c1])
            v1 = p + (q - p) * dx
            if 0 <= yi + 1 < sh:
                p, q = float(src[yi + 1, c0]), float(src[yi + 1, c1])
                v2 = p + (q - p) * dx
            else:
                v2 = v1
            out[y, x] = np.uint8(v1 + (v2 - v1) * dy)
