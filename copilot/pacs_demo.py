"""The demo's PACS step (when Orthanc is installed): a private Orthanc, a CT study stored into it, found by
search, opened by its URL, a key slice, two points and a distance recorded, and the evidence report and a
segmentation stored back by STOW-RS."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np

from copilot.cases.pack import CasePack
from copilot.pacs.client import PacsClient
from copilot.pacs.fetch import local_study, with_origin
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.sample import SAMPLE_PATIENT, write_ct_series
from copilot.pacs.store import stored_manifest
from copilot.runtime import open_session


def run_pacs_demo(out: Path) -> bool:
    """Run the step, printing what happens; False when a call failed (skipped: True, with the reason)."""
    reason = missing()
    if reason is not None:
        print(f"PACS step skipped: {reason}")
        return True
    names = ("MEDCOPILOT_PACS_USER", "MEDCOPILOT_PACS_PASSWORD", "MEDCOPILOT_PACS_CACHE")
    saved = {k: os.environ.get(k) for k in names}
    with tempfile.TemporaryDirectory(prefix="medcopilot-demo-") as tmp, LocalOrthanc() as pacs:
        os.environ.update(
            MEDCOPILOT_PACS_USER=pacs.user, MEDCOPILOT_PACS_PASSWORD=pacs.password, MEDCOPILOT_PACS_CACHE=tmp + "/cache"
        )
        try:
            return _step(pacs, Path(tmp), out)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def _step(pacs: LocalOrthanc, tmp: Path, out: Path) -> bool:
    datasets = write_ct_series(tmp / "ct")
    client = PacsClient(pacs.dicomweb)
    client.store(datasets, datasets[0].StudyInstanceUID)
    print(f"PACS: a private Orthanc at {pacs.dicomweb}; {len(datasets)} CT images stored")
    (study,) = client.search(patient_id=SAMPLE_PATIENT["PatientID"])
    url = study["series"][0]["url"]
    print(f"  search found {study['url']}\n  opening {url}")
    local = local_study(url)
    case = with_origin(CasePack(local.path, "pacs-demo", "", {"volumes": ["."]}), local.origin)
    # the demo's own private Orthanc is named as the one destination its scripted exports may write to
    session = open_session(case, track="B", trace_dir=out / "pacs-trace", allow_store=(pacs.dicomweb,))
    vol = session.scene_data()["volume"]  # type: ignore[index]
    a, b = ((vol.ijk_to_ras @ np.array([i, j, 4.0, 1.0]))[:3].tolist() for i, j in ((55.0, 45.0), (90.0, 70.0)))
    calls = [
        ("record_key_slice", {"view": "red", "label": "block"}),
        ("record_point", {"ras": a, "label": "block edge"}),
        ("record_point", {"ras": b, "label": "beside"}),
        ("measure_distance", {"ras_a": a, "ras_b": b, "label": "span"}),
        ("segment_threshold", {"volume": vol.name, "output_segment": "block", "lower": 1100, "upper": 5000}),
        ("export_evidence_sr", {"output_name": "evidence_report"}),
        ("export_dicom_seg", {"segment": "block", "output_name": "block_seg"}),
    ]
    ok = True
    for name, args in calls:
        outcome = session.call(name, args, actor="agent")
        ok = ok and outcome.ok
        print(f"  {name:<20} {'ok' if outcome.ok else 'refused: ' + str(outcome.error)}")
    session.close({"status": "completed"})
    for item in stored_manifest(out / "pacs-trace" / "derived"):
        print(f"  stored {item['file']} → {item['url']}")
    print(f"  trace written to {out / 'pacs-trace'}")
    return ok
