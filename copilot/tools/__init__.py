"""The handler registries. Importing this package declares every radiology and pathology handler once."""

from copilot.tools import dicom_ops as _dicom_ops  # noqa: F401  (declares DICOM operators)
from copilot.tools import evidence as _evidence  # noqa: F401  (declares evidence handlers)
from copilot.tools import evidence_sr as _evidence_sr  # noqa: F401  (declares the evidence report export)
from copilot.tools import kos as _kos  # noqa: F401  (declares the key image export)
from copilot.tools import measure as _measure  # noqa: F401  (declares the value and region measurements)
from copilot.tools import operators as _operators  # noqa: F401  (declares Track B operators)
from copilot.tools import quantities as _quantities  # noqa: F401  (declares the recorded measurements)
from copilot.tools import response_sr as _response_sr  # noqa: F401  (declares the response report export)
from copilot.tools import shapes as _shapes  # noqa: F401  (declares the clinician's shape tools)
from copilot.tools import slide_ann as _slide_ann  # noqa: F401  (declares the slide annotation export)
from copilot.tools.pathology import PATHOLOGY
from copilot.tools.radiology import RADIOLOGY
from copilot.tools.registry import HandlerContext, HandlerOutput, HandlerSpec, ImageOut, Registry, RegistryError

__all__ = [
    "PATHOLOGY",
    "RADIOLOGY",
    "HandlerContext",
    "HandlerOutput",
    "HandlerSpec",
    "ImageOut",
    "Registry",
    "RegistryError",
]
