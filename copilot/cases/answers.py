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

# The same vocabularies in words, for people reading an answer (the prompts' option texts).
RANO_NAMES = {"PD": "Progressive disease", "SD": "Stable disease", "PR": "Partial response", "CR": "Complete response"}
LUNG_QUESTIONS = {"1": "Tumor location", "2": "Pathological T stage", "3": "Pathological N stage", "4": "Histology",
                  "5": "Histopathological grade"}  # fmt: skip
LUNG_OPTION_NAMES = {
    "1": {"A": "Right upper lobe", "B": "Right middle lobe", "C": "Right lower lobe", "D": "Left upper lobe",
          "E": "Left lower lobe", "F": "Lingula", "G": "No tumor"},
    "2": {"A": "T1", "B": "T2", "C": "T3", "D": "T4", "E": "Not available / not collected", "F": "No tumor"},
    "3": {"A": "N0", "B": "N1", "C": "N2", "D": "Not available / not collected", "E": "No tumor"},
    "4": {"A": "Adenocarcinoma", "B": "Squamous cell carcinoma", "C": "Small cell carcinoma",
          "D": "Other / indeterminate NSCLC", "E": "No tumor"},
    "5": {"A": "G1 Well differentiated", "B": "G2 Moderately differentiated", "C": "G3 Poorly differentiated",
          "D": "Other Type I: well to moderately differentiated",
          "E": "Other Type II: moderately to poorly differentiated", "F": "No tumor"},
}  # fmt: skip
BRACS_NAMES = {
    "N": "Normal",
    "PB": "Pathological benign",
    "UDH": "Usual ductal hyperplasia",
    "FEA": "Flat epithelial atypia",
    "ADH": "Atypical ductal hyperplasia",
    "DCIS": "Ductal carcinoma in situ",
    "IC": "Invasive carcinoma",
}
CAMELYON_NAMES = {
    "no_tumor": "No tumour",
    "tumor_present": "Tumour present",
    "negative": "Negative",
    "itc": "Isolated tumour cells",
    "micro": "Micrometastasis",
    "macro": "Macrometastasis",
}
