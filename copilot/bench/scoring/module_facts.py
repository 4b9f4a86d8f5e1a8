"""What scoring and the report tables know of each benchmark module, read from its one declaration.

A module is declared once, in `copilot/medflow/modules/`; declaring it there hands these facts down here, so the
tables, the coverage measures and the process metrics look a module up instead of comparing its name. A
module without a fact gets the neutral default (no table group, no detail columns, 'Tumor' ROIs, evidence read
from an EVIDENCE block).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DetailColumns:
    """One heading of a module's detailed-metrics columns (Tables 5 and 7) and the columns under it."""

    title: str
    columns: tuple[tuple[str, str], ...]  # (heading, 'task' | 'strict' | 'loc' | 'field:NAME')


@dataclass(frozen=True)
class ModuleFacts:
    """One module as the scoring side sees it: titles, table places, counts and how its evidence is read."""

    name: str
    kind: str  # the viewer kind its cases open in
    title: str  # its name in the paper's tables ("Brain MRI")
    viewer: str = "—"  # the host application named in Table 4
    order: int = 99  # position in every table (the paper's Table 1 order)
    has_loc: bool = True  # whether a Loc score exists (a Loc cell is left out or blank otherwise)
    results_table: int = 0  # the main-results table it is a column group of: 1 (radiology), 2 (pathology), 0 none
    paper_cases: int | None = None  # the paper's benchmark-eligible units (Table 4)
    label_field: str = "label"  # the truth field whose frequencies Table 4 counts
    operations: tuple[str, ...] = ()  # Track B operation sets it is reported on (Table 3: the paper's columns)
    registration_control: bool = False  # Table 3: registration compared with the unregistered control run
    details: tuple[DetailColumns, ...] = ()  # detailed-metrics columns (Tables 5 and 7); none: not in them
    roi_label: tuple[str, str] | None = None  # slides: (truth field naming the target ROI class, its negative)
    cited: Callable[[str], dict[str, Any]] | None = None  # the evidence an answer cites; None: its EVIDENCE block
    structures: dict[str, tuple[str, ...]] | None = None  # what its question is about ('target') and not
    checkpoints: tuple[Any, ...] = ()  # workflow checkpoints beyond its viewer kind's (`copilot.kinds.Checkpoint`)
    precedence: tuple[Any, ...] = ()  # call-order constraints beyond its viewer kind's (dimensions.PRECEDENCE rows)
    diagnosis: tuple[str, str] | None = None  # (truth field, its negative value) of a slide-level diagnosis


_FACTS: dict[str, ModuleFacts] = {}


def declare(facts: ModuleFacts) -> ModuleFacts:
    """Record a module's facts (done by its declaration in the benchmark registry)."""
    _FACTS[facts.name] = facts
    return facts


def withdraw(name: str) -> None:
    """Forget a module's facts (a module declared for a while: a plug-in's or a test's)."""
    _FACTS.pop(name, None)


def all_facts() -> list[ModuleFacts]:
    """Every declared module's facts, in table order."""
    return sorted(_FACTS.values(), key=lambda f: (f.order, f.name))


def facts_of(name: str) -> ModuleFacts | None:
    """A module's facts, or None for a module nobody declared (a study outside the benchmark)."""
    return _FACTS.get(name)


def in_table(number: int) -> tuple[str, ...]:
    """The modules that are column groups of a main-results table (1: radiology, 2: pathology), in order."""
    return tuple(f.name for f in all_facts() if f.results_table == number)


def title(name: str) -> str:
    """A module's title in the tables; its name when undeclared."""
    f = _FACTS.get(name)
    return f.title if f else name
