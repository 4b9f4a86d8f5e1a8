"""Names of the 3D view's rendering presets, apart from the VTK scene so the toolbar lists them without loading VTK."""

from __future__ import annotations

PRESETS = ("mr_default", "ct_soft_tissue", "ct_bone", "ct_lung", "pet_mip")
