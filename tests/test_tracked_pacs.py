"""A lesion followed across two studies of one patient on a PACS: the baseline session stores its report to the
study's PACS; the follow-up session, opened on the other study from the same PACS (in a folder far from the first
session), reads that report back from the PACS and gives `target 1` the baseline's Tracking UID."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import highdicom as hd
import numpy as np

from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc
from copilot.pacs.sample import write_ct_series
from copilot.panel.studies import open_study, study_at
from copilot.tools.writes import consent
from tests import test_pacs

pacs, pacs_env = test_pacs.pacs, test_pacs.pacs_env  # the suite's private Orthanc and PACS environment


def _upload(server: LocalOrthanc, folder: Path) -> str:
    datasets = write_ct_series(folder, 4)
    PacsClient(server.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
    return str(datasets[0].StudyInstanceUID)


def _store(session: Any, name: str) -> dict[str, Any]:
    """Record `target 1` at the volume's centre and store the report, as the clinician approving it."""
    vol = session.scene_data()["volume"]
    centre = [round(float(v), 3) for v in vol.ijk_to_ras_point((np.array(vol.data.shape[::-1]) - 1) / 2.0)]
    assert session.call("record_point", {"ras": centre, "label": "target 1"}).ok
    args = {"output_name": name}
    plan = session.plan_write("export_evidence_sr", args, actor="clinician")
    out = session.call("export_evidence_sr", args, actor="clinician", consent=consent(plan, args))
    assert out.ok and out.result["stored_to"] == "pacs", out.error
    return dict(out.result)


def _uid(path: Path) -> str:
    report: Any = hd.sr.srread(path).content
    (group,) = report.get_planar_roi_measurement_groups()
    return str(group.tracking_uid)


def test_the_follow_up_reads_the_baseline_report_from_the_pacs(pacs: LocalOrthanc, tmp_path: Path) -> None:
    baseline, follow_up = _upload(pacs, tmp_path / "ct1"), _upload(pacs, tmp_path / "ct2")
    first = open_study(study_at(f"{pacs.dicomweb}/studies/{baseline}"), tmp_path / "here" / "t1")
    result = _store(first, "baseline_report")
    first.close()
    assert result["lesions"] == [{"identifier": "target 1", "from": "new"}]
    second = open_study(study_at(f"{pacs.dicomweb}/studies/{follow_up}"), tmp_path / "elsewhere" / "t2")
    result = _store(second, "followup_report")
    second.close()
    assert result["lesions"] == [{"identifier": "target 1", "from": "prior report"}] and "problems" not in result
    uids = {_uid(tmp_path / where / "derived" / f"{name}.dcm")
            for where, name in (("here/t1", "baseline_report"), ("elsewhere/t2", "followup_report"))}  # fmt: skip
    assert len(uids) == 1
