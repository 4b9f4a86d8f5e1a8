"""MedFlow-Bench as an Inspect AI task: one sample per case pack of a module, solved by the benchmark's own
protocol and scored by its own scorers.

Each sample is an episode exactly as `bench run` records one: a session with its hash-chained trace in the run
folder's episode layout (`RUN_DIR/episodes/inspect_<model>/<track>[-paper]/b<budget>/r<epoch-1>/<case>/`), the task
prompt and opening observation (scene inventory and baseline views, or the QuPath summaries and screenshot), tool
rounds up to the budget (one tool per round for slides), then, when the budget is spent, one request without tools
for the final answer. Inspect's model sits where the chat agent's model service does: every turn is a `model_turn`
event, every tool call a `handler_call`. The scorer reads the trace back for the evidence's provenance and the
process measures and scores the answer with the module's scorer; its metadata is the episode's result row, so an
`.eval` log converts into `results.sqlite` rows (`copilot.integrations.inspect_rows`).
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any

import anyio
from inspect_ai import Task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, ContentText, execute_tools, get_model
from inspect_ai.scorer import Score, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, TaskState, solver

from copilot.agent.loop import BUDGET_MESSAGE
from copilot.agent.prompts import pathology_round, task_prompt
from copilot.bench.scoring.rules import DEFAULT_RULES, rules_key
from copilot.cases.pack import CasePack, find_cases, load_case
from copilot.integrations.inspect_tools import Episode, approval_policy, enter, handler_tools, image_content, leave
from copilot.kinds import viewer_kind
from copilot.medflow.bench_run import CallBudget
from copilot.medflow.registry import make_case
from copilot.medflow.registry import module as registered
from copilot.medflow.runs import DEFAULTS, KEY, MARKER, PROTOCOLS, clear_trace_dir, episode_dir, relative_to_run
from copilot.runtime import open_session
from copilot.tools.operation_sets import registry_view

SCORER = "medflow"
ANSWER = "medflow_answer"  # the store key of a sample's answer
POLICY_PREFIX = "inspect:"  # result rows name an Inspect model `inspect:PROVIDER/MODEL`


def policy_of(model: str) -> str:
    """The policy of a result row for an Inspect model (`openai/gpt-4o` → `inspect:openai/gpt-4o`)."""
    return POLICY_PREFIX + model


def model_of(model: str) -> str:
    """The model a result row names: the Inspect model without its provider (`openai/gpt-4o` → `gpt-4o`)."""
    return model.split("/", 1)[1] if "/" in model else model


def task_cases(name: str, cases: str, n: int, seed: int, run_dir: Path) -> list[CasePack]:
    """The module's case packs in `cases`, or `n` synthetic ones (made once, with `seed`, under RUN_DIR/cases)."""
    if cases:
        problems: list[str] = []
        found = [c for c in find_cases(cases, problems) if c.module == name]
        if not found:
            raise ValueError(f"no {name} case packs in {cases}" + (f" ({problems[0]})" if problems else ""))
        return found
    if n < 1:
        raise ValueError("n must be at least 1")
    out, made = run_dir / "cases", []
    for i in range(n):
        case_id = f"{name}_{seed:03d}_{i:04d}"
        folder = out / case_id
        made.append(load_case(folder if (folder / "case.json").is_file()
                              else make_case(name, out, case_id, seed * 1000 + i)))  # fmt: skip
    return made


def opening(episode: Episode, case: CasePack, task: str, protocol: str) -> list[Any]:
    """The first user message's content, as the chat agent opens an episode: the task with the scene inventory and
    the baseline views, or (slides) the pathology round's summaries with the screenshot."""
    kind = viewer_kind(case.kind)
    name, args = kind.opening
    shot = episode.session.call(name, args, actor="system")
    if kind.stepwise:
        r = shot.result
        text = pathology_round(task, r.get("direct_state_summary", ""), r.get("gui_state_summary", ""), protocol)
    else:
        lines = ["Scene inventory:"] + [
            f"- {v['name']} (id {v['id']}, {v['modality']}): {v['dimensions'][0]}x{v['dimensions'][1]}x"
            f"{v['dimensions'][2]} voxels, spacing {v['spacing_mm']} mm" for v in shot.result.get("inventory", [])
        ]  # fmt: skip
        text = f"{task}\n\n" + "\n".join(lines) + "\nBaseline axial, sagittal and coronal views follow."
    return [ContentText(text=text), *image_content(shot.images, episode.detail)]


