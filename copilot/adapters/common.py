"""Helpers shared by the dataset adapters: finding and reading the release's tables, writing a case
pack around source files, and the per-run report.

Source images are linked file by file into `images/` (symbolic links: no copy of large data; the
viewer's path rules allow exactly this) or copied with `copy=True`. Ground truth goes to `hidden/`.
"""

from __future__ import annotations

import csv
import re
import shutil
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, overload

K = TypeVar("K", bound=Hashable)
Row = dict[str, str]


class AdapterError(ValueError):
    """The release cannot be read at all (missing table, missing column): nothing was written."""


@dataclass
class AdapterReport:
    """What one adapter run did: cases written, cases skipped by reason, duplicates, unscorable fields."""

    dataset: str
    cases: list[Path] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_ids: dict[str, list[str]] = field(default_factory=dict)
    duplicates: int = 0
    unscorable: Counter[str] = field(default_factory=Counter)
    failures: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def skip(self, case_id: str, reason: str) -> None:
        self.skipped[reason] += 1
        self.skipped_ids.setdefault(reason, []).append(case_id)

    def fail(self, case_id: str, exc: BaseException) -> None:
        """A case that raised: reported with its error and skipped, the run goes on."""
        message = f"{type(exc).__name__}: {exc}"
        self.failures.append((case_id, message))
        self.skip(case_id, "unreadable")

    def summary(self) -> str:
        """One line: written, skipped by reason, duplicates removed, unscorable fields."""
        parts = [f"{self.dataset}: {len(self.cases)} cases written"]
        total = sum(self.skipped.values())
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(self.skipped.items()))
        parts.append(f"{total} skipped" + (f" ({reasons})" if reasons else ""))
        parts.append(f"{self.duplicates} duplicates removed")
        fields = ", ".join(f"{name} {n}" for name, n in sorted(self.unscorable.items()))
        parts.append("unscorable: " + (fields or "none"))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset,
            "cases": [str(p) for p in self.cases],
            "skipped": dict(self.skipped),
            "skipped_ids": self.skipped_ids,
            "duplicates": self.duplicates,
            "unscorable": dict(self.unscorable),
            "failures": [{"case_id": c, "error": m} for c, m in self.failures],
            "notes": self.notes,
        }


def place(src: Path, dst: Path, copy: bool) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.exists() or dst.is_symlink():
        dst.unlink()
    if copy:
        shutil.copy2(src, dst)
    else:
        dst.symlink_to(src.resolve())


def digits(text: str) -> int | None:
    """The last number in an identifier ('week-044' gives 44)."""
    found = re.findall(r"\d+", text)
    return int(found[-1]) if found else None


def norm(text: str) -> str:
    """Lower case, every run of non-alphanumerics one space: 'Histology ' and 'histology' compare equal."""
    return re.sub(r"[^a-z0-9]+", " ", text.lower()).strip()


def find_table(explicit: str | Path | None, folders: Iterable[Path], patterns: tuple[str, ...], what: str) -> Path:
    """The given table, else the first file matching a pattern in the folders; a clear error otherwise."""
    if explicit is not None:
        path = Path(explicit)
        if not path.is_file():
            raise AdapterError(f"{what} not found: {path}")
        return path
    searched = []
    for folder in folders:
        if not folder.is_dir():
            continue
        searched.append(str(folder))
        for pattern in patterns:
            hits = sorted(folder.glob(pattern))
            if hits:
                return hits[0]
    where = ", ".join(searched) or "the given folders"
    raise AdapterError(f"{what} not found: no {' or '.join(patterns)} in {where}; pass it with --csv")


def read_table(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a CSV (UTF-8 with or without BOM); cells stripped, empty rows dropped."""
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        header = [h for h in (reader.fieldnames or []) if h is not None]
        rows = []
        for raw in reader:
            row = {k: (v or "").strip() for k, v in raw.items() if k is not None}
            if any(row.values()):
                rows.append(row)
    return header, rows


@overload
def column(header: list[str], *names: str, prefix: str | None = None, required: str) -> str: ...


@overload
def column(header: list[str], *names: str, prefix: str | None = None, required: None = None) -> str | None: ...


def column(header: list[str], *names: str, prefix: str | None = None, required: str | None = None) -> str | None:
    """The header cell equal to one of `names` (case, spacing and punctuation ignored), else the first
    starting with `prefix` (case and spacing ignored); `required` names the table for the error."""
    by_norm = {norm(h): h for h in header}
    for name in names:
        if norm(name) in by_norm:
            return by_norm[norm(name)]
    if prefix is not None:
        squash = lambda text: re.sub(r"\s+", " ", text.strip().lower())  # noqa: E731
        for h in header:
            if squash(h).startswith(squash(prefix)):
                return h
    if required is not None:
        wanted = " / ".join(repr(n) for n in names) or repr(prefix)
        raise AdapterError(f"{required} has no column {wanted}; its columns are {header}")
    return None


def unique_rows(
    rows: Iterable[Row],
    key: Callable[[Row], K],
    report: AdapterReport,
    name: Callable[[K], str],
    same: Callable[[Row, Row], bool] = lambda a, b: a == b,
) -> dict[K, Row]:
    """Rows by key: a repeated row counts as a duplicate; differing rows for one key are a conflict,
    reported and dropped (neither is trusted)."""
    out: dict[K, Row] = {}
    conflicts: set[K] = set()
    for row in rows:
        k = key(row)
        if k not in out:
            out[k] = row
        elif same(out[k], row):
            report.duplicates += 1
        else:
            conflicts.add(k)
    for k in conflicts:
        report.skip(name(k), "conflicting rows")
        del out[k]
    return out
