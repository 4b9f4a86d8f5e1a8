"""The failure taxonomy on scripted episodes of one brain case (seed 6, 2 mm voxels, lesion centre RAS
[48, 38, -14]): each script commits exactly one failure and is labelled with exactly that one; the clean
script is labelled with none. The opening views are S 21, R -1, A -19 (the system's `open_case`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from copilot.bench.measures.failures import (
    Quantity,
    detect_drift,
    detect_misbinding,
    rationale,
    stated_quantities,
    supported,
)
from copilot.medflow.bench_run import run_batch

LESION = [48, 38, -14]
SHOW_LESION = [
    {"handler": "set_slice_offset", "args": {"view": "red", "offset": -14}},
    {"handler": "set_slice_offset", "args": {"view": "yellow", "offset": 48}},
    {"handler": "set_slice_offset", "args": {"view": "green", "offset": 38}},
    {"handler": "record_point", "args": {"ras": LESION, "label": "lesion"}},
]
MEASURE = [{"handler": "measure_distance", "args": {"ras_a": [38, 38, -14], "ras_b": [58, 38, -14]}}]  # 20 mm


def evidence(ras: list[int], axial: int = -14, sagittal: int = 48, coronal: int = 38) -> str:
    return (
        f"EVIDENCE:\nKEY_SLICE_AXIAL_MM: {axial}\nKEY_SLICE_SAGITTAL_MM: {sagittal}\n"
        f"KEY_SLICE_CORONAL_MM: {coronal}\nRAS: [{ras[0]}, {ras[1]}, {ras[2]}]\n"
    )


SCRIPTS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "clean": (
        SHOW_LESION + MEASURE,
        "An enhancing lesion in the right hemisphere, measuring 20 mm across on the axial view.\n"
        + evidence(LESION)
        + "ANSWER: A",
    ),
    "f2_unmeasured_diameter": (
        SHOW_LESION,
        "An enhancing lesion in the right hemisphere with a diameter of 25 mm.\n" + evidence(LESION) + "ANSWER: A",
    ),
    "f4_recorded_then_elsewhere": (
        [*SHOW_LESION, {"handler": "record_point", "args": {"ras": [-30, 38, -14], "label": "other"}}],
        "An enhancing lesion.\n" + evidence([-30, 38, -14], sagittal=-30) + "ANSWER: A",
    ),
    "f1_wrong_structure": (
        SHOW_LESION,
        "The left lateral ventricle is enlarged and the choroid plexus is prominent.\n"
        + evidence(LESION)
        + "ANSWER: C",
    ),
    "f5_never_shown": (
        [{"handler": "observe", "args": {}}],
        "An enhancing lesion in the right hemisphere.\n" + evidence(LESION) + "ANSWER: A",
    ),
}
EXPECTED = {
    "clean": [],
    "f2_unmeasured_diameter": ["F2"],
    "f4_recorded_then_elsewhere": ["F4"],
    "f1_wrong_structure": ["F1"],
    "f5_never_shown": ["F5"],
}


@pytest.fixture(scope="module")
def rows(brain_case: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("failures")
    out = {}
    for name, (calls, answer) in SCRIPTS.items():
        script = tmp / f"{name}.json"
        script.write_text(json.dumps({"calls": calls, "answer": answer}))
        (row,) = run_batch(brain_case, f"scripted:{script}", tmp / "run", progress=None, model=name)
        out[name] = row
    out["_run"] = {"dir": str(tmp / "run")}
    return out


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_each_script_has_exactly_its_failure(rows: dict[str, dict[str, Any]], name: str) -> None:
    row = rows[name]
    assert row["status"] == "done" and row["parse_error"] is None
    labels = row["process"]["failures"]
    assert [f["code"] for f in labels] == EXPECTED[name], labels
    for f in labels:
        assert f["events"], "every label cites its supporting trace events"


def test_supporting_events(rows: dict[str, dict[str, Any]]) -> None:
    """F4 cites the recording inside the lesion and the answer; F2 has no measurement call to cite."""
    (f4,) = rows["f4_recorded_then_elsewhere"]["process"]["failures"]
    trace = Path(rows["f4_recorded_then_elsewhere"]["trace_dir"])
    assert len(f4["events"]) == 2 and "recorded in the lesion" in f4["detail"]
    assert rows["f4_recorded_then_elsewhere"]["process"]["r6"]["C"] == 0.5  # the answer conflicts with the recording
    assert f4["events"][0] < f4["events"][1]  # the recording, then the episode's end
    (f2,) = rows["f2_unmeasured_diameter"]["process"]["failures"]
    assert "25 mm" in f2["detail"] and "no measurement call" in f2["detail"]
    assert len(f2["events"]) == 1 and trace.parts[0] == "episodes"
    assert rows["clean"]["strict"] == 1.0  # the clean script is also correct
    assert rows["f5_never_shown"]["strict"] == 1.0  # right coordinates never looked at: Strict passes, F5 does not


def test_quantities_and_tolerance() -> None:
    """25 mm diameter is a size; 'slice at S 10 mm' is a position; 2.1 × 1.8 cm states 21 and 18 mm.
    A 20 mm claim is supported by a 20.9 mm measurement (|20 − 20.9| = 0.9 ≤ max(1, 2.09)); 25 mm is not
    (|25 − 20.9| = 4.1 > 2.09); a 12 ml volume is supported by 11 500 mm³ (|12 000 − 11 500| = 500 ≤ 1 150)."""
    qs = stated_quantities("The lesion has a diameter of 25 mm. Seen on the slice at S 10 mm, size 2.1 x 1.8 cm.")
    assert [(q.kind, round(q.value, 3)) for q in qs] == [("length", 25.0), ("length", 21.0), ("length", 18.0)]
    loose = stated_quantities("A 12 mm enhancing lesion, approximately 3 cm of oedema. The cursor is on 40 mm.")
    assert [q.value for q in loose] == [12.0, 30.0]  # '40 mm' names no size: a position
    measured = [("length", 20.9, 7), ("volume", 11500.0, 9)]
    assert supported(Quantity("length", 20.0, "20 mm"), measured) == 7
    assert supported(Quantity("length", 25.0, "25 mm"), measured) is None
    assert supported(Quantity("volume", 12000.0, "12 ml"), measured) == 9
    assert "KEY_SLICE" not in rationale("Text.\nKEY_SLICE_AXIAL_MM: 4\nRAS: [1, 2, 3]\nANSWER: A")
    answer = '{"wsi_label": "IC", "localizations": [[256, 192], [10, 20]], "brief_rationale": "a 2 mm focus"}'
    assert rationale(answer) == '{"wsi_label": "IC", , "brief_rationale": "a 2 mm focus"}'


def test_state_fault_is_misbinding() -> None:
    """A stale_view fault on an agent call is F3 with that call's seq; unobserved_evidence is not F3."""
    faults = [{"seq": 4, "code": "stale_view", "detail": ""}, {"seq": 5, "code": "unobserved_evidence", "detail": ""}]
    f3 = detect_misbinding(faults)
    assert f3 is not None and f3.events == [4] and "stale_view" in f3.detail


