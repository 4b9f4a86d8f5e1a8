"""The copilot panel view-model (Qt-free)."""
