"""The answer vocabularies of the MedFlow modules (Appendix H): options, field names and labels.

They describe the case packs' ground truth, so generators, dataset adapters and answer parsers all read
them from here.
"""

from __future__ import annotations

BRAIN_OPTIONS = {
    "A": "Glioblastoma",
    "B": "Oligodendroglioma / Astrocytoma",
    "C": "No tumor",
    "D": "Dysembryoplastic neuroepithelial tumor (DNET) / Ganglioglioma",
    "E": "Pilocytic Astrocytoma",
    "F": "Central Neurocytoma / Ependymoma",
}
RANO_OPTIONS = {"A": "PD", "B": "SD", "C": "PR", "D": "CR"}
RANO_FIELDS = (
    "NON_MEASURABLE_LESION",
    "T2_PROGRESSION",
    "CURRENT_TARGET_LESION",
    "NEW_TARGET_LESION",
    "CURRENT_NON_TARGET_LESION",
    "NEW_NON_TARGET_LESION",
)
EVIDENCE_KEYS = {"KEY_SLICE_AXIAL_MM": "S", "KEY_SLICE_SAGITTAL_MM": "R", "KEY_SLICE_CORONAL_MM": "A"}
LUNG_OPTIONS = {"1": "ABCDEFG", "2": "ABCDEF", "3": "ABCDE", "4": "ABCDE", "5": "ABCDEF"}
BRACS_LABELS = ("N", "PB", "UDH", "FEA", "ADH", "DCIS", "IC")
CAMELYON_PRESENCE = ("no_tumor", "tumor_present")
CAMELYON_LARGEST = ("negative", "itc", "micro", "macro")
