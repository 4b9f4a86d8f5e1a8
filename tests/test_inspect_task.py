"""MedFlow-Bench as an Inspect AI task, offline with Inspect's mock model: `medcopilot/medflow` found through its
entry point, a brain MRI and a breast slide case run as samples through the audited handlers (views returned as
images, one tool per round on slides, the budget as the round limit), the log's scores equal to `bench score` on
the same answers, the log as `results.sqlite` rows with Table 1 drawn from them and back as `.eval` logs, and an
export refused by the task's approval policy (traced, nothing written)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.tables.paper import table1, table2
from copilot.bench.tables.render import to_markdown
from copilot.cli import main
from copilot.medflow import make_cases
from copilot.medflow.runs import read_results
from copilot.replay import replay
from tests.oracle import evidence_block, perfect_evidence

SLIDE_ANSWER = ('{"selected_option": "G", "wsi_label": "IC", "confidence": 0.4, "brief_rationale": "nests", '
                '"localizations": [{"x": 300, "y": 200}]}')  # fmt: skip


def _reply(calls: list[tuple[str, dict[str, Any]]] | None = None, text: str = "") -> Any:
    """A mock model turn (with its token usage: the mock's own counting would fetch a tokenizer)."""
    from inspect_ai.model import ChatCompletionChoice, ChatMessageAssistant, ModelOutput, ModelUsage
    from inspect_ai.tool import ToolCall

    usage = ModelUsage(input_tokens=1200, output_tokens=40, total_tokens=1240)
    tool_calls = [ToolCall(id=f"call_{n}", function=f, arguments=a) for n, (f, a) in enumerate(calls or [])]
    message = ChatMessageAssistant(content=text, tool_calls=tool_calls or None, model="model")
    stop = "tool_calls" if tool_calls else "stop"
    return ModelOutput(model="model", choices=[ChatCompletionChoice(message=message, stop_reason=stop)], usage=usage)


def _script(steps: list[Any]) -> Any:
    """The mock model's answers, one per request of a sample, in order (the sample's assistant turns count); a
    request without tools (the budget spent) gets the last, the answer."""

    def answer(messages: list[Any], tools: list[Any], tool_choice: Any, config: Any) -> Any:
        return steps[min(sum(m.role == "assistant" for m in messages), len(steps) - 1) if tools else -1]

    return answer


def _eval(module: str, cases: Path, run_dir: Path, logs: Path, steps: list[Any], **args: Any) -> Any:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    model = get_model("mockllm/model", custom_outputs=_script(steps))
    task_args = {"module": module, "cases": str(cases), "run_dir": str(run_dir), "budget": 20, **args}
    (log,) = inspect_eval("medcopilot/medflow", task_args=task_args, model=model, log_dir=str(logs), display="none")
    assert log.status == "success", log.error
    return log


@pytest.fixture(scope="module", autouse=True)
def _root_logging_kept() -> Any:
    """Inspect installs its log handler on the root logger; the tests after these find logging as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(handler)
    root.setLevel(level)


@pytest.fixture(scope="module")
def runs(brain_case: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One eval of each module: brain (two rounds, the perfect answer) and breast (two calls in one round)."""
    pytest.importorskip("inspect_ai")  # the `inspect` extra (imported here, not when the suite is collected)
    tmp = tmp_path_factory.mktemp("inspect")
    slides = tmp / "slides"
    make_cases("breast_wsi", 1, 1, slides, slide_size=(1024, 768), mpp=2.0)
    slices, ras = perfect_evidence(brain_case)
    brain_answer = f"The rim enhances.\n{evidence_block(slices, ras)}ANSWER: A"
    brain = _eval("brain_mri", brain_case.parent, tmp / "run", tmp / "logs", [
        _reply([("set_slice_offset", {"view": "red", "offset": slices["S"], "size": 96})]),
        _reply([("jump", {"ras": list(ras), "size": 96})]),
        _reply(text=brain_answer),
    ])  # fmt: skip
    slide = _eval("breast_wsi", slides, tmp / "run", tmp / "logs", [
        _reply([("zoom", {"direction": "in", "amount": 2}), ("pan", {"direction": "left"})]),
        _reply(text=SLIDE_ANSWER),
    ])  # fmt: skip
    return {"tmp": tmp, "brain": brain, "slide": slide, "cases": {"brain_mri": brain_case.parent, "breast_wsi": slides},
            "answers": {"brain_mri": brain_answer, "breast_wsi": SLIDE_ANSWER}}  # fmt: skip


def test_samples_run_through_the_audited_handlers(runs: dict[str, Any]) -> None:
    from inspect_ai.log import resolve_sample_attachments
    from inspect_ai.model import ContentImage, ContentText

    (brain,) = (resolve_sample_attachments(s) for s in runs["brain"].samples)
    assert runs["brain"].eval.task == "medcopilot/medflow"
    tool_messages = [m for m in brain.messages if m.role == "tool"]
    assert len(tool_messages) == 2 and all(json.loads(m.content[0].text)["ok"] for m in tool_messages)
    assert all(isinstance(c, ContentImage) and c.image.startswith("data:image/png;base64,")
               for m in tool_messages for c in m.content[1:])  # fmt: skip
    opening = brain.messages[1].content
    assert "Scene inventory:" in opening[0].text and sum(isinstance(c, ContentImage) for c in opening) == 3
    row = brain.scores["medflow"].metadata
    trace = runs["tmp"] / "run" / row["trace_dir"] / "trace.jsonl"
    events = [json.loads(line) for line in trace.read_text().splitlines()]
    calls = [e for e in events if e.get("actor") == "agent"]
    assert [(e["handler"], e["tool_call_id"]) for e in calls] == [("set_slice_offset", "call_0"), ("jump", "call_0")]
    assert [e["type"] for e in events].count("model_turn") == 3 and events[-1]["type"] == "episode_end"
    assert replay(trace.parent).ok  # every state and image hash of the sample reproduced
    start = next(e for e in events if e["type"] == "agent_start")
    assert (start["provider"], start["model"], start["budget"]) == ("mockllm", "model", 20)
    spans = runs["tmp"] / "spans.json"  # the episode as OpenTelemetry spans, like any other trace
    assert main(["trace", "export-otel", str(trace.parent), "--out", str(spans)]) == 0
    names = [s["name"] for s in json.loads(spans.read_text())["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    assert names.count("chat model") == 3 and "execute_tool jump" in names and names[-1] == "invoke_agent medcopilot"
    assert (row["rounds"], row["status"], row["policy"], row["model"]) == (2, "done", "inspect:mockllm/model", "model")
    (slide,) = runs["slide"].samples
    first_round = [json.loads(m.content[0].text) for m in slide.messages if m.role == "tool"]
    assert first_round[0]["ok"] is True and first_round[1]["error"]["code"] == "one_tool_per_round"
    observation = slide.messages[5]  # after the round's two tool answers: its summaries and screenshot
    assert observation.role == "user" and "direct state summary" in observation.content[0].text.lower()
    assert [type(c) for c in observation.content] == [ContentText, ContentImage]


def test_log_scores_equal_bench_score(runs: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for module in ("brain_mri", "breast_wsi"):
        log = runs["brain" if module == "brain_mri" else "slide"]
        (sample,) = log.samples
        answers = tmp_path / f"{module}.jsonl"
        answers.write_text(json.dumps({"case_id": sample.id, "response": runs["answers"][module]}) + "\n")
        assert main(["bench", "score", "--cases", str(runs["cases"][module]), "--answers", str(answers),
                     "--json"]) == 0  # fmt: skip
        (scored,) = [c for c in json.loads(capsys.readouterr().out)["cases"] if c["case_id"] == sample.id]
        value = sample.scores["medflow"].value
        loc = None if value["loc"] != value["loc"] else value["loc"]  # NaN: not scored
        assert (value["task"], value["strict"], loc) == (scored["task"], scored["strict"], scored["loc"])
    brain = runs["brain"].samples[0].scores["medflow"].value
    assert (brain["task"], brain["strict"], brain["loc"]) == (1.0, 1.0, 1.0)  # the perfect answer scores


def test_logs_become_rows_for_the_tables_and_go_back(runs: dict[str, Any], tmp_path: Path) -> None:
    from copilot.integrations.inspect_rows import log_rows

    logs = [runs["brain"].location, runs["slide"].location]
    run = tmp_path / "run"
    assert main(["bench", "import-eval", *logs, "--out", str(run)]) == 0
    rows = read_results(run / "results.sqlite")
    assert sorted(r["module"] for r in rows) == ["brain_mri", "breast_wsi"]
    assert {(r["model"], r["policy"], r["track"], r["protocol"], r["budget"]) for r in rows} == {
        ("model", "inspect:mockllm/model", "A", "paper", 20)}
    brain = next(r for r in rows if r["module"] == "brain_mri")
    assert (brain["task"], brain["strict"], brain["loc"]) == (1.0, 1.0, 1.0) and brain["process"]["stages"]
    assert (run / brain["trace_dir"] / "trace.jsonl").is_file()  # the task wrote it elsewhere: named absolutely
    t1 = to_markdown(table1(rows))
    line = next(row for row in t1.splitlines() if row.startswith("| model |"))
    assert line.split(" | ")[3:6] == ["1.00 n=1"] * 3  # Brain MRI's Task, Strict and Loc., from the log's rows
    assert "Budget study" not in t1  # the paper's budget: a main row
    assert any(row.startswith("| model |") for row in to_markdown(table2(rows)).splitlines())  # the slide
    out = tmp_path / "back"
    assert main(["bench", "export-eval", str(run), "--out", str(out)]) == 0
    again = sorted((row for p in sorted(out.glob("*.eval")) for row in log_rows(p)), key=lambda r: r["module"])
    keep = [k for k in rows[0] if k != "finished_at"]
    assert [{k: r[k] for k in keep} for r in again] == [{k: r[k] for k in keep} for r in sorted(
        rows, key=lambda r: r["module"])]


def test_an_export_is_refused_by_the_approval_policy(brain_case: Path, runs: dict[str, Any]) -> None:
    from copilot.agent.loop import BUDGET_MESSAGE

    tmp = runs["tmp"]
    log = _eval("brain_mri", brain_case.parent, tmp / "run_b", tmp / "logs_b", [
        _reply([("export_evidence_sr", {"output_name": "findings"})]), _reply([("fit", {})]), _reply(text="ANSWER: A")],
        track="B", protocol="harness", budget=1)  # fmt: skip
    (sample,) = log.samples
    (refused,) = [m for m in sample.messages if m.role == "tool"]
    assert refused.error is not None and "stores nothing" in refused.error.message
    assert sample.messages[-2].text == BUDGET_MESSAGE and sample.output.completion == "ANSWER: A"  # one round
    row = sample.scores["medflow"].metadata
    assert (row["status"], row["rounds"], row["track"], row["ops"]) == ("budget_exhausted", 1, "B", "all")
    folder = tmp / "run_b" / row["trace_dir"]
    events = [json.loads(line) for line in (folder / "trace.jsonl").read_text().splitlines()]
    (write,) = [e for e in events if e["type"] == "write_attempt"]
    assert (write["handler"], write["decision"], write["by"]) == ("export_evidence_sr", "refused",
                                                                  "inspect approval policy")  # fmt: skip
    assert not any(e.get("handler") == "export_evidence_sr" for e in events if e["type"] == "handler_call")
    assert not (folder / "derived").exists()  # nothing written


def test_a_sample_that_fails_is_an_error_row_with_its_trace(brain_case: Path, runs: dict[str, Any]) -> None:
    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from copilot.integrations.inspect_rows import log_rows

    def down(*args: Any) -> Any:
        raise ConnectionError("the model service is down")

    tmp = runs["tmp"]
    args = {"module": "brain_mri", "cases": str(brain_case.parent), "run_dir": str(tmp / "run_e")}
    (log,) = inspect_eval("medcopilot/medflow", task_args=args, model=get_model("mockllm/model", custom_outputs=down),
                          log_dir=str(tmp / "logs_e"), display="none", fail_on_error=False)  # fmt: skip
    (row,) = log_rows(log.location)
    assert (row["status"], row["task"], row["case_id"]) == ("error", 0.0, brain_case.name)
    assert "the model service is down" in row["error"]
    events = [json.loads(line) for line in (tmp / "run_e" / row["trace_dir"] / "trace.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "episode_end" and events[-1]["status"] == "error"  # the trace was closed


def test_a_sample_limit_ends_the_episode_as_a_timeout(brain_case: Path, runs: dict[str, Any]) -> None:
    import time

    from inspect_ai import eval as inspect_eval
    from inspect_ai.model import get_model

    from copilot.integrations.inspect_rows import log_rows

    def slow(*args: Any) -> Any:
        time.sleep(1.2)  # past the sample's time limit
        return _reply([("observe", {"view": "all"})])

    tmp = runs["tmp"]
    args = {"module": "brain_mri", "cases": str(brain_case.parent), "run_dir": str(tmp / "run_t")}
    (log,) = inspect_eval("medcopilot/medflow", task_args=args, model=get_model("mockllm/model", custom_outputs=slow),
                          log_dir=str(tmp / "logs_t"), display="none", time_limit=1)  # fmt: skip
    assert log.samples[0].limit is not None and log.samples[0].limit.type == "time"
    (row,) = log_rows(log.location)
    assert (row["status"], row["task"], row["error"]) == ("timeout", 0.0, "ended by an Inspect sample limit")
    events = [json.loads(line) for line in (tmp / "run_t" / row["trace_dir"] / "trace.jsonl").read_text().splitlines()]
    assert (events[-1]["type"], events[-1]["status"]) == ("episode_end", "timeout")  # scored, and in the means


def test_bad_task_arguments_are_refused(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai")
    from copilot.integrations.inspect_task import medflow_task

    with pytest.raises(ValueError, match="unknown benchmark module"):
        medflow_task(module="nope", run_dir=str(tmp_path))
    with pytest.raises(ValueError, match="track must be A or B"):
        medflow_task(track="C", run_dir=str(tmp_path))
    with pytest.raises(ValueError, match="no brain_mri case packs"):
        medflow_task(cases=str(tmp_path), run_dir=str(tmp_path))
    assert main(["bench", "import-eval", str(tmp_path / "missing.eval"), "--out", str(tmp_path / "run")]) == 2
