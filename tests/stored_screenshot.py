"""Stored results looked at, in docs/: a CT series, the SEG and the measurement report a session exported of it,
opened in the desktop — the segment painted over the slice panes with its panel, the report's panel beside it and
its first finding jumped to.

    xvfb-run -a python -m tests.stored_screenshot docs
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from tests.reading_screenshots import _settle, _window


def export_results(root: Path) -> Path:
    """A CT series and the SEG (HU 170–250: the block) and report a session stored of it; the derived folder."""
    from copilot.pacs.sample import write_ct_series
    from copilot.panel.studies import open_study, study_for
    from copilot.tools.writes import consent

    write_ct_series(root / "ct")
    session = open_study(study_for(root / "ct"), root / "trace", track="B")
    try:
        vid = session.snapshot()["background_volume"]
        drawn = session.call("segment_threshold", {"volume": vid, "output_segment": "block", "lower": 170.0,
                                                   "upper": 250.0, "size": 64}, actor="clinician")  # fmt: skip
        c = drawn.result["centroid_ras"]
        session.call("record_point", {"ras": c, "label": "block centre"}, actor="clinician")
        session.call("measure_distance", {"ras_a": [c[0] - 6, c[1], c[2]], "ras_b": [c[0] + 6, c[1], c[2]],
                                          "label": "block width"}, actor="clinician")  # fmt: skip
        for handler, args in (("export_dicom_seg", {"segment": drawn.result["segment_id"], "output_name": "block_seg"}),
                              ("export_evidence_sr", {"output_name": "report", "question": "Is there a bright block?",
                                                      "answer": "Yes, a 12 mm block."})):  # fmt: skip
            plan = session.plan_write(handler, args, actor="clinician")
            assert plan is not None and session.call(handler, args, actor="clinician", consent=consent(plan, args)).ok
    finally:
        session.close()
    return root / "trace" / "derived"


def main(out: Path) -> int:
    from PySide6.QtWidgets import QApplication

    from copilot.gui.report_dock import open_report
    from copilot.gui.seg_dock import open_seg

    app = QApplication.instance() or QApplication(sys.argv)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MEDCOPILOT_SESSIONS"] = str(Path(tmp) / "sessions")
        derived = export_results(Path(tmp))
        window = _window(app)
        assert window.open_path(Path(tmp) / "ct")  # type: ignore[attr-defined]
        window.set_layout("three_up")  # type: ignore[attr-defined]
        assert open_seg(window, derived / "block_seg.dcm") == 1
        assert open_report(window, derived / "report.dcm") > 0
        window.report_dock.go(0)  # type: ignore[attr-defined]
        _settle(app, 1.2)
        window.grab().save(str(out / "gui_stored_results.png"), None, 0)  # type: ignore[attr-defined]
        window.close()  # type: ignore[attr-defined]
    print(out / "gui_stored_results.png")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
