"""Opening any study in the workstation (Qt-free): a case pack, a folder of case packs, a DICOM folder (with
its series listed for a picker), a NIfTI/NRRD/MetaImage file, a whole-slide image, or a trace folder;
and the list of recently opened studies.

A clinician's own study opens through the same audited handlers as a case pack: the study's folder is
the session's case root and the opened file or series is the case input, so the agent, the trace and
replay work on it unchanged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from copilot.cases.pack import CasePack, load_case
from copilot.engine.volume.headers import is_dicom
from copilot.engine.volume.image import VOLUME_SUFFIXES
from copilot.pacs.cache import read_origin
from copilot.pacs.fetch import DERIVED_RESULTS, local_study, with_origin
from copilot.pacs.wsi import dicom_wsi_file
from copilot.privatefs import private_dir, write_private
from copilot.runtime import open_session
from copilot.session import Session
from copilot.trace.recorder import TRACE_FILE

SLIDE_SUFFIXES = (".svs", ".tif", ".tiff", ".ndpi", ".vms", ".vmu", ".scn", ".mrxs", ".svslide", ".bif", ".dcm")
MAX_DICOM_FILES = 20000  # a series scan reads headers only, but stops somewhere
RECENT_MAX = 12
UID_TAIL = 6  # digits of a series UID shown in the picker
NON_IMAGE_CLASSES = (  # SOP classes of non-image objects: SEG and registrations, SR (all), KO, PR, RT structures
    "1.2.840.10008.5.1.4.1.1.66", "1.2.840.10008.5.1.4.1.1.88.", "1.2.840.10008.5.1.4.1.1.11.",
    "1.2.840.10008.5.1.4.1.1.481.3", "1.2.840.10008.5.1.4.1.1.481.5", "1.2.840.10008.5.1.4.1.1.104.",
)  # fmt: skip


class StudyError(ValueError):
    """A path that is not a study the workstation can open."""


@dataclass(frozen=True)
class Study:
    """What the panel and the agent need to know of an opened study (a case pack has the same fields)."""

    root: Path
    case_id: str
    module: str
    kind: str
    inputs: dict[str, Any] = field(default_factory=dict)
    prompt: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Series:
    """One DICOM series found in a folder, with the facts that tell it apart from its neighbours (never a
    patient identifier: no name, ID, birth date, accession number or institution)."""

    uid: str
    folder: Path
    modality: str
    description: str
    number: int | None
    files: int
    images: int = 0  # frames over all files (a multi-frame file counts its frames); 0: as many as files
    date: str = ""  # SeriesDate (else AcquisitionDate/StudyDate) as YYYY-MM-DD
    time: str = ""  # SeriesTime as HH:MM

    @property
    def label(self) -> str:
        """Number and description, as a volume or a case is named after the series."""
        number = f"#{self.number} " if self.number is not None else ""
        return f"{number}{self.description or '(no description)'}"

    @property
    def uid_tail(self) -> str:
        """The last digits of the series UID: what tells otherwise identical series apart."""
        return self.uid[-UID_TAIL:].lstrip(".") if self.uid else ""

    @property
    def title(self) -> str:
        """One line of the series picker: number, description, modality, image count, date and time, UID tail."""
        count = self.images or self.files
        parts = [f"{self.label} · {self.modality} · {count} image{'s' if count != 1 else ''}"]
        when = " ".join(p for p in (self.date, self.time) if p)
        if when:
            parts.append(when)
        if self.uid:
            parts.append(f"UID …{self.uid_tail}")
        return " · ".join(parts)


def select_series_list(found: list[Series], spec: str) -> list[Series]:
    """The series a `--series` value names, several separated by commas (shown together, the first as the
    background): each as `select_series` reads it."""
    picked = [select_series(found, part) for part in spec.split(",")]
    if len({s.uid for s in picked}) < len(picked):
        raise StudyError(f"--series {spec!r} names a series twice")
    return picked


def select_series(found: list[Series], spec: str) -> Series:
    """The series a `--series` value names: a series number, else the end of a series UID, else a word of the
    description (case-insensitive); a value that names none or several is refused with the choices listed."""
    text = spec.strip()
    if not text:
        raise StudyError("--series is empty")
    tries = (
        [s for s in found if text.isdigit() and s.number == int(text)],
        [s for s in found if s.uid and len(text) >= 2 and s.uid.endswith(text.lstrip("…."))],
        [s for s in found if text.lower() in s.description.lower()],
    )
    for hits in tries:
        if len(hits) == 1:
            return hits[0]
        if len(hits) > 1:
            raise StudyError(f"--series {text!r} matches {len(hits)} series: " + "; ".join(s.title for s in hits)
                             + " (give the end of the UID)")  # fmt: skip
    raise StudyError(f"--series {text!r} matches no series; series: " + "; ".join(s.title for s in found))


def classify(path: str | Path) -> str:
    """case_pack | case_folder | trace | dicom | volume | slide for a path; StudyError otherwise."""
    p = Path(path)
    if not p.exists():
        raise StudyError(f"{p} does not exist")
    if p.is_dir():
        if (p / "case.json").is_file():
            return "case_pack"
        if (p / TRACE_FILE).is_file():
            return "trace"
        if any((c / "case.json").is_file() for c in p.iterdir() if c.is_dir()):
            return "case_folder"
        if _first_dicom(p) is not None:
            return "dicom"
        raise StudyError(f"{p} holds no case pack, trace, or DICOM files")
    name = p.name.lower()
    if name.endswith(VOLUME_SUFFIXES):
        return "volume"
    if name.endswith(SLIDE_SUFFIXES) and not is_dicom(p):
        return "slide"
    if is_dicom(p):
        return "dicom"
    raise StudyError(f"{p.name}: not a volume (NIfTI, NRRD, MHA, DICOM) or a slide (SVS, TIFF, NDPI, …)")


def _dicom_files(folder: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "hidden" and not d.startswith("."))
        for name in sorted(filenames):
            f = Path(dirpath) / name
            if name.lower().endswith(".dcm") or is_dicom(f):
                out.append(f)
                if len(out) >= MAX_DICOM_FILES:
                    return out
    return out


def _first_dicom(folder: Path) -> Path | None:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "hidden" and not d.startswith("."))
        for name in sorted(filenames):
            f = Path(dirpath) / name
            if name.lower().endswith(".dcm") or is_dicom(f):
                return f
    return None


def read_headers(folder: str | Path) -> list[tuple[Path, Any]]:
    """(file, header without pixels) of every readable DICOM file under a folder, in walk order: read once for
    both the image series and the derived results of a study."""
    import pydicom

    out = []
    for f in _dicom_files(Path(folder)):
        try:
            out.append((f, pydicom.dcmread(f, stop_before_pixels=True)))
        except Exception:  # a non-DICOM or broken file among the images: skipped, like a viewer's import
            continue
    return out


def dicom_series(folder: str | Path, headers: list[tuple[Path, Any]] | None = None) -> list[Series]:
    """The image series under a folder (headers only, or those already `read_headers`), in series-number order;
    segmentations, reports, key object selections and presentation states are derived results
    (`study_derived`), never image series."""
    groups: dict[tuple[str, Path], list[Any]] = {}
    for f, ds in read_headers(folder) if headers is None else headers:
        if getattr(ds, "Rows", None) is None or is_derived_object(ds):
            continue
        groups.setdefault((str(getattr(ds, "SeriesInstanceUID", "")), f.parent), []).append(ds)
    out = []
    for (uid, parent), items in groups.items():
        ds = items[0]
        number = getattr(ds, "SeriesNumber", None)
        frames = sum(_frames(d) for d in items)
        date = next((str(getattr(ds, k, "") or "") for k in ("SeriesDate", "AcquisitionDate", "StudyDate")
                     if getattr(ds, k, None)), "")  # fmt: skip
        out.append(
            Series(uid, parent, str(getattr(ds, "Modality", "") or "OT"), str(getattr(ds, "SeriesDescription", "")
                   or "").strip(), int(number) if number not in (None, "") else None, len(items), frames,
                   _dicom_date(date), _dicom_time(str(getattr(ds, "SeriesTime", "") or "")))
        )  # fmt: skip
    return sorted(out, key=lambda s: (s.number is None, s.number or 0, s.description, s.time, s.uid))


def is_derived_object(ds: Any) -> bool:
    """Whether a DICOM header is a non-image object (SEG, SR, KO, PR, RT objects, documents) by its modality or
    its SOP class (a SEG or SR whose Modality is missing or wrong is still not an image)."""
    sop = str(getattr(ds, "SOPClassUID", "") or "")
    return str(getattr(ds, "Modality", "") or "").upper() in DERIVED_RESULTS or sop.startswith(NON_IMAGE_CLASSES)


def _frames(ds: Any) -> int:
    try:
        return max(1, int(getattr(ds, "NumberOfFrames", 1) or 1))
    except (TypeError, ValueError):
        return 1


def _dicom_date(text: str) -> str:
    """YYYYMMDD → YYYY-MM-DD (anything else as it is)."""
    text = text.strip()
    return f"{text[:4]}-{text[4:6]}-{text[6:8]}" if len(text) == 8 and text.isdigit() else text


def _dicom_time(text: str) -> str:
    """HHMMSS.FFF → HH:MM ('' when unreadable)."""
    text = text.strip().replace(":", "")
    return f"{text[:2]}:{text[2:4]}" if len(text) >= 4 and text[:4].isdigit() else ""


def study_for(
    path: str | Path, series: Series | list[Series] | None = None, frame: int | None = None
) -> Study | CasePack:
    """The study a path opens (a case pack as itself); a DICOM folder with several series needs `series` (one, or
    several shown together: the first is the background); a 4D volume file opens at `frame` (default its first)."""
    p = Path(path).resolve()
    what = classify(p)
    if what == "case_pack":
        return load_case(p)
    if what in ("case_folder", "trace"):
        raise StudyError(f"{p.name} is a {what.replace('_', ' ')}, not a single study")
    if what == "slide":
        return Study(p.parent, p.name, "", "pathology", {"slide": p.name})
    first = series[0] if isinstance(series, list) and series else series
    folder = first.folder if isinstance(first, Series) else p
    slide = dicom_wsi_file(folder) if what == "dicom" and p.is_dir() else None
    if slide is not None:  # a DICOM whole-slide series: the slide viewer opens its level-0 instance
        return Study(p, p.name, "", "pathology", {"slide": os.path.relpath(slide, p)})
    if what == "volume" or (what == "dicom" and p.is_file()):
        frames = {"frame": int(frame)} if frame is not None and what == "volume" else {}
        return Study(p.parent, p.name, "", "radiology", {"volumes": [p.name], **frames})
    if series is None:
        found = dicom_series(p)
        if len(found) != 1:
            raise StudyError(f"{p.name} holds {len(found)} series; pick one")
        series = found[0]
    chosen = [series] if isinstance(series, Series) else list(series)
    if not chosen:
        raise StudyError(f"{p.name}: no series chosen")
    inputs: dict[str, Any] = {"volumes": [os.path.relpath(s.folder, p) for s in chosen]}
    if len(chosen) == 1 and chosen[0].uid:
        inputs["series_uid"] = chosen[0].uid  # open_case opens this series of the folder
    elif len(chosen) > 1:
        inputs["series_uids"] = [s.uid for s in chosen]  # each folder's series, in order
    name = "PACS study" if read_origin(p) is not None else p.name  # a cache folder's name is a hash
    return Study(p, f"{name} — {' + '.join(s.label for s in chosen)}", "", "radiology", inputs)


def study_at(
    location: str | Path, series: Series | list[Series] | None = None, frame: int | None = None
) -> Study | CasePack:
    """`study_for` of a path or of a DICOMweb study or series URL (retrieved into the PACS cache first); a study
    from a PACS carries its origin in its inputs (the trace header records it, the exports store back to it)."""
    local = local_study(location)
    return with_origin(study_for(local.path, series, frame), local.origin)


def open_study(
    study: Study | CasePack, trace_dir: str | Path | None = None, backend: str = "embedded", track: str = "A"
) -> Session:
    """A session with the study loaded by the system's audited open call (Track B: with the operators); its trace
    names the study by a pseudonymous reference (the path and UIDs in the trace folder's owner-only sidecar)."""
    return open_session(study, track=track, trace_dir=trace_dir, backend=backend, pseudonymous=True)


def case_packs(folder: str | Path) -> list[Path]:
    """The case packs directly under a folder (their hidden/ parts are never listed)."""
    return sorted(c for c in Path(folder).iterdir() if c.is_dir() and (c / "case.json").is_file())


class RecentStudies:
    """Recently opened paths, newest first, kept in a small JSON file."""

    def __init__(self, path: str | Path | None = None) -> None:
        default = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "medcopilot" / "recent.json"
        self.path = Path(path or os.environ.get("MEDCOPILOT_RECENT") or default)

    def items(self) -> list[Path]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        return [Path(p) for p in data if isinstance(p, str) and Path(p).exists()][:RECENT_MAX]

    def add(self, path: str | Path) -> list[Path]:
        p = Path(path).resolve()
        items = [p] + [q for q in self.items() if q != p]
        items = items[:RECENT_MAX]
        try:
            private_dir(self.path.parent)  # the paths may name patients: owner-only
            write_private(self.path, json.dumps([str(q) for q in items], indent=1))
        except OSError:  # a read-only home: the list just is not kept
            pass
        return items
