"""A stored measurement report is looked at: the SR a session exported (a point, a distance, a key slice, the
question and answer) read back as a list of findings at their RAS places, shown as a panel beside the study in the
desktop (pytest-qt, offscreen), each finding jumped to by a click — the clinician's traced jump — and a file that
is no report refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from copilot.panel.sr_view import report_items
from copilot.panel.studies import open_study, study_for
from copilot.tools.writes import consent


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[float]]:
    """A CT series, and the report a session on it exported: (series folder, report file, the point recorded)."""
    from copilot.pacs.sample import write_ct_series

    root = tmp_path_factory.mktemp("sr")
    write_ct_series(root / "ct")
    session = open_study(study_for(root / "ct"), root / "trace")
    try:
        c = [float(v) for v in session.snapshot()["views"]["red"]["center_ras"]]
        point = [c[0] + 4.0, c[1] - 6.0, 17.5]
        assert session.call("record_point", {"ras": point, "label": "block centre"}, actor="clinician").ok
        ends = {"ras_a": [c[0] - 10, c[1], 12.5], "ras_b": [c[0] + 10, c[1], 12.5], "label": "width"}
        assert session.call("measure_distance", ends, actor="clinician").ok
        assert session.call("record_key_slice", {"view": "red", "offset": 22.5, "label": "key"}, actor="clinician").ok
        args = {"output_name": "report", "question": "Where is it?", "answer": "A bright block."}
        plan = session.plan_write("export_evidence_sr", args, actor="clinician")
        assert plan is not None
        assert session.call("export_evidence_sr", args, actor="clinician", consent=consent(plan, args)).ok
    finally:
        session.close()
    return root / "ct", root / "trace" / "derived" / "report.dcm", point


def test_a_report_reads_back_as_findings_at_their_places(stored: tuple[Path, Path, list[float]]) -> None:
    _, report, point = stored
    items = report_items(report)
    assert [i.kind for i in items] == ["point", "distance", "key_slice", "text", "text"]
    assert items[0].text.startswith("point: block centre") and items[0].ras == pytest.approx(point, abs=1e-4)
    assert items[1].text == "distance: width  Length 20 mm" and items[1].ras[2] == pytest.approx(12.5)
    assert items[2].ras is not None and items[2].ras[2] == pytest.approx(22.5)  # the key slice's image
    assert [i.text for i in items[3:]] == ["Request: Where is it?", "Finding: A bright block."]


def test_a_file_that_is_no_report_is_refused_by_name(stored: tuple[Path, Path, list[float]], tmp_path: Path) -> None:
    ct, _, _ = stored
    with pytest.raises(ValueError, match="not a structured report"):
        report_items(next(ct.iterdir()))
    (tmp_path / "x.dcm").write_bytes(b"not dicom")
    with pytest.raises(ValueError, match="not a DICOM file"):
        report_items(tmp_path / "x.dcm")


@pytest.mark.gui
def test_the_report_panel_jumps_to_each_finding(qtbot: Any, stored: tuple[Path, Path, list[float]], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    from PySide6.QtCore import Qt

    from copilot.gui.app import MainWindow
    from copilot.gui.report_dock import open_report
    from tests.test_workstation_gui import _show

    ct, report, point = stored
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(ct) and win.model is not None
    assert open_report(win, report) == 5
    dock = win.report_dock
    assert dock.isVisible() and dock.list.count() == 5
    def click(row: int) -> dict[str, Any]:
        rect = dock.list.visualItemRect(dock.list.item(row))
        qtbot.mouseClick(dock.list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        return {n: v["offset"] for n, v in win.model.session.snapshot()["views"].items()}

    at = click(0)  # the point: every plane through it
    assert (at["yellow"], at["green"], at["red"]) == pytest.approx(tuple(point), abs=1e-3)
    assert click(2)["red"] == pytest.approx(22.5, abs=1e-3)  # the key slice
    assert click(1)["red"] == pytest.approx(12.5, abs=1e-3)  # the distance's first end
    before = click(3)  # the text: nowhere to go
    assert before["red"] == pytest.approx(12.5, abs=1e-3)
    calls = [e for e in win.model.timeline if e.actor == "clinician" and e.handler in ("jump", "set_slice_offset")]
    assert calls  # the clinician's own audited moves
    trace = win.model.session.trace_events()
    assert [e["items"] for e in trace if e["type"] == "derived_opened"] == [5]
    assert open_report(win, next(ct.iterdir())) == -1 and "not a structured report" in win.statusBar().currentMessage()
