"""Viewer protocols shared by every backend (embedded engines, Slicer, remote, QuPath)."""

from copilot.viewer.protocol import RadiologyViewer, SlideViewer

__all__ = ["RadiologyViewer", "SlideViewer"]
