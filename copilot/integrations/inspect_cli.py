"""`medcopilot bench import-eval LOG... --out RUN_DIR` (Inspect logs of `medcopilot/medflow` into a run's
`results.sqlite`, so `bench report` draws the paper's tables from them) and `medcopilot bench export-eval RUN_DIR
--out DIR` (a run's rows as Inspect logs, for Inspect's viewer). Inspect AI is needed only when they run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

NEEDS = "needs Inspect AI: pip install 'medcopilot[inspect]'"


def _import(ns: argparse.Namespace) -> int:
    try:
        from copilot.integrations.inspect_rows import log_rows
    except ImportError:
        print(f"error: bench import-eval {NEEDS}", file=sys.stderr)
        return 2
    from copilot.medflow.runs import ResultsDB

    rows = [row for log in ns.logs for row in log_rows(log, ns.out)]  # every log read before anything is written
    db = ResultsDB(Path(ns.out) / "results.sqlite")
    try:
        for row in rows:
            db.insert(row)
    finally:
        db.close()
    errors = sum(r["status"] == "error" for r in rows)
    print(f"{len(rows)} rows from {len(ns.logs)} logs added to {Path(ns.out) / 'results.sqlite'}"
          + (f" ({errors} errored samples, kept out of the means)" if errors else ""))  # fmt: skip
    return 0


def _export(ns: argparse.Namespace) -> int:
    try:
        from copilot.integrations.inspect_rows import write_logs
    except ImportError:
        print(f"error: bench export-eval {NEEDS}", file=sys.stderr)
        return 2
    from copilot.medflow.runs import read_results

    run = Path(ns.run)
    rows = read_results(run if run.suffix == ".sqlite" else run / "results.sqlite")
    if not rows:
        raise ValueError(f"{run} holds no result rows")
    for path in write_logs(rows, ns.out):
        print(path)
    return 0


def add_inspect_parsers(bsub: Any) -> None:
    """`bench import-eval` and `bench export-eval`."""
    imp = bsub.add_parser("import-eval", help="add Inspect logs of medcopilot/medflow to a run's results.sqlite")
    imp.add_argument("logs", nargs="+", help=".eval (or .json) logs written by inspect eval medcopilot/medflow")
    imp.add_argument("--out", required=True, help="run folder (its results.sqlite is created or extended)")
    imp.set_defaults(func=_import)
    exp = bsub.add_parser("export-eval", help="a run's result rows as Inspect logs (one per configuration)")
    exp.add_argument("run", help="run folder (or its results.sqlite)")
    exp.add_argument("--out", required=True, help="folder for the .eval files")
    exp.set_defaults(func=_export)
