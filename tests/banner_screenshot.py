"""The desktop's patient banner on a PACS study, for docs/gui_patient_banner.png: a phantom MR series with a
(fictitious) patient's headers stored in a private Orthanc, opened by its DICOMweb URL, one question asked of the
scripted model service; then every request that service received is checked to hold none of the banner's text.

    xvfb-run -a python -m tests.banner_screenshot docs
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pydicom

from tests.fake_openai import FakeOpenAI, tool
from tests.study_screenshots import phantom_series

PATIENT = {
    "PatientName": "Marlowe^Edith^Rose", "PatientID": "MRN-4471920", "PatientBirthDate": "19580923",
    "PatientSex": "F", "AccessionNumber": "ACC-2024-88213", "InstitutionName": "Harbour View General Hospital",
    "StudyDescription": "MRI Head with contrast", "StudyDate": "20240611", "FrameOfReferenceUID": "2.25.99887766",
}  # fmt: skip


def patient_series(root: Path) -> tuple[list[pydicom.Dataset], list[float]]:
    """The phantom series with the patient's headers written into every file."""
    folder, ras = phantom_series(root)
    datasets = []
    for path in sorted(folder.iterdir()):
        ds = pydicom.dcmread(path)
        for key, value in PATIENT.items():
            setattr(ds, key, value)
        ds.save_as(path)
        datasets.append(ds)
    return datasets, ras


def main(out: Path) -> int:
    from copilot.gui.app import main as gui_main
    from copilot.pacs.client import PacsClient
    from copilot.pacs.orthanc import LocalOrthanc, missing
    from copilot.panel.banner import study_banner
    from copilot.panel.studies import study_at

    if missing() is not None:
        print(f"no Orthanc here: {missing()}", file=sys.stderr)
        return 2
    tmp = Path(tempfile.mkdtemp())
    os.environ.setdefault("MEDCOPILOT_SESSIONS", str(tmp / "sessions"))
    os.environ["MEDCOPILOT_PACS_CACHE"] = str(tmp / "cache")
    datasets, (r, a, s) = patient_series(tmp)
    with LocalOrthanc() as pacs:
        os.environ["MEDCOPILOT_PACS_USER"], os.environ["MEDCOPILOT_PACS_PASSWORD"] = pacs.user, pacs.password
        PacsClient(pacs.dicomweb).store(datasets, str(datasets[0].StudyInstanceUID))
        url = f"{pacs.dicomweb}/studies/{datasets[0].StudyInstanceUID}"
        fake = FakeOpenAI([
            {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": s})]},
            {"content": f"A round hyperintense focus of about 12 mm.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: {s}\n"
                        f"RAS: [{r}, {a}, {s}] hyperintense focus"},
        ])  # fmt: skip
        try:
            rc = gui_main(url, str(out / "gui_patient_banner.png"), asks=["Is there a focal lesion?"],
                          base_url=fake.base_url, cursor=[r, a, s])  # fmt: skip
        finally:
            fake.stop()
        banner = study_banner(study_at(url))
    shown = [v for v in banner.strings() if v not in ("MR", "female")]  # modality and sex identify nobody
    shown += ["Marlowe", "Edith", "MRN-4471920", "1958-09-23", "19580923", "Harbour View"]
    leaks = [v for body in fake.bodies for v in shown if v.lower() in body.decode("utf-8").lower()]
    print(f"banner: {banner.line}")
    print(f"{len(fake.bodies)} model requests recorded; banner text found in them: {leaks or 'none'}")
    return rc or (1 if leaks or not fake.bodies else 0)


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "docs")))