def _open(case: CasePack, cfg: dict[str, Any], model: str, epoch: int) -> tuple[Episode, Path, dict[str, Any]]:
    """The episode's folder (cleared and marked as `bench run` does), session and round budget."""
    run_dir = Path(cfg["run_dir"]).resolve()
    key = {**DEFAULTS, "model": model_of(model), "policy": policy_of(model), "track": cfg["track"], "ops": cfg["ops"],
           "protocol": cfg["protocol"], "budget": cfg["budget"], "backend": cfg["backend"], "repeat": epoch - 1,
           "rules": rules_key(None, cfg["budget"])}  # fmt: skip
    folder = episode_dir(run_dir, key["policy"], key["track"], key["ops"], key["budget"], key["repeat"], case.case_id,
                         key)  # fmt: skip
    clear_trace_dir(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / MARKER).write_text(json.dumps({k: key[k] for k in KEY}), encoding="utf-8")
    session = open_session(case, track=cfg["track"], trace_dir=folder, ops=cfg["ops"] or None, backend=cfg["backend"],
                           protocol=cfg["protocol"])  # fmt: skip
    budgeted = CallBudget(session, cfg["budget"], cfg["protocol"], DEFAULT_RULES.unit_for(cfg["budget"]))
    return Episode(session, budgeted, viewer_kind(case.kind).stepwise), folder, key


async def _turn(episode: Episode, model: Any, messages: list[Any], tools: list[Any], round_no: int) -> Any:
    """One model request, recorded as the chat agent records a turn (no price: Inspect keeps the usage)."""
    t0 = time.perf_counter()
    output = await model.generate(messages, tools=tools)
    u = output.usage
    usage = {"input_tokens": u.input_tokens if u else 0, "output_tokens": u.output_tokens if u else 0,
             "cached_tokens": (u.input_tokens_cache_read or 0) if u else 0,
             "reasoning_tokens": (u.reasoning_tokens or 0) if u else 0}  # fmt: skip
    calls = output.message.tool_calls or []
    episode.note("model_turn", {
        "round": round_no, "latency_ms": round((time.perf_counter() - t0) * 1000.0, 2),
        "usage": {"prompt_tokens": usage["input_tokens"], "completion_tokens": usage["output_tokens"], **usage},
        "cost_usd": None, "content": output.completion or None,
        "tool_calls": [{"id": c.id, "name": c.function, "arguments": json.dumps(c.arguments)} for c in calls],
        "finish_reason": output.stop_reason, "streamed_chunks": 0,
    })  # fmt: skip
    return output


async def _rounds(state: TaskState, episode: Episode, case: CasePack, cfg: dict[str, Any]) -> tuple[str, str, int]:
    """The episode's rounds; returns the answer, the status and the rounds used."""
    model, budget = get_model(), cfg["budget"]
    prompt = task_prompt(case, budget, cfg["protocol"])
    episode.session.note("task_prompt", {"system": prompt.system, "user": prompt.user})
    provider, _, name = str(model).partition("/")  # Inspect's PROVIDER/MODEL, as the model services name them
    digest = hashlib.sha256((prompt.system + prompt.user).encode()).hexdigest()
    episode.note("agent_start", {"provider": provider, "model": name or provider, "wire": "inspect",
                                 "base_url": None, "budget": budget, "prompt_sha256": digest})  # fmt: skip
    first = await anyio.to_thread.run_sync(lambda: opening(episode, case, prompt.user, cfg["protocol"]))
    state.messages = [ChatMessageSystem(content=prompt.system), ChatMessageUser(content=first)]
    tools = handler_tools(episode.session.registry.specs(episode.session.track))
    rounds, status = 0, "done"
    while True:
        output = await _turn(episode, model, state.messages, tools, rounds + 1)
        if not output.message.tool_calls:
            state.messages.append(output.message)
            state.output = output
            return output.completion, status, rounds
        if rounds >= budget:
            break
        state.messages.append(output.message)
        rounds += 1
        episode.new_round([(c.function, c.id) for c in output.message.tool_calls])
        result = await execute_tools(state.messages, tools)
        state.messages.extend(result.messages)
        if episode.stepwise:
            state.messages.append(await anyio.to_thread.run_sync(lambda: _round_view(episode, prompt.user, cfg)))
        if rounds >= budget:
            break
    content = output.completion
    state.messages.append(ChatMessageUser(content=BUDGET_MESSAGE))
    output = await _turn(episode, model, state.messages, [], rounds + 1)
    state.messages.append(output.message)
    state.output = output
    return output.completion or content, "budget_exhausted", rounds


def _round_view(episode: Episode, task: str, cfg: dict[str, Any]) -> ChatMessageUser:
    """A pathology round's observation: the summaries of its last call (or of the viewer) and its last image."""
    last, images = episode.last, list(episode.round_images)
    summary = last.result if last is not None and "direct_state_summary" in last.result else None
    if summary is None or not images:
        shot = episode.session.call("focus_qupath", {}, actor="system")
        summary, images = shot.result, images or shot.images
    text = pathology_round(task, summary.get("direct_state_summary", ""), summary.get("gui_state_summary", ""),
                           cfg["protocol"])  # fmt: skip
    return ChatMessageUser(content=[ContentText(text=text), *image_content(images[-1:], episode.detail)])


