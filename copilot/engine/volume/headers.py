"""What a volume file's header says before any reader allocates for it: the files it names and its size.

NRRD, MetaImage and NIfTI/Analyze headers are parsed here (text headers read within `MAX_HEADER_BYTES`,
NIfTI's binary header from the first bytes of the — possibly gzipped — stream), so that a detached data
file can be confined (`copilot.engine.confine`) and a declared size checked against the volume budget
before ITK reads a byte of voxel data. The budget (`MAX_VOXELS` voxels and `MAX_VOXEL_BYTES` bytes as
stored; `MEDCOPILOT_MAX_VOXELS` overrides the first) bounds what a compressed file can inflate to: a
1 MiB gzip stream that claims a 1 GiB volume is refused `too_large` without being inflated.
"""

from __future__ import annotations

import functools
import gzip
import os
import re
import struct
import zlib
from pathlib import Path

import numpy as np

from copilot.engine.confine import check_sources
from copilot.engine.volume.image import VolumeLoadError

MAX_HEADER_BYTES = 1 << 20  # text header (and a LIST of data files) read at most


def _env_int(name: str, default: int) -> int:
    """A positive integer setting from the environment (the default when unset or not a positive integer)."""
    text = os.environ.get(name, "").strip()
    return int(text) if text.isdigit() and int(text) > 0 else default


MAX_VOXELS = _env_int("MEDCOPILOT_MAX_VOXELS", 1 << 28)  # 2^28 voxels: 1 GiB as float32
MAX_VOXEL_BYTES = 4 * MAX_VOXELS  # bytes of voxel data as stored: no more than its float32 copy (1 GiB)
MAX_FILES = 10_000  # data files one header may name
_METATYPE_BYTES = {
    "MET_CHAR": 1, "MET_UCHAR": 1, "MET_SHORT": 2, "MET_USHORT": 2, "MET_INT": 4, "MET_UINT": 4,
    "MET_LONG": 4, "MET_ULONG": 4, "MET_LONG_LONG": 8, "MET_ULONG_LONG": 8, "MET_FLOAT": 4, "MET_DOUBLE": 8,
}  # fmt: skip
_NRRD_TYPE_BYTES = {
    **dict.fromkeys(("signed char", "int8", "int8_t", "uchar", "unsigned char", "uint8", "uint8_t"), 1),
    **dict.fromkeys(("short", "short int", "signed short", "signed short int", "int16", "int16_t"), 2),
    **dict.fromkeys(("ushort", "unsigned short", "unsigned short int", "uint16", "uint16_t"), 2),
    **dict.fromkeys(("int", "signed int", "int32", "int32_t", "uint", "unsigned int", "uint32", "uint32_t"), 4),
    **dict.fromkeys(("float",), 4),
    **dict.fromkeys(("longlong", "long long", "int64", "int64_t", "ulonglong", "uint64", "uint64_t", "double"), 8),
}
_PRINTF = re.compile(r"%[-+ 0#]*\d*d")


def _too_large(path: Path, what: str) -> VolumeLoadError:
    return VolumeLoadError(
        f"{path.name} declares {what}, beyond the volume budget ({MAX_VOXELS} voxels, {MAX_VOXEL_BYTES} bytes)",
        "too_large",
    )


def _invalid(path: Path, what: str) -> VolumeLoadError:
    return VolumeLoadError(f"{path.name}: {what}", "invalid_structure")


def _text_lines(path: Path) -> list[str]:
    with path.open("rb") as fh:
        raw = fh.read(MAX_HEADER_BYTES)
    return raw.decode("latin-1").splitlines()


def _kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".nrrd", ".nhdr")):
        return "nrrd"
    if name.endswith((".mha", ".mhd")):
        return "meta"
    if name.endswith((".nii", ".nii.gz")):
        return "nifti"
    if name.endswith((".hdr", ".img", ".hdr.gz", ".img.gz")):
        return "analyze"
    return ""


# ----- NRRD -----
def _nrrd_fields(path: Path) -> tuple[dict[str, str], list[str]]:
    """NRRD fields (lower-case names) and the lines after the header (a LIST of data files)."""
    lines = _text_lines(path)
    if not lines or not lines[0].startswith("NRRD"):
        raise _invalid(path, "not an NRRD header")
    fields: dict[str, str] = {}
    for n, line in enumerate(lines[1:], start=1):
        if not line.strip():
            return fields, lines[n + 1 :]
        colon, pair = line.find(": "), line.find(":=")
        if line.startswith("#") or (pair >= 0 and (colon < 0 or pair < colon)):
            continue  # a comment or a key/value pair (never a file reference)
        key, sep, value = line.partition(": ")
        if sep:
            fields[key.strip().lower()] = value.strip()
            if key.strip().lower() in ("data file", "datafile") and value.strip().upper().startswith("LIST"):
                return fields, lines[n + 1 :]
    return fields, []