def test_json_and_html_reports(rows: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]) -> None:
    """`bench report RUN --format json` carries each episode's stages, labels, checkpoints, claim violations
    and dimensions, and per model the failure counts; report.html and the episode pages show them."""
    from copilot.cli import main

    run = Path(rows["_run"]["dir"])
    assert main(["bench", "report", str(run), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    episodes = {e["model"]: e for e in data["episodes"]}
    assert [f["code"] for f in episodes["f2_unmeasured_diameter"]["failures"]] == ["F2"]
    clean = episodes["clean"]
    assert clean["stages"][-1] == "diagnose" and "act" in clean["stage_path"]
    assert clean["checkpoints"]["formal_pass"] and clean["claim_violations"] == []
    assert set(clean["dimensions"]) == set("FREWAVB") and clean["dimensions"]["E"] == 1.0
    models = {m["config"]["model"]: m for m in data["models"].values()}  # one configuration per scripted model
    assert models["f4_recorded_then_elsewhere"]["failures"]["F4"] == 1
    assert models["clean"]["failures_by_module"]["brain_mri"]["F1"] == 0
    assert main(["bench", "report", str(run), "--pages"]) == 0
    report = (run / "report.html").read_text()
    assert 'id="process-measures"' in report and "<th>F2</th>" in report
    assert "Failure labels per configuration and module" in report
    page = (run / episodes["f1_wrong_structure"]["trace_dir"] / "episode.html").read_text()
    assert "<h2>Failure labels</h2>" in page and "objective drift" in page


def test_intra_timepoint_registration_is_drift() -> None:
    """A cross-time-point question (frames OLD and CURRENT): registering OLD_FLAIR to OLD_CT1 (seq 7) is drift
    into intra-timepoint alignment; registering OLD_CT1 to CURRENT_CT1 (seq 5) is not."""
    frames = {"OLD_CT1": "OLD", "OLD_FLAIR": "OLD", "CURRENT_CT1": "CURRENT"}

    def reg(seq: int, fixed: str, moving: str) -> dict[str, Any]:
        return {"type": "handler_call", "actor": "agent", "seq": seq, "ok": True, "handler": "register_volumes",
                "result": {"provenance": {"fixed": fixed, "moving": moving}}}  # fmt: skip

    cross = reg(5, "CURRENT_CT1", "OLD_CT1")
    assert detect_drift([cross], "longitudinal_mri", "Stable disease.", frames) is None
    f1 = detect_drift([cross, reg(7, "OLD_CT1", "OLD_FLAIR")], "longitudinal_mri", "Stable disease.", frames)
    assert f1 is not None and f1.events == [7] and "within one time point" in f1.detail
