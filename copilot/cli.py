"""`medcopilot` command line: cases make, serve, chat, replay, demo."""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from copilot import oneline
from copilot.pacs import is_dicomweb_url


class InputError(ValueError):
    """Bad input found by the command line itself."""


def _input_errors() -> tuple[type[BaseException], ...]:
    """Exceptions that mean bad input (a file, a field, a setting): one line and exit code 2, never a traceback."""
    from copilot.cases.pack import CaseError
    from copilot.engine.slide.source import SlideError
    from copilot.engine.volume.image import VolumeLoadError
    from copilot.errors import HandlerError

    return (InputError, CaseError, VolumeLoadError, SlideError, HandlerError, ValueError, OSError, LookupError)


def _one_line(exc: BaseException) -> str:
    from copilot.trace.redact import redact_text

    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return redact_text(" ".join(str(text).split()))  # a URL's password or key never reaches the terminal


def _cases_make(ns: argparse.Namespace) -> int:
    from copilot.cases.progress import listening, printer
    from copilot.medflow import make_cases

    try:
        w, h = (int(v) for v in ns.slide_size.lower().split("x"))
        with listening(printer(sys.stderr)):
            made = make_cases(ns.module, ns.n, ns.seed, Path(ns.out), spacing=ns.spacing, slide_size=(w, h), mpp=ns.mpp)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in made:
        print(path)
    return 0


def _bench_score(ns: argparse.Namespace) -> int:
    from copilot.cases.pack import find_cases
    from copilot.medflow.score_cli import format_table, read_answers, report_json, score_answers, track_ops

    try:  # refused before any work: Track B answers name their operation set (Table 3)
        ops = track_ops(ns.track, ns.ops) if ns.out else ""
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    problems: list[str] = []
    cases = find_cases(ns.cases, problems)
    for problem in problems:  # a bad case pack is reported; the others are scored
        print(f"skipped: {problem}", file=sys.stderr)
    if not cases:
        print(f"error: no valid case packs under {ns.cases}", file=sys.stderr)
        return 2
    from copilot.bench.scoring.rules import parse_rules

    answers = read_answers(ns.answers)
    scores = score_answers(cases, answers, parse_rules(ns.rule))
    out = report_json(scores, answers, cases)
    if ns.out:
        from copilot.bench.report.run_report import write_report
        from copilot.medflow.registry import report_columns
        from copilot.medflow.runs import ResultsDB, SchemaError
        from copilot.medflow.score_cli import result_rows

        try:
            db = ResultsDB(Path(ns.out) / "results.sqlite")
        except SchemaError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        try:
            for row in result_rows(scores, answers, ns.model or Path(ns.answers).stem, ns.track, cases, ops):
                db.insert(row)
            write_report(db.rows(), Path(ns.out) / "report.html", report_columns(), run_dir=ns.out)
        finally:
            db.close()
    if ns.json:
        print(json.dumps(out, indent=2))
    else:
        print(format_table(out["summary"]))
        for problem in out["problems"]:
            print(f"{ns.answers}:{problem['line']}: {problem['problem']}", file=sys.stderr)
        if out["unknown_case_ids"]:
            print(f"unknown case ids (not scored): {', '.join(out['unknown_case_ids'])}", file=sys.stderr)
    return 1 if out["unknown_case_ids"] or any("expected" in p["problem"] for p in out["problems"]) else 0


