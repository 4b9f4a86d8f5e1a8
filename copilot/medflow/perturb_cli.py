"""`medcopilot bench perturb`: inject each single-fault perturbation into every clean episode of a run, recompute
the process measures of the perturbed traces and write them beside the run (`perturbed/`, `perturbations.jsonl`),
then print the sensitivity, selectivity and fault-localisation figures (`copilot.bench.measures.perturb`)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from copilot.bench.measures.perturb import (
    FAULTS,
    PERTURBATIONS_FILE,
    fault_statistics,
    p_text,
    perturb,
    write_trace,
)
from copilot.bench.measures.process import episode_metrics
from copilot.bench.measures.trace_views import recorded_events
from copilot.cases.pack import find_cases
from copilot.medflow.runs import confined, read_results, relative_to_run


def perturb_run(
    run_dir: str | Path, cases_root: str | Path, faults: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(clean rows, perturbed rows) of a run: each fault applied to each finished episode it applies to."""
    run = Path(run_dir).resolve()
    names = faults or list(FAULTS)
    unknown = [f for f in names if f not in FAULTS]
    if unknown:
        raise ValueError(f"unknown fault {', '.join(unknown)}; faults: {', '.join(FAULTS)}")
    cases = {c.case_id: c for c in find_cases(cases_root, [])}
    clean = [r for r in read_results(run / "results.sqlite") if r["status"] != "error" and r.get("trace_dir")]
    out = []
    for r in clean:
        case = cases.get(r["case_id"])
        events = recorded_events(run / r["trace_dir"])
        if case is None or events is None:
            continue
        for name in names:
            perturbed = perturb(events, name, case, r["trace_dir"])
            if perturbed is None:
                continue
            folder = confined(run, "perturbed", name, *Path(r["trace_dir"]).parts)
            write_trace(folder / "trace.jsonl", perturbed)
            score = SimpleNamespace(parse_error=r.get("parse_error"))
            process = episode_metrics(perturbed, case, score, int(r.get("budget") or 20))
            out.append({**r, "perturbation": name, "trace_dir": relative_to_run(folder, run), "process": process})
    (run / PERTURBATIONS_FILE).write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    return clean, out


def closing_note(stats: dict[str, Any]) -> str:
    """The figures as lines: per fault its detection rate, target drop and selectivity margin with intervals."""

    def f(v: Any, ci: Any = None) -> str:
        return ("—" if v is None else f"{v:.2f}") + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")

    lines = [f"{'fault':<20} {'dim':>3} {'pairs':>5}  detected  target drop [95% CI]   selectivity [95% CI]"]
    for name, s in stats["faults"].items():
        drop = f(s["target_drop"], s["target_drop_ci"])
        margin = f(s["selectivity_margin"], s["selectivity_margin_ci"])
        lines.append(f"{name:<20} {s['target']:>3} {s['pairs']:>5}  {f(s['detection_rate']):>8}  {drop:<22} {margin}")
    loc = stats["localisation"]
    lines.append(f"localisation over {loc['pairs']} pairs: balanced accuracy {f(loc['balanced_accuracy'])}, "
                 f"macro-F1 {f(loc['macro_f1'])}, permutation p {p_text(loc['permutation_p'])}")  # fmt: skip
    return "\n".join(lines)


def run_perturb(run_dir: str | Path, cases_root: str | Path, faults: list[str] | None = None) -> dict[str, Any]:
    """Perturb a run and return the statistics (also written with the perturbed rows)."""
    clean, perturbed = perturb_run(run_dir, cases_root, faults)
    return fault_statistics(clean, perturbed)


def _command(ns: Any) -> int:
    """`bench perturb RUN --cases DIR [--fault NAME]... [--json]`."""
    import sys

    try:
        stats = run_perturb(ns.run, ns.cases, ns.fault)
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(stats, indent=1) if ns.json else closing_note(stats))
    return 0


def add_perturb_parser(bsub: Any) -> None:
    """The `bench perturb` command line."""
    p = bsub.add_parser("perturb", help="inject single faults into a run's episodes and measure how the seven "
                        "process dimensions respond (sensitivity, selectivity, fault localisation)")  # fmt: skip
    p.add_argument("run", help="run folder (results.sqlite and its episodes)")
    p.add_argument("--cases", required=True, help="the case packs the run used")
    p.add_argument("--fault", action="append", default=None, metavar="NAME",
                   help=f"a fault to inject (repeatable; default: all of {', '.join(FAULTS)})")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the statistics as JSON")
    p.set_defaults(func=_command)
