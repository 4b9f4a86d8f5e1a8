"""A stored segmentation is looked at: the SEG a session exported read back onto the CT's voxel grid (the same
voxels, its volume and the HU inside), opened over the CT in the desktop (pytest-qt, offscreen) with its segment
listed by name, colour and volume, painted over the slice panes (pixels checked) and switched off again by its
check box, each step traced; a file that is no SEG is refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from copilot.panel.seg_overlay import read_seg
from copilot.panel.studies import open_study, study_for
from copilot.tools.writes import consent


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, int]:
    """A CT series and the SEG of its bright block a session exported: (series folder, SEG file, voxels)."""
    from copilot.pacs.sample import write_ct_series

    root = tmp_path_factory.mktemp("seg")
    write_ct_series(root / "ct")
    session = open_study(study_for(root / "ct"), root / "trace", track="B")
    try:
        vid = session.snapshot()["background_volume"]
        drawn = session.call("segment_threshold", {"volume": vid, "output_segment": "block", "lower": 1100.0,
                                                   "upper": 1e6, "size": 64}, actor="clinician")  # fmt: skip
        assert drawn.ok
        args = {"segment": drawn.result["segment_id"], "output_name": "block_seg"}
        plan = session.plan_write("export_dicom_seg", args, actor="clinician")
        assert plan is not None
        assert session.call("export_dicom_seg", args, actor="clinician", consent=consent(plan, args)).ok
        voxels = int(drawn.result["voxels"])
    finally:
        session.close()
    return root / "ct", root / "trace" / "derived" / "block_seg.dcm", voxels


def test_a_seg_reads_back_onto_the_series_voxels(stored: tuple[Path, Path, int]) -> None:
    from copilot.engine.volume.loading import load_volume

    ct, seg, voxels = stored
    volume = load_volume(ct)
    (segment,) = read_seg(seg, volume)
    assert segment.name == "block" and int(segment.mask.sum()) == voxels
    assert segment.stats["min"] >= 1100.0 and segment.stats["voxels"] == voxels
    spacing = np.linalg.norm(np.asarray(volume.ijk_to_ras)[:3, :3], axis=0)
    assert segment.stats["ml"] == pytest.approx(voxels * float(np.prod(spacing)) / 1000.0)
    assert (np.asarray(volume.data)[segment.mask] >= 1100.0).all()
    with pytest.raises(ValueError, match="not a segmentation"):
        read_seg(next(ct.iterdir()), volume)


@pytest.mark.gui
def test_the_seg_is_painted_over_the_ct_and_switched_off(qtbot: Any, stored: tuple[Path, Path, int], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    from PySide6.QtCore import Qt

    from copilot.gui.app import MainWindow
    from copilot.gui.seg_dock import open_seg
    from tests.test_workstation_gui import _show

    ct, seg, voxels = stored
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(ct) and win.model is not None
    assert open_seg(win, seg) == 1
    row = win.seg_dock.list.item(0)
    assert row.text().startswith("#1 block — ") and f"{voxels} voxels" in row.text()
    mask = win.seg_shown.segments[0].mask
    k, j, i = (float(np.median(a)) for a in np.nonzero(mask))
    volume = win.seg_shown.volume
    centre = (np.asarray(volume.ijk_to_ras) @ [i, j, k, 1.0])[:3]
    assert win.model.jump([round(float(v), 3) for v in centre]).ok
    red = win.panes["red"]

    def colour() -> tuple[int, int, int]:
        frame = red.frame
        x, y = (np.linalg.inv(frame.image_to_ras) @ [*centre, 1.0])[:2]
        red.repaint()
        ratio = red.devicePixelRatioF()
        c = red.grab().toImage().pixelColor(int(x / ratio), int(y / ratio))
        return c.red(), c.green(), c.blue()

    qtbot.waitUntil(lambda: red.frame is not None and red.frame.to_ras(0, 0) is not None, timeout=5000)
    qtbot.wait(200)
    r, g, b = colour()
    assert r > g + 40 and r > b + 40  # the segment's colour over the bright block
    row.setCheckState(Qt.CheckState.Unchecked)  # its check box
    r, g, b = colour()
    assert abs(r - g) < 12 and abs(g - b) < 12  # the CT's grey again
    events = win.model.session.trace_events()
    opened = [e for e in events if e["type"] == "derived_opened"]
    assert opened and opened[0]["modality"] == "SEG" and opened[0]["segments"][0]["voxels"] == voxels
    assert [e["shown"] for e in events if e["type"] == "segment_overlay"] == [False]
    assert open_seg(win, next(ct.iterdir())) == -1 and "not a segmentation" in win.statusBar().currentMessage()


@pytest.mark.gui
def test_the_studys_stored_results_are_offered_under_its_series(qtbot: Any, stored: tuple[Path, Path, int],
                                                                tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    pytest.importorskip("PySide6")
    pytest.importorskip("pytestqt")
    import shutil

    from copilot.gui.app import MainWindow
    from copilot.gui.stored_menu import fill
    from tests.test_workstation_gui import _show

    ct, seg, voxels = stored
    study = tmp_path / "study"
    shutil.copytree(ct, study / "ct")
    (study / "seg").mkdir()
    shutil.copy(seg, study / "seg" / "seg.dcm")  # the SEG stored beside its series
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path / "sessions"))
    win = MainWindow(policies={})
    win.no_dialogs = True
    _show(qtbot, win)
    assert win.open_path(study) and win.model is not None
    actions = fill(win, win.stored_menu)
    assert len(actions) == 1 and actions[0].isEnabled()
    assert actions[0].text().startswith("SEG") and actions[0].text().endswith("over the series shown")
    actions[0].trigger()
    assert win.seg_shown is not None and int(win.seg_shown.segments[0].stats["voxels"]) == voxels
