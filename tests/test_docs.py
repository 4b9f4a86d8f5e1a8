"""The docs are checked against the code: README's command table lists every command and option the parsers
accept (and none they do not), and docs/ARCHITECTURE.md names every package and top module of `copilot/`."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from copilot.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent


def parser_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, set[str]]]:
    """(command, its option strings) for every leaf command of the parser (help options and hidden ones left out)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for action in subs:
        for name, sub in action.choices.items():
            yield from parser_commands(sub, (*path, name))
    if not subs:
        yield " ".join(path), {s for a in parser._actions if a.option_strings and a.help != argparse.SUPPRESS
                               for s in a.option_strings if s not in ("-h", "--help")}  # fmt: skip


def readme_commands(commands: set[str]) -> dict[str, set[str]]:
    """The commands README's command table names (first cell: `medcopilot CMD [OPTIONS]`, further forms of the
    same command group may leave out `medcopilot`), each with the options its usage lists."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text.split("## Command line", 1)[1].lstrip().split("\n\n", 1)[0]
    found: dict[str, set[str]] = {}
    for row in table.splitlines()[2:]:
        first = row.split(" | ", 1)[0]
        for usage in re.findall(r"`([^`]+)`", first):
            words = usage.removeprefix("medcopilot ").split()
            name = max((" ".join(words[:n]) for n in range(1, len(words) + 1) if " ".join(words[:n]) in commands),
                       key=len, default=" ".join(words[:2]))  # fmt: skip
            found.setdefault(name, set()).update(re.findall(r"(?<![\w-])--?[a-z][a-z0-9-]*", usage))
    return found


def test_the_readme_command_table_matches_the_parsers() -> None:
    parsed = dict(parser_commands(build_parser()))
    listed = readme_commands(set(parsed))
    missing_commands = sorted(set(parsed) - set(listed))
    stale_commands = sorted(set(listed) - set(parsed))
    missing = [f"{c} {o}" for c in sorted(set(parsed) & set(listed)) for o in sorted(parsed[c] - listed[c])]
    stale = [f"{c} {o}" for c in sorted(set(parsed) & set(listed)) for o in sorted(listed[c] - parsed[c])]
    problems = [
        *(f"command not in README's table: medcopilot {c}" for c in missing_commands),
        *(f"README lists a command the parser lacks: medcopilot {c}" for c in stale_commands),
        *(f"option not in README's table: medcopilot {m}" for m in missing),
        *(f"README lists an option the parser lacks: medcopilot {s}" for s in stale),
    ]
    assert not problems, "\n".join(problems)


def test_the_architecture_names_every_package_and_top_module() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    core = ROOT / "copilot"
    packages = sorted(str(p.parent.relative_to(ROOT)) for p in core.rglob("__init__.py") if p.parent != core)
    modules = sorted(f"copilot/{p.name}" for p in core.glob("*.py") if p.name != "__init__.py")
    unnamed = [name for name in (*packages, *modules) if not re.search(re.escape(name) + r"(?![\w])", doc)]
    assert not unnamed, f"docs/ARCHITECTURE.md never names: {', '.join(unnamed)}"