def _pattern_files(path: Path, tokens: list[str]) -> list[str]:
    """The names of a printf-style data file pattern `fmt min max step`."""
    try:
        lo, hi, step = int(tokens[1]), int(tokens[2]), int(tokens[3])
    except ValueError:
        raise _invalid(path, "a data file pattern needs integer min, max and step") from None
    if step == 0 or (hi - lo) // step < 0:
        raise _invalid(path, "a data file pattern with an empty or endless range")
    if (hi - lo) // step + 1 > MAX_FILES:
        raise _invalid(path, f"a data file pattern naming more than {MAX_FILES} files")
    names = []
    for i in range(lo, hi + (1 if step > 0 else -1), step):
        try:
            names.append(tokens[0] % i)
        except (TypeError, ValueError):
            raise _invalid(path, "a data file pattern that is not a printf integer format") from None
    return names


def _data_files(path: Path, value: str, rest: list[str], local: tuple[str, ...]) -> list[str]:
    """Files named by a data-file field: one name, `LIST` (the lines after the header) or a printf pattern."""
    tokens = value.split()
    if not tokens or value.strip().upper() in local:
        return []
    if tokens[0].upper() == "LIST":
        names = [ln.strip() for ln in rest if ln.strip()]
        if len(names) > MAX_FILES:
            raise _invalid(path, f"a data file LIST naming more than {MAX_FILES} files")
        return names
    if len(tokens) in (4, 5) and _PRINTF.search(tokens[0]):
        return _pattern_files(path, tokens)
    return [value.strip()]


def _nrrd(path: Path) -> tuple[list[str], list[int], int]:
    fields, rest = _nrrd_fields(path)
    value = fields.get("data file", fields.get("datafile"))
    files = _data_files(path, value, rest, ()) if value is not None else []
    sizes = _ints(path, fields.get("sizes", ""))
    itemsize = _NRRD_TYPE_BYTES.get(fields.get("type", "").lower(), 8)
    return files, sizes, itemsize


# ----- MetaImage -----
def _meta(path: Path) -> tuple[list[str], list[int], int]:
    lines = _text_lines(path)
    fields: dict[str, str] = {}
    rest: list[str] = []
    for n, line in enumerate(lines):
        key, sep, value = line.partition("=")
        if not sep:
            continue
        fields[key.strip().lower()] = value.strip()
        if key.strip().lower() == "elementdatafile":  # always the last field; binary data or a LIST follows
            rest = lines[n + 1 :]
            break
    data_file = fields.get("elementdatafile")
    files = _data_files(path, data_file, rest, ("LOCAL",)) if data_file is not None else []
    declared = _ints(path, fields.get("compresseddatasize", "0"))[:1] or [0]
    if declared[0] > path.stat().st_size and (data_file or "").upper() == "LOCAL":  # declared vs available bytes
        raise VolumeLoadError(
            f"{path.name} declares {declared[0]} bytes of compressed data; the file holds {path.stat().st_size}",
            "truncated_image",
        )
    sizes = _ints(path, fields.get("dimsize", ""))
    channels = _ints(path, fields.get("elementnumberofchannels", "1")) or [1]
    itemsize = _METATYPE_BYTES.get(fields.get("elementtype", "").upper(), 8) * max(1, channels[0])
    return files, sizes, itemsize


def _ints(path: Path, text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split()]
    except ValueError:
        raise _invalid(path, f"a size field that is not integers ({text[:60]!r})") from None
    if any(v < 0 for v in values):
        raise _invalid(path, "a negative size")
    return values