def _bench_run(ns: argparse.Namespace) -> int:
    from copilot.bench.report.run_report import summary
    from copilot.bench.scoring.rules import parse_rules
    from copilot.medflow.bench_run import BatchOutcome, run_batch
    from copilot.medflow.runs import RunRefused, SchemaError, check_policy

    model_settings = _model_settings(ns)
    try:
        check_policy(ns.policy, ns.base_url)  # an unknown spec, no service, a rejected key: said before the preflight
    except RunRefused as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    if not ns.no_preflight and _refused_by_preflight(ns, model_settings):
        return 2
    outcome = BatchOutcome([])
    try:
        rows = run_batch(
            ns.cases, ns.policy, ns.out, workers=ns.workers, scheduler=ns.scheduler, track=ns.track,
            budget=ns.budget, repeats=ns.repeats, model=ns.model, seed=ns.seed, ops=ns.ops,
            backend=ns.backend, protocol=ns.protocol, outcome=outcome, rules=parse_rules(ns.rule),
            base_url=ns.base_url, model_settings=model_settings, policy_checked=True,
        )  # fmt: skip
    except (SchemaError, RunRefused) as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        return 2
    for (track, policy, module), s in sorted(summary(rows).items()):
        loc = "—" if s["loc"] is None else f"{s['loc']:.2f}"
        scored = f"Task={s['task']:.2f} Strict={s['strict']:.2f} Loc={loc}" if s["task"] is not None else "no score"
        errors = f" error {s['errors']}/{s['n']}" if s["errors"] else ""
        print(f"{track} {policy} {module}: n={s['n'] - s['errors']} {scored}{errors}")
    print(f"results: {Path(ns.out) / 'results.sqlite'}\nreport: {Path(ns.out) / 'report.html'}")
    if outcome.errored:  # exit 3: the run finished, but episodes errored (retried by the next run)
        print(f"error: {outcome.errored} of {outcome.ran} episodes errored (see the report)", file=sys.stderr)
        return 3
    return 0


