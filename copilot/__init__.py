"""MedCopilot core: Qt-free, Slicer-free, QuPath-free runtime for auditable imaging agents."""

__version__ = "0.1.0"
