"""`medcopilot bench review`: a run's checkpoint ledger for reviewers (one JSON line per episode and checkpoint,
with the evidence it rests on and the status left blank), and the reliability of the ledgers they return
(`copilot.bench.measures.review`: exact agreement, weighted Cohen κ, interval and nominal Krippendorff α)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from copilot.bench.measures.review import read_review, reliability, review_ledger
from copilot.bench.measures.trace_views import recorded_events
from copilot.medflow.runs import read_results
from copilot.privatefs import write_private


def write_ledger(run_dir: str | Path, out: str | Path) -> int:
    """The run's ledger into `out` (owner-only: it quotes answers); returns the number of items."""
    run = Path(run_dir)
    rows = [r for r in read_results(run / "results.sqlite") if r.get("status") != "error"]
    items = review_ledger(rows, lambda r: recorded_events(run / r["trace_dir"]) if r.get("trace_dir") else None)
    write_private(Path(out), "".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items))
    return len(items)


def read_reviews(paths: list[str]) -> dict[str, dict[str, str]]:
    """Each returned ledger by its file's name (without extension); two files of one name are refused."""
    out: dict[str, dict[str, str]] = {}
    for p in paths:
        name = Path(p).stem
        if name in out:
            raise ValueError(f"two review files are named {name!r}; name each reviewer's file apart")
        try:
            text = Path(p).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{p}: cannot be read ({exc})") from None
        out[name] = read_review(text.split("\n"), p)
    return out


def _command(ns: Any) -> int:
    try:
        if ns.ledger:
            n = write_ledger(ns.run, ns.ledger)
            print(f"{ns.ledger}: {n} checkpoint items to review")
            return 0
        if not ns.reviews or len(ns.reviews) < 2:
            print("error: give --ledger FILE, or --reviews with two or more returned ledgers", file=sys.stderr)
            return 2
        stats = reliability(read_reviews(ns.reviews))
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if ns.json:
        print(json.dumps(stats, indent=1))
        return 0

    def f(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    print(f"reviewers {', '.join(stats['reviewers'])}: {stats['covered']} of {stats['items']} items judged twice "
          f"or more; exact agreement {f(stats['exact_agreement'])}; interval α {f(stats['interval_alpha'])} "
          f"(nominal α {f(stats['nominal_alpha'])})")  # fmt: skip
    for pair, k in stats["weighted_kappa"].items():
        print(f"  weighted κ {pair}: {f(k['weighted_kappa'])} over {k['items']} items")
    return 0


def add_review_parser(bsub: Any) -> None:
    """The `bench review` command line."""
    p = bsub.add_parser("review", help="a run's checkpoint ledger for reviewers, and the reliability of the "
                        "ledgers they return (weighted Cohen κ, interval Krippendorff α)")  # fmt: skip
    p.add_argument("run", help="run folder (results.sqlite and its episodes)")
    p.add_argument("--ledger", default=None, metavar="FILE", help="write the ledger to fill in (JSON lines)")
    p.add_argument("--reviews", nargs="+", default=None, metavar="FILE",
                   help="the reviewers' returned ledgers, one file per reviewer")  # fmt: skip
    p.add_argument("--json", action="store_true", help="the reliability as JSON")
    p.set_defaults(func=_command)
