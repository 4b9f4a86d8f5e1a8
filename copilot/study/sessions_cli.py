"""`medcopilot sessions list | show | export | purge | retention`: the user's desktop and `chat` sessions (traces,
images, reports), kept owner-only and for a retention the user sets."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

MIB = 1024 * 1024


def _list(ns: argparse.Namespace) -> int:
    from copilot.study.sessions import list_sessions, retention_days, sessions_root

    found = list_sessions()
    keep = retention_days()
    for i in found:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(i.started))
        old = "  (past retention)" if i.age_days() > keep else ""
        print(f"{i.name}  {when}  {i.kind:<10} {i.study_ref}  {i.status:<10} {i.events:>5} events "
              f"{i.size / MIB:7.1f} MiB{old}")  # fmt: skip
    past = sum(1 for i in found if i.age_days() > keep)
    print(f"{len(found)} session(s) in {sessions_root()}; kept {keep:g} days ({past} older: "
          "`medcopilot sessions purge` removes them)")  # fmt: skip
    return 0


def _show(ns: argparse.Namespace) -> int:
    from copilot.study.sessions import describe, find_session

    for line in describe(find_session(ns.session)):
        print(line)
    return 0


def _export(ns: argparse.Namespace) -> int:
    from copilot.study.sessions import export_session, find_session

    folder = find_session(ns.session)
    left_out = export_session(folder, Path(ns.out), deidentify=ns.deidentify)
    how = "de-identified " if ns.deidentify else ""
    print(f"{how}copy of {folder.name} in {ns.out}" + (f" (left out: {', '.join(left_out)})" if left_out else ""))
    return 0


def _purge(ns: argparse.Namespace) -> int:
    from copilot.study.sessions import check_days, purge, retention_days

    days = check_days(ns.older_than) if ns.older_than is not None else retention_days()
    from copilot.pacs.printable import printable

    problems: list[str] = []
    removed = purge(days, dry_run=ns.dry_run, problems=problems)
    verb = "would remove" if ns.dry_run else "removed"
    for info in removed:
        print(f"{verb} {info.name} ({info.age_days():.0f} days)")
    for problem in problems:  # said, and the purge went on
        print(f"could not remove {printable(problem, 300)}", file=sys.stderr)
    print(f"{verb} {len(removed)} session(s) last written more than {days:g} days ago")
    return 1 if problems else 0


def _retention(ns: argparse.Namespace) -> int:
    from copilot.study.sessions import RETENTION_ENV, check_days, retention_days, set_retention

    if ns.days is not None:
        print(f"sessions are kept {check_days(ns.days):g} days (written to {set_retention(ns.days)})")
    else:
        print(f"sessions are kept {retention_days():g} days (set with `medcopilot sessions retention DAYS` or "
              f"${RETENTION_ENV}; `medcopilot sessions purge` applies it)")  # fmt: skip
    return 0


def add_sessions_parser(sub: Any) -> None:
    """Register `sessions` and its subcommands on the main parser's subparsers."""
    sessions = sub.add_parser("sessions", help="your desktop and chat sessions: list, show, export, purge")
    ssub = sessions.add_subparsers(dest="sessions_command", required=True)
    ssub.add_parser("list", help="every session, oldest first, with its study reference").set_defaults(func=_list)
    show = ssub.add_parser("show", help="one session: its study (from the owner-only sidecar) and files")
    show.add_argument("session", help="its folder name (or the start of it), or its path")
    show.set_defaults(func=_show)
    export = ssub.add_parser("export", help="copy a session elsewhere (owner-only)")
    export.add_argument("session")
    export.add_argument("out", help="a new or empty folder")
    export.add_argument("--deidentify", action="store_true",
                        help="remove the study's identifiers from the trace (re-chained) and the DICOM exports (PS3.15 "
                        "Basic profile), and leave out the sidecar and the report")  # fmt: skip
    export.set_defaults(func=_export)
    purge = ssub.add_parser("purge", help="remove sessions older than the retention (or --older-than DAYS)")
    purge.add_argument("--older-than", type=float, default=None, metavar="DAYS")
    purge.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    purge.set_defaults(func=_purge)
    retention = ssub.add_parser("retention", help="show or set how many days sessions are kept (default 30)")
    retention.add_argument("days", nargs="?", type=float, default=None)
    retention.set_defaults(func=_retention)