def _bench_report(ns: argparse.Namespace) -> int:
    from copilot.bench.report.run_report import write_report
    from copilot.medflow.registry import report_columns
    from copilot.medflow.runs import SchemaError, read_results

    if ns.output and not Path(ns.output).resolve().parent.is_dir():  # before any work: the folder must exist
        print(f"error: {Path(ns.output).parent} is not a folder (--output {ns.output})", file=sys.stderr)
        return 2
    if ns.medical:  # which models are medical-domain (the table groups)
        os.environ["MEDCOPILOT_MEDICAL_MODELS"] = ",".join(ns.medical)
    run = Path(ns.run)
    try:
        rows = read_results(run / "results.sqlite" if run.is_dir() else run)
    except (SchemaError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run_dir = run if run.is_dir() else run.parent
    if ns.format == "html":
        path = Path(ns.output) if ns.output else run_dir / "report.html"
        write_report(rows, path, report_columns(), run_dir=run_dir, pages=ns.pages, galleries=True)
        print(path)
        return 0
    from copilot.bench.measures.perturb import read_perturbations
    from copilot.bench.report.publication import render

    return _emit(render(rows, ns.format, read_perturbations(run_dir)), ns.output)  # md, csv, json: one table list


def _emit(text: str, output: str | None) -> int:
    """A report to its file (whose path is printed) or, without one, to the terminal."""
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(output)
    else:
        print(text)
    return 0


def _bench_montage(ns: argparse.Namespace) -> int:
    from copilot.bench.report.montage import write_montages
    from copilot.cases.pack import find_cases

    for case in find_cases(ns.cases):
        for path in write_montages(case.root, ns.out):
            print(path)
    return 0


def _cases_adapt(ns: argparse.Namespace) -> int:
    from copilot.adapters import adapter

    extra = [ns.csv] if ns.csv else []
    try:
        report = adapter(ns.dataset)(ns.src, ns.out, *extra, copy=ns.copy)
    except ValueError as exc:  # an AdapterError, or a dataset whose plug-in failed to load
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for path in report.cases:
        print(path)
    for case_id, message in report.failures:
        print(f"failed: {case_id}: {message}", file=sys.stderr)
    for note in report.notes:
        print(f"note: {note}", file=sys.stderr)
    Path(ns.out).mkdir(parents=True, exist_ok=True)
    (Path(ns.out) / f"adapt_{ns.dataset}.json").write_text(json.dumps(report.to_json(), indent=2) + "\n")
    print(report.summary())
    if not report.cases:
        print("error: no cases found in that layout", file=sys.stderr)
        return 1
    return 0


def _mcp(ns: argparse.Namespace) -> int:
    import anyio

    from copilot.runtime import open_session
    from copilot.server.mcp_server import serve_stdio

    given = ("host", "port", "token", "token_file")
    http_only = [f"--{k.replace('_', '-')}" for k in given if getattr(ns, k) is not None]
    if not ns.http and (http_only or ns.allow_host):
        raise InputError(f"{', '.join(http_only or ['--allow-host'])} only with --http (stdio has no network side)")
    token = _mcp_token(ns) if ns.http else ""
    trace_dir = Path(ns.trace_dir) if ns.trace_dir else _default_trace_dir(ns.case)
    case = _url_study(ns.case) if is_dicomweb_url(ns.case) else ns.case
    session = open_session(case, track=ns.track, trace_dir=trace_dir, backend=ns.backend,
                           pseudonymous=is_dicomweb_url(ns.case))  # a clinician's study: named by reference
    try:
        if ns.http:
            _mcp_http(ns, session, token, trace_dir)
        else:
            anyio.run(serve_stdio, session)
    finally:
        session.close({"status": "mcp_closed"})
    return 0


def _mcp_token(ns: argparse.Namespace) -> str:
    from copilot.server.token import resolve_token

    token, source = resolve_token(ns.token, ns.token_file)
    if source == "random":
        print(f"token: {token}", file=sys.stderr)
    return token


def _mcp_http(ns: argparse.Namespace, session: Any, token: str, trace_dir: Path) -> None:
    from dataclasses import replace

    from copilot.server.limits import DEFAULT_LIMITS
    from copilot.server.mcp_http import McpHttpServer

    limits = replace(DEFAULT_LIMITS, allowed_hosts=(*DEFAULT_LIMITS.allowed_hosts, *ns.allow_host))
    server = McpHttpServer(session, ns.host or "127.0.0.1", 8017 if ns.port is None else ns.port, token, limits)
    print(f"trace: {trace_dir}", file=sys.stderr)
    print(f"listening on {server.url}", flush=True)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _run(ns: argparse.Namespace) -> int:
    from copilot.llm.spec import is_model_policy
    from copilot.medflow.bench_run import run_episode
    from copilot.medflow.policies import make_policy

    if is_model_policy(ns.policy):
        _check_model_service(ns.policy, ns.model, ns.base_url)
    policy = make_policy(ns.policy, model=ns.model, base_url=ns.base_url, budget=ns.budget, **_model_settings(ns))
    row = run_episode(
        ns.case,
        ns.policy,
        str(Path(ns.out).parent),
        ns.track,
        ns.budget,
        trace_dir=ns.out,
        policy=policy,
        key={"backend": ns.backend},
    )
    print(row["response"])
    loc = "—" if row["loc"] is None else f"{row['loc']:.2f}"
    print(
        f"\nstatus={row['status']} rounds={row['rounds']} Task={row['task']:.2f} Strict={row['strict']:.2f} "
        f"Loc={loc}{'  error: ' + row['error'] if row['error'] else ''}\ntrace: {ns.out}"
    )
    return 0 if row["status"] != "error" else 1


def _model_options(p: argparse.ArgumentParser) -> None:
    """The model options every model command takes (docs/models.md)."""
    p.add_argument("--reasoning", default=None, help="a level of the model's reasoning control (its profile's)")
    p.add_argument("--tool-protocol", choices=["native", "text"], default=None,
                   help="tool calls natively or in text (default: the model's profile)")  # fmt: skip
    p.add_argument("--max-images", type=int, default=None, help="images per request (default: the profile's)")


def _check_model_service(policy: str, model: str | None, base_url: str | None) -> None:
    """Refuse at once (instead of retrying a default URL) when no model service is configured."""
    from copilot.llm.spec import SpecError, parse_policy, service_problem

    try:
        problem = service_problem(parse_policy(policy, model, base_url))
    except SpecError as exc:
        problem = str(exc)
    if problem:
        raise InputError(f"--policy {policy}: {problem} (model: MEDCOPILOT_MODEL or --model)")


def _model_settings(ns: argparse.Namespace) -> dict[str, Any]:
    """The model options a command line gave (reasoning, tool protocol, images per request), for every wire."""
    return {k: v for k, v in {"reasoning": getattr(ns, "reasoning", None), "tool_protocol":
            getattr(ns, "tool_protocol", None), "max_images": getattr(ns, "max_images", None)}.items()
            if v is not None}  # fmt: skip


def _preflight(policy: str, base_url: str | None, settings: dict[str, Any], cases: int, rounds: int) -> Any:
    from copilot.agent.preflight import check_policy_settings
    from copilot.agent.settings import AgentSettings

    return check_policy_settings(AgentSettings.for_policy(policy, base_url=base_url, **settings), cases, rounds)


def _refused_by_preflight(ns: argparse.Namespace, settings: dict[str, Any]) -> bool:
    """`bench run`'s preflight of a model policy: True (after saying why) when the run would fail."""
    from copilot.cases.pack import find_cases
    from copilot.llm.spec import SpecError, is_model_policy
    from copilot.llm.types import ModelError

    if not is_model_policy(ns.policy):
        return False
    try:
        report, estimate = _preflight(ns.policy, ns.base_url, settings, len(find_cases(ns.cases, [])) * ns.repeats,
                                      ns.budget)  # fmt: skip
    except (SpecError, ModelError, ValueError) as exc:
        print(f"error: preflight of {ns.policy}: {_one_line(exc)}", file=sys.stderr)
        return True
    for line in [*report.lines(), estimate]:
        print(f"preflight: {line}", file=sys.stderr)
    if report.problems:
        print(f"error: {ns.policy} would fail: {'; '.join(report.problems)} (or --no-preflight)", file=sys.stderr)
        return True
    return False


def _models_check(ns: argparse.Namespace) -> int:
    """`models check`: the preflight's requests, the profile and the estimate; exit 1 when a check fails."""
    from copilot.llm.spec import SpecError
    from copilot.llm.types import ModelError

    try:
        report, estimate = _preflight(ns.policy, ns.base_url, {**_model_settings(ns),
                                      **({"model": ns.model} if ns.model else {})}, ns.cases, ns.rounds)  # fmt: skip
    except (SpecError, ValueError) as exc:
        raise InputError(str(exc)) from None
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\n".join([*report.lines(), estimate]))
    return 1 if report.problems else 0


def _models(ns: argparse.Namespace) -> int:
    """Print the model ids the provider's service lists, one per line."""
    if ns.action == "check":
        return _models_check(ns)
    from copilot.llm.connect import connect, explain
    from copilot.llm.spec import SpecError, parse_policy
    from copilot.llm.types import ModelError

    try:
        spec = parse_policy(ns.policy, "listing", ns.base_url)
        spec, wire = connect(spec, 30.0)
        names = wire.list_models()
    except SpecError as exc:
        raise InputError(str(exc)) from None
    except ModelError as exc:
        print(f"error: {explain(exc, spec)}", file=sys.stderr)
        return 1
    print("\n".join(names) if names else f"{spec.provider}: the service lists no models")
    return 0


def _gui(ns: argparse.Namespace) -> int:
    from copilot.gui.startup import close_splash, progress, show_first_image

    try:
        if ns.screenshot is None and _attached(ns)[0] is None:
            show_first_image(ns.path or ns.case)  # the study's middle slice while the viewer loads
        progress("Loading the viewer…")
        return _gui_main(ns)
    finally:
        close_splash()


def _gui_main(ns: argparse.Namespace) -> int:
    host, address = _attached(ns)
    if host is not None:  # the side panel of a running host application, on what it shows (its own widgets)
        from copilot.host.apps import attach_panel

        return attach_panel(host, address, ns.trace_dir, ns.screenshot)
    from copilot.gui.app import main as gui_main

    cursor = [float(v) for v in ns.cursor.split(",")] if ns.cursor else None
    return gui_main(ns.path or ns.case, ns.screenshot, ns.run, ns.layout, ns.fusion, asks=ns.ask, policy=ns.policy,
                    base_url=ns.base_url, trace_dir=ns.trace_dir, series=ns.series, frame=ns.frame,
                    cursor=cursor, prior=ns.prior)  # fmt: skip


def _default_trace_dir(case_dir: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = "pacs" if is_dicomweb_url(case_dir) else Path(case_dir).resolve().name  # no UID in a folder name
    return Path("traces") / f"{name}-{stamp}-{secrets.token_hex(3)}"


def _url_study(url: str) -> Any:
    """The study a DICOMweb study or series URL names, retrieved into the PACS cache; its origin goes into the
    trace header."""
    from copilot.panel.studies import study_at

    return study_at(url)


def _serve(ns: argparse.Namespace) -> int:
    from dataclasses import replace

    from copilot.runtime import open_session
    from copilot.server.http import make_server
    from copilot.server.limits import DEFAULT_LIMITS
    from copilot.server.token import resolve_token

    token, token_source = resolve_token(ns.token, ns.token_file)
    trace_dir = Path(ns.trace_dir) if ns.trace_dir else _default_trace_dir(ns.case)
    viewer = None
    host, address = _attached(ns)
    if host is not None:  # a running host application (e.g. a live QuPath) instead of the embedded viewer
        from copilot.host.apps import connect_viewer

        viewer = connect_viewer(host, address)
    case = _url_study(ns.case) if is_dicomweb_url(ns.case) else ns.case  # a PACS URL: retrieved, then a study
    session = open_session(case, track=ns.track, trace_dir=trace_dir, viewer=viewer, backend=ns.backend,
                           pseudonymous=is_dicomweb_url(ns.case))  # a clinician's study: named by reference
    limits = replace(DEFAULT_LIMITS, allowed_hosts=(*DEFAULT_LIMITS.allowed_hosts, *ns.allow_host))
    server = make_server(session, ns.host, ns.port, token, slicer_compat=ns.slicer_compat, limits=limits)
    if token_source == "random":
        print(f"token: {token}", file=sys.stderr)
    print(f"trace: {trace_dir}", file=sys.stderr)
    print(f"listening on {server.url}", flush=True)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        session.close({"status": "server_stopped"})
    return 0


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _replay(ns: argparse.Namespace) -> int:
    from copilot.replay import replay

    report = replay(ns.trace_dir, case_dir=ns.case)
    print(report.summary())
    return 0 if report.ok else 1


def _demo(ns: argparse.Namespace) -> int:
    from copilot.demo import run_demo

    return run_demo(Path(ns.out), spacing=ns.spacing)


def _backend_option(parser: argparse.ArgumentParser) -> None:
    from copilot.slicer_backend import BACKENDS

    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default="embedded",
        help="radiology viewer: the embedded engine, or slicer (Slicer's MRML libraries from slicer-core, headless)",
    )


def _host_names() -> list[str]:
    """The host applications' names, read from their entry points without loading any."""
    from copilot.plugins import HOSTS_GROUP, entry_points

    return [ep.name for ep in entry_points(HOSTS_GROUP)]


def _host_options(parser: argparse.ArgumentParser, what: str) -> None:
    """`--attach HOST` and `--address` (the host applications of the plug-in registry), and `--qupath [PORT]`."""
    from copilot.plugins import LazyChoices

    parser.add_argument("--attach", default=None, choices=LazyChoices(_host_names),
                        help=f"{what} (the core's hosts or a plug-in's)")  # fmt: skip
    parser.add_argument("--address", default=None, help="where the running host listens (default: the host's own, "
                        "QuPath's Py4J gateway port 25333)")  # fmt: skip
    parser.add_argument("--qupath", nargs="?", type=int, const=25333, default=None, metavar="PORT",
                        help="same as --attach qupath --address PORT (token: $MEDCOPILOT_QUPATH_TOKEN)")  # fmt: skip


def _attached(ns: argparse.Namespace) -> tuple[str | None, str | None]:
    """The host application a command attaches to and its address (None: none)."""
    if getattr(ns, "qupath", None) is not None:
        return "qupath", str(ns.qupath)
    return getattr(ns, "attach", None), getattr(ns, "address", None)


def _add_gui(sub: Any) -> None:
    """The `gui` command's arguments."""
    gui = sub.add_parser("gui", help="the desktop app (PySide6) with the copilot panel")
    gui.add_argument(
        "path", nargs="?", default=None,
        help="a case pack or a folder of them, a DICOM folder, a NIfTI/NRRD/MHA file, a slide, or a trace folder "
        "(default: the most recent study)",
    )  # fmt: skip
    gui.add_argument("--case", default=None, help="same as PATH (kept for scripts)")
    gui.add_argument("--layout", default=None, choices=["one_up", "three_up", "four_up", "side_by_side"],
                     help="the view layout to start in (default: the study's)")  # fmt: skip
    gui.add_argument("--fusion", default=None, help="with --screenshot: show this volume over the active one")
    gui.add_argument("--series", default=None, help="the series of a DICOM folder to open, without the picker: "
                     "its number, a word of its description or the end of its UID; several, comma-separated, open "
                     "together (the first as the background)")  # fmt: skip
    gui.add_argument("--frame", type=int, default=None, help="the frame of a 4D image to open (from 0)")
    gui.add_argument("--prior", default=None, metavar="PRIOR",
                     help="a prior study to compare with (file, folder or DICOMweb URL), opened beside the "
                          "study, aligned once approved (--screenshot: approved; another patient's: refused)")
    gui.add_argument("--cursor", default=None, metavar="R,A,S",
                     help="with --screenshot: the linked cursor at this RAS point (mm), its values in the status bar "
                     "(a slide: X,Y level-0 pixels)")
    gui.add_argument("--screenshot", default=None, help="save a picture of the window to this PNG and exit")
    gui.add_argument("--run", default=None, help="with --screenshot: run this offline policy first")
    gui.add_argument("--ask", action="append", default=[], metavar="QUESTION",
                     help="with --screenshot: ask the model this first (repeat for follow-ups)")  # fmt: skip
    gui.add_argument("--policy", default="openai", help="the model policy for --ask: openai[:MODEL]")
    gui.add_argument("--base-url", default=None, help="OpenAI-compatible service for --ask (default: $OPENAI_BASE_URL)")
    _host_options(gui, "be the side panel of a running host application, on what it shows")
    gui.add_argument("--trace-dir", default=None,
                     help="where the session's trace goes (default: a new folder of the per-user sessions folder)")
    gui.set_defaults(func=_gui)


def _gui_parser() -> argparse.ArgumentParser:
    """A parser of the `gui` command alone: the desktop starts without loading what the other commands need."""
    p = argparse.ArgumentParser(prog="medcopilot", description="Auditable agent runtime for medical image viewers")
    _add_gui(p.add_subparsers(dest="command", required=True))
    return p


def _module_names() -> list[str]:
    from copilot.medflow.registry import modules

    return [*modules(), "all"]


def _ops_names() -> list[str]:
    from copilot.tools.operation_sets import operation_sets

    return list(operation_sets())


def build_parser() -> argparse.ArgumentParser:
    from copilot.adapters import dataset_names
    from copilot.medflow.policies import POLICY_HELP  # imported here: `gui` shows its window before these load
    from copilot.plugins import LazyChoices  # the plug-in choice lists are read when a value or --help needs them
    from copilot.runtime import allow_store_option

    p = argparse.ArgumentParser(prog="medcopilot", description="Auditable agent runtime for medical image viewers")
    sub = p.add_subparsers(dest="command", required=True)

    cases = sub.add_parser("cases", help="case packs")
    csub = cases.add_subparsers(dest="cases_command", required=True)
    make = csub.add_parser("make", help="write synthetic case packs")
    make.add_argument("--module", required=True, choices=LazyChoices(_module_names))
    make.add_argument("--n", type=int, default=1)
    make.add_argument("--seed", type=int, default=0)
    make.add_argument("--out", required=True)
    make.add_argument("--spacing", type=float, default=None, help="radiology voxel size in mm (module default)")
    make.add_argument("--slide-size", default="4096x3072", help="slide size WxH in level-0 px")
    make.add_argument("--mpp", type=float, default=None, help="slide µm per pixel (module default)")
    make.set_defaults(func=_cases_make)
    adapt = csub.add_parser("adapt", help="case packs from a public dataset in its published layout")
    adapt.add_argument("--dataset", required=True, type=str.lower, choices=LazyChoices(dataset_names))
    adapt.add_argument("--src", required=True, help="the dataset folder")
    adapt.add_argument("--out", required=True)
    adapt.add_argument("--csv", default=None, help="metadata / rating / clinical / stage CSV (or annotations dir)")
    adapt.add_argument("--copy", action="store_true", help="copy source files instead of linking them")
    adapt.set_defaults(func=_cases_adapt)

    run = sub.add_parser("run", help="one episode of a policy on a case")
    run.add_argument("--case", required=True)
    run.add_argument("--policy", required=True, help=POLICY_HELP)
    run.add_argument("--model", default=None)
    run.add_argument("--base-url", default=None)
    _model_options(run)
    run.add_argument("--track", choices=["A", "B"], default="A")
    run.add_argument("--budget", type=int, default=20)
    run.add_argument("--out", required=True, help="trace directory")
    _backend_option(run)
    allow_store_option(run)
    run.set_defaults(func=_run)

    bench = sub.add_parser("bench", help="the MedFlow benchmark")
    bsub = bench.add_subparsers(dest="bench_command", required=True)
    score = bsub.add_parser("score", help="score an answers file (JSON lines case_id/response)")
    score.add_argument("--cases", required=True)
    score.add_argument("--answers", required=True)
    score.add_argument("--json", action="store_true")
    score.add_argument("--out", default=None, help="run folder: add the scored answers to its results.sqlite")
    score.add_argument("--model", default=None, help="model name of the answers (default: the file's stem)")
    score.add_argument("--track", choices=["A", "B", "C"], default="C", help="track of the answers (with --out)")
    score.add_argument("--ops", default=None, help="operation set of Track B answers (with --out; Table 3)")
    score.add_argument("--rule", action="append", default=None, metavar="NAME=VALUE",
                       help="a scoring option where the paper is ambiguous (bench/scoring/rules.py)")  # fmt: skip
    score.set_defaults(func=_bench_score)
    brun = bsub.add_parser("run", help="run episodes of a policy over case packs (resumable)")
    brun.add_argument("--cases", required=True)
    brun.add_argument("--policy", required=True, help=POLICY_HELP)
    brun.add_argument("--out", required=True)
    brun.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    brun.add_argument("--scheduler", default=None, help="Dask scheduler address (tcp://host:8786)")
    brun.add_argument("--track", choices=["A", "B"], default="A")
    brun.add_argument("--budget", type=int, default=20)
    brun.add_argument("--repeats", type=int, default=1, help="run every case N times (stability)")
    brun.add_argument("--model", default=None, help="model name in the tables (default: from the policy)")
    brun.add_argument("--seed", type=int, default=0, help="sampling seed recorded in the result key")
    brun.add_argument("--ops", default=None, choices=LazyChoices(_ops_names),
                      help="Track B operation set (default all; none: the unregistered control)")  # fmt: skip
    brun.add_argument("--protocol", choices=["harness", "paper"], default="harness",
                      help="tools the model sees: the product surface, or exactly the paper's (no guards)")  # fmt: skip
    brun.add_argument("--base-url", default=None, help="the model service's address, for every provider")
    _model_options(brun)
    brun.add_argument("--no-preflight", action="store_true", help="start without the model service's checks")
    brun.add_argument("--rule", action="append", default=None, metavar="NAME=VALUE",
                      help="a scoring option where the paper is ambiguous (recorded; use its own --out)")  # fmt: skip
    _backend_option(brun)
    allow_store_option(brun)
    brun.set_defaults(func=_bench_run)
    from copilot.medflow.trackc import add_trackc_parser

    add_trackc_parser(bsub)
    from copilot.medflow.perturb_cli import add_perturb_parser

    add_perturb_parser(bsub)
    from copilot.medflow.review_cli import add_review_parser

    add_review_parser(bsub)
    from copilot.integrations.inspect_cli import add_inspect_parsers

    add_inspect_parsers(bsub)
    breport = bsub.add_parser("report", help="the paper's tables and the report from a run's results.sqlite")
    breport.add_argument("run", help="run folder (or its results.sqlite)")
    breport.add_argument("--format", choices=["html", "md", "csv", "json"], default="html")
    breport.add_argument("--output", default=None, help="file to write (default: report.html, or stdout)")
    breport.add_argument("--pages", action="store_true", help="also rewrite every episode page from its trace")
    breport.add_argument("--medical", action="append", default=None, metavar="NAME",
                         help="a medical-domain model name pattern (repeatable; default: a built-in list)")  # fmt: skip
    breport.set_defaults(func=_bench_report)
    montage = bsub.add_parser("montage", help="Track C slice montages of case packs")
    montage.add_argument("--cases", required=True)
    montage.add_argument("--out", required=True)
    montage.set_defaults(func=_bench_montage)

    serve = sub.add_parser("serve", help="serve a case's handlers over HTTP")
    serve.add_argument("--case", required=True, help="a case pack, or a DICOMweb study or series URL")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8016)
    serve.add_argument(
        "--token", default=None, help="bearer token; visible to every local user in the process list: prefer "
        "--token-file or $MEDCOPILOT_TOKEN (default: a random one, printed on stderr)"
    )  # fmt: skip
    serve.add_argument("--token-file", default=None, help="read the bearer token from this file's first line")
    serve.add_argument("--track", choices=["A", "B"], default="A")
    serve.add_argument("--slicer-compat", action="store_true", help="open the read-only /slicer subset on loopback")
    serve.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer requests whose Host header names NAME (default: loopback names and --host)",
    )
    serve.add_argument("--trace-dir", default=None)
    _backend_option(serve)
    _host_options(serve, "drive a running host application instead of the embedded viewer")
    allow_store_option(serve)
    serve.set_defaults(func=_serve)

    mcp = sub.add_parser("mcp", help="the handler registry as an MCP server over stdio, or streamable HTTP")
    mcp.add_argument("--case", required=True)
    mcp.add_argument("--http", action="store_true", help="serve streamable HTTP at /mcp (serve's checks and token)")
    mcp.add_argument("--host", default=None, help="with --http: the address to bind (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=None, help="with --http: the port (default 8017)")
    mcp.add_argument("--token", default=None, help="with --http: bearer token, visible in the process list: prefer "
                     "--token-file or $MEDCOPILOT_TOKEN (default: a random one, printed on stderr)")  # fmt: skip
    mcp.add_argument("--token-file", default=None, help="with --http: read the bearer token from a file's first line")
    mcp.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                     help="with --http: also answer requests whose Host header names NAME")  # fmt: skip
    mcp.add_argument("--track", choices=["A", "B"], default="A")
    mcp.add_argument("--trace-dir", default=None)
    _backend_option(mcp)
    allow_store_option(mcp)
    mcp.set_defaults(func=_mcp)

    _add_gui(sub)

    from copilot.study.chat import add_parser as add_chat

    add_chat(sub)

    rp = sub.add_parser("replay", help="re-execute a trace and verify states and image hashes")
    rp.add_argument("trace_dir")
    rp.add_argument("--case", default=None, help="case folder, if it moved since the trace was written")
    rp.set_defaults(func=_replay)

    demo = sub.add_parser("demo", help="make a case, drive it over HTTP, write and replay a trace")
    demo.add_argument("--out", default="demo-output")
    demo.add_argument("--spacing", type=float, default=1.0)
    demo.set_defaults(func=_demo)

    models = sub.add_parser("models", help="the models a model service lists (list), or a preflight of one (check)")
    models.add_argument("action", nargs="?", choices=["list", "check"], default="list")
    models.add_argument("--policy", default="openai", help=f"the provider: {POLICY_HELP}")
    models.add_argument("--base-url", default=None)
    models.add_argument("--model", default=None, help="check: the model (default: the policy's)")
    models.add_argument("--cases", type=int, default=1, help="check: cases of the run to estimate")
    models.add_argument("--rounds", type=int, default=20, help="check: rounds per episode to estimate")
    _model_options(models)
    models.set_defaults(func=_models)

    from copilot.pacs.cli import add_pacs_parser
    from copilot.study.sessions_cli import add_sessions_parser

    add_pacs_parser(sub)
    add_sessions_parser(sub)
    from copilot.study.optin_cli import add_optin_parser

    add_optin_parser(sub)
    from copilot.trace.export_cli import add_trace_parser

    add_trace_parser(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; bad input ends with one `error:` line and exit code 2 (MEDCOPILOT_DEBUG=1: traceback)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["gui"] and "-h" not in args and "--help" not in args:
        from copilot.gui.startup import show_splash

        show_splash()  # within a few hundred ms of the command: the rest loads behind it
    ns = (_gui_parser() if args[:1] == ["gui"] else build_parser()).parse_args(args)
    if getattr(ns, "allow_store", None):  # the destinations headless writes may go to (read by every session)
        from copilot.runtime import ALLOW_STORE_ENV

        os.environ[ALLOW_STORE_ENV] = "\n".join(ns.allow_store)
    oneline.install()  # background failures and log records: one line each on stderr
    try:
        return int(ns.func(ns))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get("MEDCOPILOT_DEBUG"):
            raise
        if isinstance(exc, _input_errors()):
            code = getattr(exc, "code", None)
            code = f" [{code}]" if isinstance(code, str) else ""
            print(f"error{code}: {_one_line(exc)}", file=sys.stderr)
            return 2
        print(
            f"error: unexpected {type(exc).__name__}: {_one_line(exc)} (MEDCOPILOT_DEBUG=1 shows where)",
            file=sys.stderr,
        )
        return 1


if __name__ == "__main__":
    sys.exit(main())
