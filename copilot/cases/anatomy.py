"""The brain template maps that synthetic brain cases are drawn on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import SimpleITK as sitk


@dataclass
class Anatomy:
    """Template maps on one grid (SimpleITK reference image + arrays [k, j, i])."""

    reference: sitk.Image
    t1: np.ndarray
    gm: np.ndarray
    wm: np.ndarray
    csf: np.ndarray
    head: np.ndarray
