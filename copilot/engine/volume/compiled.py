"""numba compilation for the renderers' pixel loops: imported and compiled on first use only, kept in numba's
on-disk cache where a cache folder is writable (else compiled anew in each process: a read-only install)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from functools import cache
from typing import Any


@cache
def available() -> bool:
    """Whether numba is installed (looked up, not imported)."""
    return importlib.util.find_spec("numba") is not None


@cache
def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` compiled without the GIL (once per process)."""
    import numba

    try:
        return numba.njit(nogil=True, cache=True)(fn)  # type: ignore[no-any-return]
    except RuntimeError:  # numba: "cannot cache function ...: no locator available"
        return numba.njit(nogil=True)(fn)  # type: ignore[no-any-return]
