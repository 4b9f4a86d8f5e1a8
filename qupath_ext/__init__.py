"""QuPath host: drive a running QuPath through its Py4J gateway with the pathology handler registry."""

from qupath_ext.bridge import DEFAULT_PORT, QuPathViewer

__all__ = ["DEFAULT_PORT", "QuPathViewer"]