@solver(name="medflow_agent")
def medflow_agent(
    track: str, protocol: str, budget: int, run_dir: str, ops: str = "", backend: str = "embedded"
) -> Any:
    """The benchmark's episode protocol around Inspect's model; the trace is closed with the answer and status."""
    cfg = {"track": track, "protocol": protocol, "budget": budget, "run_dir": run_dir, "ops": ops, "backend": backend}

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        case = load_case(state.metadata["case_dir"])
        episode, folder, key = await anyio.to_thread.run_sync(lambda: _open(case, cfg, str(state.model), state.epoch))
        token = enter(episode)
        t0, answer, status, rounds, error = time.time(), "", "error", 0, None
        try:
            answer, status, rounds = await _rounds(state, episode, case, cfg)
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        except BaseException:  # cancelled by Inspect: a sample limit (time, working time) ended the episode
            status, error = "timeout", "ended by an Inspect sample limit"
            raise
        finally:
            leave(token)
            final = {"status": status, "response": answer, "error": error}
            episode.session.note("final_answer", {"content": answer, "status": status, "rounds": rounds})
            episode.session.close(final)  # here, not in a worker thread: a cancelled sample (a time limit) ends it too
            (folder / "answer.txt").write_text(answer, encoding="utf-8")
            state.store.set(ANSWER, answer)  # the episode's answer (an empty last turn keeps the one before)
            state.store.set("medflow", {**key, "status": status, "rounds": rounds, "error": error,
                                        "trace_dir": relative_to_run(folder, Path(run_dir).resolve()),
                                        "duration_s": round(time.time() - t0, 3)})  # fmt: skip
        return state

    return solve


def _score(state: TaskState, run_dir: str) -> Score:
    from copilot.bench.measures.process import episode_metrics, evidence_provenance
    from copilot.medflow.registry import score_case
    from copilot.replay import read_events

    case = load_case(state.metadata["case_dir"])
    row: dict[str, Any] = dict(state.store.get("medflow") or {})
    response = str(state.store.get(ANSWER, state.output.completion if state.output else ""))
    events = None
    if row.get("trace_dir"):
        events, _broken = read_events(Path(run_dir).resolve() / row["trace_dir"])
    provenance = evidence_provenance(events, response) if events is not None else None
    s = score_case(case, response, provenance)
    process = episode_metrics(events, case, s, int(row.get("budget", 20))) if events is not None else {}
    value = {"task": s.task, "strict": s.strict, "loc": s.loc if s.loc is not None else math.nan}  # NaN: not scored
    meta = {**row, "case_id": case.case_id, "module": case.module, "parse_error": s.parse_error, "details": s.details,
            "process": process, "finished_at": time.time()}  # fmt: skip
    return Score(value=value, answer=response, explanation=s.parse_error, metadata=meta)


@scorer(metrics=[{k: [mean(), stderr()] for k in ("task", "strict", "loc")}], name=SCORER)
def medflow_scorer(run_dir: str) -> Any:
    """Task, Strict and Loc (where the module scores it) by the module's scorer, the provenance of the evidence and
    the process measures read from the episode's trace; the metadata is the episode's result row."""

    async def score(state: TaskState, target: Target) -> Score:
        return await anyio.to_thread.run_sync(lambda: _score(state, run_dir))

    return score


def medflow_task(
    module: str = "brain_mri", track: str = "A", protocol: str = "paper", budget: int = 20, cases: str = "",
    n: int = 1, seed: int = 0, run_dir: str = "medflow-run", ops: str = "", backend: str = "embedded",
) -> Task:  # fmt: skip
    """The task of one module's cases (see `medcopilot.tasks.medflow`); bad arguments are refused by name."""
    m = registered(module)
    if track not in ("A", "B"):
        raise ValueError(f"track must be A or B (Track C has no tools: bench trackc), got {track!r}")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}; one of {', '.join(PROTOCOLS)}")
    if budget < 1:
        raise ValueError("budget must be at least 1 round")
    ops = ops or ("all" if track == "B" else "")
    root = Path(run_dir).resolve()
    samples = [Sample(id=c.case_id, input=f"MedFlow-Bench {c.module} case {c.case_id}",
                      metadata={"case_dir": str(c.root), "module": c.module, "kind": c.kind})
               for c in task_cases(m.name, cases, n, seed, root)]  # fmt: skip
    kind = viewer_kind(m.kind)
    specs = registry_view(kind.registry, ops or None, protocol).specs(track)
    return Task(
        dataset=MemoryDataset(samples, name=f"medflow_{m.name}"),
        solver=medflow_agent(track, protocol, budget, str(root), ops, backend),
        scorer=medflow_scorer(str(root)),
        approval=approval_policy([s.name for s in specs if s.writes is not None]),
        metadata={"module": m.name, "track": track, "protocol": protocol, "budget": budget, "ops": ops,
                  "backend": backend, "run_dir": str(root)},
    )
