"""`medcopilot optin list | allow URL [--kinds text,views] | revoke URL`: the model services the clinician agreed to
send study data to (`copilot.panel.optin`), per kind of data; a yes given in a dialog or at the terminal shows here."""

from __future__ import annotations

import argparse
from typing import Any


def _list(ns: argparse.Namespace) -> int:
    from copilot.panel.optin import optin_path, services

    found = services()
    for url, kinds in sorted(found.items()):
        print(f"{url}  {', '.join(kinds)}")
    print(f"{len(found)} service(s) opted in ({optin_path()}); a service on this machine needs none")
    return 0


def _allow(ns: argparse.Namespace) -> int:
    from copilot.panel.optin import grant, service_key

    kinds = [k.strip() for k in ns.kinds.split(",") if k.strip()]
    path = grant(ns.url, kinds)
    print(f"{service_key(ns.url)} may receive {', '.join(kinds)} (written to {path})")
    return 0


def _revoke(ns: argparse.Namespace) -> int:
    from copilot.panel.optin import revoke, service_key

    if revoke(ns.url):
        print(f"{service_key(ns.url)}: opt-in withdrawn; nothing is sent there until you agree again")
    else:
        print(f"{service_key(ns.url)} was not opted in")
    return 0


def add_optin_parser(sub: Any) -> None:
    """Register `optin` and its subcommands on the main parser's subparsers."""
    optin = sub.add_parser("optin", help="the model services you agreed to send study data to")
    osub = optin.add_subparsers(dest="optin_command", required=True)
    osub.add_parser("list", help="every service opted in, with the kinds of data").set_defaults(func=_list)
    allow = osub.add_parser("allow", help="agree to send study data to a model service")
    allow.add_argument("url", help="the service's base URL (as --base-url takes it)")
    allow.add_argument("--kinds", default="text,views", help="what it may receive: text, views (default both)")
    allow.set_defaults(func=_allow)
    revoke = osub.add_parser("revoke", help="withdraw the opt-in of a service")
    revoke.add_argument("url")
    revoke.set_defaults(func=_revoke)