# ----- NIfTI / Analyze -----
def _nifti(path: Path) -> tuple[list[str], list[int], int]:
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rb") as fh:  # type: ignore[operator]
            head = fh.read(348)
    except (OSError, EOFError, zlib.error) as exc:
        raise VolumeLoadError(f"{path.name} is truncated or corrupt ({exc})", "truncated_image") from None
    if len(head) < 348:
        raise VolumeLoadError(f"{path.name} is shorter than a NIfTI header", "truncated_image")
    for order in ("<", ">"):
        if struct.unpack(order + "i", head[:4])[0] == 348:
            break
    else:
        raise _invalid(path, "not a NIfTI/Analyze header (sizeof_hdr is not 348)")
    dims = struct.unpack(order + "8h", head[40:56])
    vox_offset = struct.unpack(order + "f", head[108:112])[0]
    if not (np.isfinite(vox_offset) and 0 <= vox_offset <= MAX_VOXEL_BYTES):  # never inflated that far
        raise VolumeLoadError(f"{path.name}: voxel data offset {vox_offset} is not a valid position", "truncated_image")
    bitpix = struct.unpack(order + "h", head[72:74])[0]
    ndim = dims[0]
    if not 0 < ndim <= 7 or any(d < 0 for d in dims[1 : ndim + 1]):
        raise _invalid(path, f"a header with dimensions {list(dims)}")
    files: list[str] = []
    name = path.name
    if head[344:347] == b"ni1" or _kind(path) == "analyze":  # a header/image pair: the .img is read too
        stem = re.sub(r"\.(hdr|img)(\.gz)?$", "", name, flags=re.IGNORECASE)
        files = [p.name for p in path.parent.glob(stem + ".*") if p.name != name and _kind(p) == "analyze"]
    return files, [max(1, d) for d in dims[1 : ndim + 1]], max(1, bitpix // 8)


def referenced_files(path: Path) -> list[str]:
    """The other files a volume file makes its reader open (as the header writes them)."""
    kind = _kind(path)
    if kind == "nrrd":
        return _nrrd(path)[0]
    if kind == "meta":
        return _meta(path)[0]
    if kind in ("nifti", "analyze"):
        return _nifti(path)[0]
    return []


def check_declared_size(path: Path) -> None:
    """Refuse (`too_large`) a volume file whose header declares more voxels or bytes than the budget."""
    kind = _kind(path)
    if kind == "nrrd":
        _, sizes, itemsize = _nrrd(path)
    elif kind == "meta":
        _, sizes, itemsize = _meta(path)
    elif kind in ("nifti", "analyze"):
        _, sizes, itemsize = _nifti(path)
    else:
        return
    voxels = int(np.prod(np.asarray(sizes, dtype=object))) if sizes else 0  # exact: Python integers
    if voxels > MAX_VOXELS:
        raise _too_large(path, f"{' × '.join(map(str, sizes))} = {voxels} voxels")
    if voxels * itemsize > MAX_VOXEL_BYTES:
        raise _too_large(path, f"{voxels * itemsize} bytes of voxel data")


MAX_POSITION_MM = 1e6  # |ImagePositionPatient| beyond a kilometre is no patient geometry
_GEOMETRY = {
    (0x0020, 0x0032): ("ImagePositionPatient", 3, MAX_POSITION_MM),
    (0x0020, 0x0037): ("ImageOrientationPatient", 6, 1.0 + 1e-3),
}


def check_dicom_geometry(path: Path) -> None:
    """Refuse (`invalid_geometry`) a DICOM file whose patient position or orientation is not finite numbers in
    range; a file that passed is remembered by identity (path, size, modification time)."""
    st = path.stat()
    _check_dicom_geometry(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=8192)
def _check_dicom_geometry(name: str, size: int, mtime_ns: int) -> None:
    """Refuse (`invalid_geometry`) a DICOM file whose patient position or orientation is present but is not
    finite numbers within range (text, 1e308): readers would otherwise place it at the origin or overflow."""
    import pydicom

    path = Path(name)
    try:
        ds = pydicom.dcmread(path, stop_before_pixels=True, specific_tags=[pydicom.tag.Tag(*t) for t in _GEOMETRY])
    except Exception:  # not readable as DICOM here: the loader names the failure
        return
    for tag, (keyword, n, bound) in _GEOMETRY.items():
        if tuple(tag) not in [(e.tag.group, e.tag.element) for e in ds]:
            continue
        try:
            value = ds[tag].value
        except Exception:  # pydicom refusing to convert the text itself
            value = "?"
        values = str(value).split("\\") if isinstance(value, (str, bytes)) or value is None else list(value)
        shown = "\\".join(str(v) for v in values)[:60]
        try:
            floats = [float(v) for v in values]
        except (TypeError, ValueError):
            raise VolumeLoadError(f"{path.name}: {keyword} is not numeric ({shown!r})", "invalid_geometry") from None
        if len(floats) != n or not all(np.isfinite(floats)) or max(map(abs, floats)) > bound:
            raise VolumeLoadError(f"{path.name}: {keyword} {shown!r} is not a usable geometry", "invalid_geometry")


def _dicom_members(path: Path) -> list[Path]:
    if path.is_dir():
        return [c for c in sorted(path.iterdir()) if c.is_file() and (c.suffix.lower() == ".dcm" or is_dicom(c))]
    return [path] if path.suffix.lower() == ".dcm" or is_dicom(path) else []


def is_dicom(path: Path) -> bool:
    """True when the file carries the DICM preamble marker."""
    try:
        with path.open("rb") as fh:
            fh.seek(128)
            return fh.read(4) == b"DICM"
    except OSError:
        return False


def vet_volume_file(path: Path) -> None:
    """Everything a volume file must pass before a reader opens it: confinement of the file and of every file
    it names, its declared size, and (DICOM) a patient geometry that is numbers."""
    check_sources(path, referenced_files(path) if path.is_file() else [])
    if path.is_file():
        check_declared_size(path)
    for member in _dicom_members(path):
        check_dicom_geometry(member)
