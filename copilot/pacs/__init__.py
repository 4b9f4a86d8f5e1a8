"""Studies from a PACS and results back to it, over DICOMweb: QIDO-RS search, WADO-RS retrieval into a bounded
local cache, STOW-RS storage of what a session derives (DICOM SEG, evidence SR).

Nothing here imports the session, the panel or the handlers: the handlers call down into `store`, the command
line and the study openers call `fetch`.
"""

from copilot.pacs.errors import PacsError
from copilot.pacs.urls import DicomwebRef, is_dicomweb_url, parse_dicomweb_url

__all__ = ["DicomwebRef", "PacsError", "is_dicomweb_url", "parse_dicomweb_url"]
