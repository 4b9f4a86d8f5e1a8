"""`medcopilot pacs search|get|cache|clear`: find studies on a DICOMweb server, retrieve them into the local
cache, and show or empty that cache."""

from __future__ import annotations

import argparse
import json
from typing import Any

MIB = 1024 * 1024


def _study_count(n: int) -> str:
    return f"{n} stud{'y' if n == 1 else 'ies'}"


def summary_line(shown: int, offset: int, more: bool, total: int | None) -> str:
    """What a search page says about the studies it does not show."""
    start = f", from number {offset + 1}" if offset else ""
    if not more and (total is None or total <= offset + shown):
        return f"{_study_count(shown)}{start}"
    of = str(total) if total is not None else f"more than {offset + shown}"
    return f"{shown} of {of} studies{start} (use --limit or --offset; next page: --offset {offset + shown})"


def _search(ns: argparse.Namespace) -> int:
    import sys

    from copilot.pacs.auth import default_server
    from copilot.pacs.client import PacsClient
    from copilot.pacs.fetch import DERIVED_RESULTS

    url = ns.url or default_server()
    if not url:
        raise ValueError("no PACS given: pass its DICOMweb URL, or set MEDCOPILOT_PACS_URL or the PACS config file")
    page = PacsClient(url).search_page(
        ns.patient_id, ns.modality, ns.date, ns.limit, ns.offset, patient_name=ns.patient_name,
        accession=ns.accession, description=ns.description,
    )  # fmt: skip
    line = summary_line(len(page.studies), page.offset, page.more, page.total)
    if ns.json:
        print(json.dumps(page.studies, indent=2))
        print(line, file=sys.stderr)
        return 0
    for s in page.studies:
        print(f"study {s['url']}")
        print(f"  date {s['date'] or '—'}  patient {s['patient_id'] or '—'} {s['patient_name'] or ''}  "
              f"accession {s['accession'] or '—'}  {s['description'] or ''}")  # fmt: skip
        derived = [se for se in s["series"] if str(se["modality"] or "").upper() in DERIVED_RESULTS]
        for se in [se for se in s["series"] if se not in derived] + derived:  # derived results after the images
            number = f"#{se['number']} " if se["number"] is not None else ""
            what, count = ("derived", "objects") if se in derived else ("series", "images")
            print(f"  {what} {number}{se['modality'] or '?'} {se['description'] or '(no description)'} — "
                  f"{se['instances'] if se['instances'] is not None else '?'} {count}\n    {se['url']}")  # fmt: skip
    if page.left_out:
        print(f"{page.left_out} entries of the answer without a valid study UID left out")
    print(line)
    return 0


def _get(ns: argparse.Namespace) -> int:
    from copilot.pacs.fetch import fetch

    print(fetch(ns.url).path)
    return 0


def _cache(ns: argparse.Namespace) -> int:
    from copilot.pacs.cache import PacsCache

    cache = PacsCache()
    swept, swept_bytes = cache.sweep()
    if ns.clear:
        freed = cache.clear()
        print(f"cleared {cache.root} ({freed / MIB:.1f} MiB)")
        return 0
    incomplete = len(cache.incomplete())
    print(f"{cache.root}: {cache.size() / MIB:.1f} MiB of {cache.max_bytes / MIB:.0f} MiB, "
          f"{len(cache.series_dirs())} series" + (f", {incomplete} incomplete (`pacs get URL` resumes)"
                                                  if incomplete else ""))  # fmt: skip
    if swept:
        print(f"swept {swept} leftover(s) of interrupted retrievals ({swept_bytes / MIB:.1f} MiB)")
    return 0


def add_pacs_parser(sub: Any) -> None:
    """Register `pacs` and its subcommands on the main parser's subparsers."""
    pacs = sub.add_parser("pacs", help="studies on a DICOMweb PACS: search, retrieve, the local cache")
    psub = pacs.add_subparsers(dest="pacs_command", required=True)
    search = psub.add_parser("search", help="list studies and their series (QIDO-RS)")
    search.add_argument(
        "url", nargs="?", default=None,
        help="the DICOMweb service root, e.g. https://pacs.example.org/dicom-web (default: $MEDCOPILOT_PACS_URL, "
        "else the first server of the PACS config file)",
    )  # fmt: skip
    search.add_argument("--patient-id", default=None)
    search.add_argument("--patient-name", default=None, help="e.g. 'Doe^J*' (QIDO wildcards * and ?)")
    search.add_argument("--accession", default=None, help="accession number")
    search.add_argument("--description", default=None, help="words of the study description (or a * pattern)")
    search.add_argument("--modality", default=None, help="e.g. CT, MR, SM")
    search.add_argument(
        "--date", default=None, help="study date or range: YYYYMMDD or YYYY-MM-DD, A-B (either end open)"
    )
    search.add_argument("--limit", type=int, default=50, help="studies per page (default 50, at most 1000)")
    search.add_argument("--offset", type=int, default=0, help="studies to skip (the next page)")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=_search)
    get = psub.add_parser("get", help="retrieve a study or series URL into the local cache; prints its folder")
    get.add_argument("url", help="http(s)://HOST/…/studies/STUDY_UID[/series/SERIES_UID]")
    get.set_defaults(func=_get)
    cache = psub.add_parser("cache", help="where the cache is and how full (--clear: empty it)")
    cache.add_argument("--clear", action="store_true", help="remove every retrieved series")
    cache.set_defaults(func=_cache, clear=False)
    clear = psub.add_parser("clear", help="remove every retrieved series from the local cache")
    clear.set_defaults(func=_cache, clear=True)
