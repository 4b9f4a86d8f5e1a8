"""A study's derived results (Qt-free): segmentations, reports, key object selections and presentation states,
listed apart from its image series — those in the folder with the series they were made from (a SEG is offered
as an overlay on its source series), and those a PACS lists for the study (recorded when it was retrieved)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from copilot.pacs.cache import read_origin
from copilot.pacs.store import referenced_uids
from copilot.panel.studies import UID_TAIL, is_derived_object, read_headers


@dataclass(frozen=True)
class Derived:
    """One derived series: what it is, the image series it refers to (when read from its files), where it lies."""

    uid: str
    modality: str
    description: str
    number: int | None
    files: int
    source_series: tuple[str, ...] = ()
    folder: Path | None = None  # None: it stays on the PACS

    @property
    def title(self) -> str:
        """One line of the derived-results list: modality, number, description, where it lies or what it is on."""
        number = f" #{self.number}" if self.number is not None else ""
        on = ", ".join("…" + uid[-UID_TAIL:].lstrip(".") for uid in self.source_series)
        where = f" on series {on}" if on else (" (on the PACS)" if self.folder is None else "")
        return f"{self.modality}{number} {self.description or '(no description)'}{where}"


def study_derived(folder: str | Path, headers: list[tuple[Path, Any]] | None = None) -> list[Derived]:
    """The derived results of a study folder (its non-image DICOM files by series, from the headers already read
    when given) and of its PACS study (as the PACS listed them when the study was retrieved), each once, in
    series-number order."""
    groups: dict[str, list[Any]] = {}
    parents: dict[str, Path] = {}
    root = Path(folder)
    if headers is None:
        headers = read_headers(root) if root.is_dir() else []
    for f, ds in headers:
        if is_derived_object(ds):
            uid = str(getattr(ds, "SeriesInstanceUID", ""))
            groups.setdefault(uid, []).append(ds)
            parents.setdefault(uid, f.parent)
    found: dict[str, Derived] = {}
    for uid, items in groups.items():
        ds = items[0]
        sources = sorted(set().union(*(referenced_uids(d)[1] for d in items)))
        number = getattr(ds, "SeriesNumber", None)
        found[uid] = Derived(uid, str(getattr(ds, "Modality", "") or "OT"), str(getattr(ds, "SeriesDescription", "")
                             or "").strip(), int(number) if number not in (None, "") else None, len(items),
                             tuple(sources), parents[uid])  # fmt: skip
    listed = (read_origin(root) or {}).get("derived") if root.is_dir() else None
    for item in listed if isinstance(listed, list) else []:
        uid = str(item.get("uid") or "")
        if uid and uid not in found and isinstance(item, dict):
            number = item.get("number")
            found[uid] = Derived(
                uid,
                str(item.get("modality") or "OT"),
                str(item.get("description") or ""),
                number if isinstance(number, int) else None,
                int(item.get("instances") or 0),
            )
    return sorted(found.values(), key=lambda d: (d.number is None, d.number or 0, d.modality, d.uid))


def overlays_for(derived: list[Derived], series_uid: str) -> list[Derived]:
    """The segmentations of a study made on this image series: offered as overlays when it is shown."""
    return [d for d in derived if d.modality == "SEG" and series_uid in d.source_series]


def derived_line(folder: str | Path) -> str:
    """One line naming a study's derived results ('' when it has none)."""
    found = study_derived(folder)
    return ("derived results: " + "; ".join(d.title for d in found)) if found else ""
