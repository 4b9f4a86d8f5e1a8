"""What in a slide file names its patient or case, read from the properties every format's reader offers (Aperio,
Hamamatsu, Leica, MIRAX, DICOM-WSI, OME-TIFF, generic TIFF tags) and from `Key = value` fields of descriptions:
MRN, patient ID and name, accession, case and specimen numbers, barcodes, label text, file names, operators,
dates. Also which pyramid levels are tissue (a label or macro page stored as a tiled page is not), and the name a
slide is shown by: its file's stem, or `slide` when the stem holds one of its identifiers (a file named after
the case number the barcode carries).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

SHOWN_WHEN_NAMED = "slide"  # the name drawn and sent for a slide whose file name holds an identifier
IDENTIFYING_KEY = re.compile(
    r"(?i)(file.?name|barcode|label|patient|accession|mrn|medical.?record|case|specimen|slide.?id|slide.?name|"
    r"reference|container|identifier|operator|user|artist|host.?computer|institution|document.?name|project|"
    r"physician|name|date|time|email)"
)
NOT_IDENTIFYING = re.compile(r"(?i)(exposure|objective|mpp|magnification|bounds|level|tile|quickhash|vendor|"
                             r"compression|background|icc|time.?zone|focus|stage|z.?offset)")  # fmt: skip
# A description's fields: `Key = value` (Aperio's `|`-separated header), `Key: value` lines; OME-XML attributes.
_FIELD = re.compile(r"^\s*([A-Za-z][\w .\-/]{0,40}?)\s*[=:]\s*(.+?)\s*$")
_XML_ATTR = re.compile(r'\b(\w*(?:Name|Email|Institution|Barcode|Label|Identifier|Date))="([^"]{3,})"')
_SEPARATORS = re.compile(r"[\s\-_/.:^]+")
LABEL_WORDS = ("label", "macro", "thumbnail", "overview")
ASPECT_TOLERANCE = 0.03  # a tissue level keeps level 0's proportions (within rounding of its own pixels)


def _is_identifying(key: str) -> bool:
    return bool(IDENTIFYING_KEY.search(key)) and not NOT_IDENTIFYING.search(key)


def description_fields(text: str) -> dict[str, str]:
    """The `Key = value` and `Key: value` fields of a description, and the naming attributes of OME-XML."""
    out: dict[str, str] = {}
    for key, value in _XML_ATTR.findall(text):
        out.setdefault(key, value)
    for part in re.split(r"[|\r\n;]", text):
        m = _FIELD.match(part)
        if m:
            out.setdefault(m.group(1).strip(), m.group(2).strip())
    return out


def identifying_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties (and description fields) that identify the patient or case: name → value."""
    out: dict[str, str] = {}
    for key, raw in properties.items():
        value = str(raw).strip()
        if not value:
            continue
        short = key.rsplit(".", 1)[-1]
        if _is_identifying(short) and not key.startswith(("openslide.level", "tiffslide.level")):
            out.setdefault(key, value)
        if len(value) > 12 and ("=" in value or ":" in value or "<" in value):
            for name, field in description_fields(value).items():
                if _is_identifying(name) and field:
                    out.setdefault(f"{key}[{name}]", field)
    return {k: v for k, v in out.items() if sum(c.isalnum() for c in v) >= 3}


def value_parts(value: str) -> set[str]:
    """A value and the pieces of it that identify on their own: its leading runs of parts ('S24-01234' of the
    barcode 'S24-01234-A1-HE') and each part holding four or more digits."""
    v = value.strip()
    parts = [p for p in _SEPARATORS.split(v) if p]
    out = {v} | {v[: m.start()] for m in _SEPARATORS.finditer(v) if _SEPARATORS.search(v[: m.start()])}
    out |= {p for p in parts if sum(c.isdigit() for c in p) >= 4}
    return {v for v in out if sum(c.isalnum() for c in v) >= 4}


def _plain(text: str) -> str:
    return "".join(c for c in text.casefold() if c.isalnum())


def names_an_identifier(name: str, properties: Mapping[str, str]) -> bool:
    """Whether a file name equals or contains one of the slide's identifying values (or their parts); dates and
    times do not count (a scan date in a file name is not the case)."""
    plain = _plain(name)
    if not plain:
        return False
    for key, value in identifying_properties(properties).items():
        if re.search(r"(?i)(date|time)", key.rsplit(".", 1)[-1]):
            continue
        for part in value_parts(value):
            p = _plain(part)
            if len(p) >= 4 and (p in plain or (len(plain) >= 4 and plain in p)):
                return True
    return False


def shown_name(stem: str, properties: Mapping[str, str]) -> str:
    """The name a slide is drawn and sent by: its file's stem unless that holds one of its identifiers."""
    return SHOWN_WHEN_NAMED if names_an_identifier(stem, properties) else stem


def tissue_levels(dims: tuple[tuple[int, int], ...]) -> int:
    """How many leading pyramid levels are the slide itself: each smaller than the one before and of level 0's
    proportions; a page of other proportions (a label or macro image stored as a tiled page) ends the pyramid."""
    if not dims:
        return 0
    w0, h0 = dims[0]
    count = 1
    for (w, h), (pw, _ph) in zip(dims[1:], dims[:-1], strict=False):
        if w <= 0 or h <= 0 or w > pw:
            break
        expected_h = h0 * w / w0
        if abs(h - expected_h) > max(2.0, ASPECT_TOLERANCE * expected_h):
            break
        count += 1
    return count
