"""Benchmark-module descriptors and the one registry of them.

A module is declared once, in its own file (the core's under `copilot/medflow/modules/`, a plug-in's in its own
package, each offered by an entry point of the `medcopilot.modules` group): how its cases are generated, its task
prompt, its answer parser and scorer, its prior and baseline answers, its titles and places in the report tables,
how its answer reads in words and the layout and preset a desktop opens it in. Everything that runs over "every
module" (case generation, scoring, policies, reports, the desktop, the command line) reads this registry;
declaring a module hands what the scoring side needs down to `copilot.bench.scoring.module_facts`, which `bench/` reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from copilot import plugins
from copilot.bench.report.run_report import Column
from copilot.bench.scoring.module_facts import ModuleFacts, declare, withdraw
from copilot.bench.scoring.rules import ScoringRules
from copilot.bench.scoring.scorers import CaseScore, Truth
from copilot.cases.pack import CasePack, load_case
from copilot.cases.progress import report
from copilot.kinds import kinds
from copilot.resources import declare_prompt


@dataclass(frozen=True)
class Generate:
    """Options of a case generator; None keeps the module's default."""

    spacing: float | None = None  # radiology voxel size (mm)
    slide_size: tuple[int, int] = (4096, 3072)  # slide size (level-0 px)
    mpp: float | None = None  # slide pixel size (µm)


@dataclass(frozen=True, kw_only=True)
class BenchModule(ModuleFacts):
    """One MedFlow module: what scoring and the tables know of it (`ModuleFacts`: name, kind, title, Loc, table
    places, counts, detail columns, evidence reading), plus its generation, answer format, scoring, prior and
    baseline answers and its desktop. `title` is its column title in the report; `viewer` is its kind's host."""

    generate: Callable[[Path, str, int, Generate], Path]  # (out_dir, case_id, seed, options) -> case folder
    parse: Callable[[str], Any]  # response text -> parsed answer (raises ParseError)
    score: Callable[..., CaseScore]  # (truth, response) or, for a provenance gate, (truth, response, provenance)
    prior: str  # the fixed prior answer (format fields: evidence, or x and y for slides)
    baseline: Callable[[], Any]  # the offline baseline policy of this module
    table_title: str = ""  # its name in the paper's tables (default: title)
    answer_words: Callable[[str], list[str]] | None = None  # an answer in words for the clinician (None: none)
    layout: str | None = None  # the desktop layout its cases open in (None: the viewer kind's)
    preset: str | None = None  # the window/level preset its cases open with (None: the volume's own)
    prompt: str | Path = ""  # its task prompt, text or a file beside it ('': resources/prompts/NAME.txt)


_MODULES: dict[str, BenchModule] = {}
_DISCOVERED: list[bool] = []  # whether the entry points were read (once per process)


def register(m: BenchModule) -> BenchModule:
    """Add a module; a second module of the same name is an error."""
    if m.name in _MODULES and _MODULES[m.name] is not m:
        raise ValueError(f"benchmark module {m.name!r} is declared twice")
    if m.kind not in kinds():
        raise ValueError(f"benchmark module {m.name!r}: unknown viewer kind {m.kind!r}")
    _MODULES[m.name] = m
    plugins.declare(plugins.MODULES_GROUP, m.name)
    if m.prompt:
        declare_prompt(m.name, m.prompt)
    facts = {f.name: getattr(m, f.name) for f in fields(ModuleFacts)}
    declare(ModuleFacts(**{**facts, "title": m.table_title or m.title, "viewer": kinds()[m.kind].host_app}))
    return m


def unregister(name: str) -> None:
    """Withdraw a module and its facts (one declared for a while: a plug-in's or a test's)."""
    _MODULES.pop(name, None)
    withdraw(name)


def modules() -> dict[str, BenchModule]:
    """Every declared module in table order (the `medcopilot.modules` entry points are read once; one that fails
    to load or register is reported by `plugins.problems`, the others stay)."""
    if not _DISCOVERED:
        _DISCOVERED.append(True)
        for name, m in plugins.load(plugins.MODULES_GROUP).items():
            try:
                if not isinstance(m, BenchModule) or m.name != name:
                    raise TypeError(f"expected the BenchModule {name!r}, got {getattr(m, 'name', type(m).__name__)!r}")
                register(m)
            except (TypeError, ValueError) as exc:
                plugins.refuse(plugins.MODULES_GROUP, name, exc)
    return dict(sorted(_MODULES.items(), key=lambda kv: (kv[1].order, kv[0])))


def module(name: str) -> BenchModule:
    """The module of a name, or a ValueError naming the known ones (and any plug-in module that failed to load)."""
    return plugins.lookup(plugins.MODULES_GROUP, modules(), name, "benchmark module")


def points_in_words(n: int) -> str:
    """How many locations a slide answer marks, in words (the answer readings of slide modules)."""
    return f"{n} location{'s' if n != 1 else ''} marked on the slide"


def find(name: str) -> BenchModule | None:
    """The module of a name, or None for a case outside the benchmark (a clinical study)."""
    return modules().get(name) if name else None


def make_case(
    name: str,
    out: Path,
    case_id: str,
    seed: int,
    spacing: float | None = None,
    slide_size: tuple[int, int] = (4096, 3072),
    mpp: float | None = None,
) -> Path:
    """One case pack of a module (generator options left None keep the module's defaults)."""
    return module(name).generate(Path(out), case_id, seed, Generate(spacing, slide_size, mpp))


def make_cases(
    name: str,
    n: int,
    seed: int,
    out: Path,
    spacing: float | None = None,
    slide_size: tuple[int, int] = (4096, 3072),
    mpp: float | None = None,
) -> list[Path]:
    """`n` cases of a module (or of every module for 'all'); case i uses seed `seed * 1000 + i`."""
    if n < 1:
        raise ValueError("n must be at least 1")
    names = list(modules()) if name == "all" else [module(name).name]
    jobs = [(m, f"{m}_{seed:03d}_{i:04d}", seed * 1000 + i) for m in names for i in range(n)]
    made = []
    for k, (m, case_id, case_seed) in enumerate(jobs):
        report(f"case {k + 1}/{len(jobs)} {case_id}", 0.0)
        made.append(make_case(m, Path(out), case_id, case_seed, spacing, slide_size, mpp))
        report(f"case {k + 1}/{len(jobs)} {case_id}", 1.0)
    return made


def report_columns() -> dict[str, Column]:
    """The report's module columns, in table order."""
    return {name: Column(m.title, m.has_loc) for name, m in modules().items()}


def score_case(
    case: CasePack | str | Path,
    response: str,
    provenance: dict[str, Any] | None = None,
    rules: ScoringRules | None = None,
) -> CaseScore:
    """Task / Strict / Loc of a response against a case's hidden truth, by its module's rules (`provenance`: the
    series the evidence was taken on, read from the episode's trace, for the lung source-series gate; `rules`:
    the scoring options of `copilot.bench.scoring.rules`, the paper's reading when None; changed ones are recorded)."""
    pack = case if isinstance(case, CasePack) else load_case(case)
    scorer = module(pack.module).score
    if rules is not None and rules.changed():
        score = scorer(Truth(pack), response, provenance, rules=rules)
        score.details["rules"] = rules.changed()
        return score
    return scorer(Truth(pack), response) if provenance is None else scorer(Truth(pack), response, provenance)
