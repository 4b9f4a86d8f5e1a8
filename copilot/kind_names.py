"""The names of the viewer kinds, for the floors below `copilot.kinds` (cases, tools, scoring) that record or
look up a case's kind without importing its descriptor."""

RADIOLOGY = "radiology"  # volumes in slice views (3D Slicer)
PATHOLOGY = "pathology"  # a whole-slide image (QuPath)
