"""Studies from a live PACS and results back to it: a private Orthanc with its DICOMweb plugin on loopback,
a CT series built from pydicom's CT test file uploaded over STOW-RS, searched (QIDO-RS), opened by URL
(WADO-RS), read by a scripted agent, and its evidence report and segmentation stored back and checked."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pydicom
import pytest

from copilot.errors import HandlerError
from copilot.pacs import parse_dicomweb_url
from copilot.pacs.auth import credentials_for, http_session
from copilot.pacs.cache import PacsCache
from copilot.pacs.client import PacsClient
from copilot.pacs.fetch import fetch
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.sample import SAMPLE_PATIENT, write_ct_series
from copilot.pacs.store import stored_manifest
from copilot.panel.studies import open_study, study_at, study_for
from copilot.replay import replay
from copilot.session import Session
from copilot.tools.evidence_sr import ras_to_lps
from copilot.trace.study_ref import study_record

PATIENT_ID, PATIENT_NAME, ACCESSION = (SAMPLE_PATIENT[k] for k in ("PatientID", "PatientName", "AccessionNumber"))
needs_orthanc = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture(scope="module")
def pacs() -> Iterator[LocalOrthanc]:
    if missing() is not None:
        pytest.skip(str(missing()))
    with LocalOrthanc() as server:
        yield server


@pytest.fixture(autouse=True)
def pacs_env(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Credentials of the test PACS from the environment; a private cache and config folder."""
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("MEDCOPILOT_PACS_TOKEN", "MEDCOPILOT_PACS_USER", "MEDCOPILOT_PACS_PASSWORD", "MEDCOPILOT_PACS_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    if "pacs" in request.fixturenames:
        server = request.getfixturevalue("pacs")
        monkeypatch.setenv("MEDCOPILOT_PACS_USER", server.user)
        monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", server.password)


@pytest.fixture(scope="module")
def uploaded(pacs: LocalOrthanc, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[pydicom.Dataset]]:
    folder = tmp_path_factory.mktemp("local") / "ct"
    datasets = write_ct_series(folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEDCOPILOT_PACS_USER", pacs.user)
        mp.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
        stored = PacsClient(pacs.dicomweb).store(datasets, datasets[0].StudyInstanceUID)
    assert len(stored) == len(datasets)
    return folder, datasets


def study_url(pacs: LocalOrthanc, ds: pydicom.Dataset, series: bool = False) -> str:
    tail = f"/series/{ds.SeriesInstanceUID}" if series else ""
    return f"{pacs.dicomweb}/studies/{ds.StudyInstanceUID}{tail}"


def open_url(url: str, trace_dir: Path | None, track: str = "A") -> Session:
    """What `gui`/`serve` do with a URL: retrieve, open like a folder, origin in the trace header."""
    return open_study(study_at(url), trace_dir, track=track)


def volume_of(session: Session) -> Any:
    scene = session.scene_data()
    assert scene
    return scene


# ----- without a PACS -----


def test_urls_are_parsed_and_credentials_refused_in_them() -> None:
    ref = parse_dicomweb_url("HTTPS://pacs.example.org:8443/dicom-web/studies/1.2.3/series/4.5.6/")
    assert (ref.base, ref.study, ref.series) == ("https://pacs.example.org:8443/dicom-web", "1.2.3", "4.5.6")
    assert parse_dicomweb_url("http://h/studies/1.2").base == "http://h"
    for bad, words in [
        ("http://h/dicom-web/series/1.2", "expected"),
        ("http://h/studies/1.2.x", "not a DICOM UID"),
        ("ftp://h/studies/1.2", "not an http"),
        ("https://bob:secret@h/studies/1.2", "not in the URL"),
    ]:
        with pytest.raises(HandlerError, match=words) as err:
            parse_dicomweb_url(bad)
        assert "secret" not in err.value.message


def test_credentials_from_environment_or_config_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = "https://pacs.example.org/dicom-web"
    assert credentials_for(root).scheme == "none"
    config = tmp_path / "config" / "medcopilot" / "pacs.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"servers": [
        {"url": "https://pacs.example.org", "username": "ward", "password": "p1"},
        {"url": "https://pacs.example.org/dicom-web", "token": "tok-123", "ca_bundle": "/etc/ssl/h.pem"},
    ]}))  # fmt: skip
    config.chmod(0o644)  # others may read the passwords: refused with the fix named
    with pytest.raises(HandlerError, match=f"run `chmod 600 {config}`"):
        credentials_for(root)
    config.chmod(0o600)
    creds = credentials_for(root)
    assert (creds.token, creds.ca_bundle) == ("tok-123", "/etc/ssl/h.pem") and "tok-123" not in repr(creds)
    assert credentials_for("https://pacs.example.org/other").username == "ward"  # the longest matching prefix
    session = http_session(root)
    assert session.headers["Authorization"] == "Bearer tok-123" and session.verify == "/etc/ssl/h.pem"
    monkeypatch.setenv("MEDCOPILOT_PACS_USER", "env-user")
    monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", "env-pw")
    env = http_session(root)  # the environment wins; TLS still verified (no CA bundle from the environment)
    assert env.auth == ("env-user", "env-pw") and "Authorization" not in env.headers and env.verify == "/etc/ssl/h.pem"
    monkeypatch.delenv("MEDCOPILOT_PACS_PASSWORD")
    with pytest.raises(HandlerError, match="without a password"):
        credentials_for(root)


def test_cache_is_bounded_and_cleared(tmp_path: Path) -> None:
    from copilot.pacs.cache import write_origin

    cache = PacsCache(tmp_path / "c", max_bytes=2500)
    folders = []
    for n in range(3):
        d = cache.series_dir("http://h/dw", "1.2", f"1.2.{n}")
        d.mkdir(parents=True)
        (d / "00001.dcm").write_bytes(b"\0" * 1000)
        write_origin(d, {"dicomweb": "http://h/dw", "study": "1.2", "series": f"1.2.{n}", "complete": True})
        folders.append(d)
        cache.touch(d)
    assert cache.size() > 2500
    cache.touch(folders[0])  # opened again: now the most recent
    removed = cache.evict(keep=[folders[2]])
    assert removed == [folders[1]] and cache.size() <= 2500
    assert cache.clear() > 0 and cache.size() == 0 and cache.series_dirs() == []


def test_cache_commands(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from copilot.cli import main

    series = tmp_path / "cache" / "a" / "b" / "c"  # MEDCOPILOT_PACS_CACHE of this test
    series.mkdir(parents=True)
    (series / "00001.dcm").write_bytes(b"\0" * 5000)
    (series / "origin.json").write_text('{"dicomweb": "http://h/dw", "complete": true}')
    assert main(["pacs", "cache"]) == 0
    assert f"{tmp_path / 'cache'}: 0.0 MiB of 4096 MiB, 1 series" in capsys.readouterr().out
    assert main(["pacs", "clear"]) == 0 and "cleared" in capsys.readouterr().out
    assert not series.exists() and (tmp_path / "cache").is_dir()


# ----- against the live PACS -----


@needs_orthanc
def test_search_finds_the_uploaded_study(pacs: LocalOrthanc, uploaded: Any, capsys: pytest.CaptureFixture) -> None:
    from copilot.cli import main

    _, datasets = uploaded
    ds = datasets[0]
    found = PacsClient(pacs.dicomweb).search(patient_id=PATIENT_ID, modality="CT", date="20240101-20241231")
    assert [s["uid"] for s in found] == [ds.StudyInstanceUID]
    (series,) = found[0]["series"]
    assert (series["uid"], series["modality"], series["instances"]) == (ds.SeriesInstanceUID, "CT", 8)
    assert PacsClient(pacs.dicomweb).search(patient_id="nobody") == []
    assert PacsClient(pacs.dicomweb).search(modality="MR") == []
    assert main(["pacs", "search", pacs.dicomweb, "--patient-id", PATIENT_ID, "--modality", "CT"]) == 0
    out = capsys.readouterr().out
    assert study_url(pacs, ds) in out and study_url(pacs, ds, series=True) in out and "8 images" in out
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEDCOPILOT_PACS_URL", pacs.dicomweb)
        assert main(["pacs", "search", "--date", "20240611", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["uid"] == ds.StudyInstanceUID
    assert main(["pacs", "search"]) == 2 and "no PACS given" in capsys.readouterr().err


@needs_orthanc
def test_url_opens_the_same_volume_as_the_folder(pacs: LocalOrthanc, uploaded: Any, tmp_path: Path) -> None:
    folder, datasets = uploaded
    local = open_study(study_for(folder), None)
    for series in (False, True):
        url = study_url(pacs, datasets[0], series)
        session = open_url(url, tmp_path / f"trace{series}")
        a, b = volume_of(local), volume_of(session)
        assert a["volume"].dimensions == b["volume"].dimensions == (128, 128, 8)
        assert np.array_equal(a["volume"].data, b["volume"].data)
        assert np.allclose(a["volume"].ijk_to_ras, b["volume"].ijk_to_ras, atol=1e-9)
        session.close()
        header = json.loads((tmp_path / f"trace{series}" / "trace.jsonl").read_text().splitlines()[0])
        assert "case_inputs" not in header and "case_root" not in header and header["study_ref"].startswith("study-")
        origin = study_record(tmp_path / f"trace{series}")["case_inputs"]["origin"]  # the owner-only sidecar
        assert origin["url"] == url and origin["dicomweb"] == pacs.dicomweb
        text = (tmp_path / f"trace{series}" / "trace.jsonl").read_text()
        assert pacs.password not in text and pacs.user not in text  # credentials never traced
        assert replay(tmp_path / f"trace{series}").ok  # re-executed on the cached copy
    cached = PacsCache()
    assert len(cached.series_dirs()) == 1 and cached.root == tmp_path / "cache"  # the series URL reused the copy
    for path in cached.root.rglob("*"):
        assert datasets[0].StudyInstanceUID not in str(path) and "127.0.0.1" not in str(path)


@needs_orthanc
def test_a_series_streams_in_instance_by_instance_and_opens_once_complete(
    pacs: LocalOrthanc, uploaded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from copilot.pacs.progressive import ProgressiveStudy

    folder, datasets = uploaded
    monkeypatch.setenv("MEDCOPILOT_PACS_WORKERS", "4")
    asked: list[str] = []
    plain = PacsClient.retrieve_instance

    def counted(self: PacsClient, study_uid: str, series_uid: str, uid: str, *rest: Any) -> None:
        asked.append(uid)
        plain(self, study_uid, series_uid, uid, *rest)

    monkeypatch.setattr(PacsClient, "retrieve_instance", counted)
    study = ProgressiveStudy(study_url(pacs, datasets[0], series=True)).start()
    session = open_study(study_at(study.wait(30).path), tmp_path / "t")  # what the tools get: the whole series
    assert sorted(asked) == sorted(str(ds.SOPInstanceUID) for ds in datasets)  # one request per instance
    assert study.stack is not None and study.stack.volume is not None and study.stack.count == 8
    assert study.first_slice_s is not None
    expected = np.stack([ds.pixel_array * float(ds.RescaleSlope) + float(ds.RescaleIntercept) for ds in datasets])
    assert np.array_equal(study.stack.volume, expected)  # slices placed in instance order
    local = open_study(study_for(folder), None)
    assert np.array_equal(volume_of(session)["volume"].data, volume_of(local)["volume"].data)
    session.close()


def _dciodvfy_errors(path: Path) -> list[str]:
    if shutil.which("dciodvfy") is None:
        pytest.skip("dciodvfy is not installed (Debian package dicom3tools; `make sysdeps`)")
    run = subprocess.run(["dciodvfy", str(path)], capture_output=True, text=True, timeout=60)
    return [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("Error")]


SCRIPT = [
    ("record_key_slice", {"view": "red", "label": "block"}),
    ("record_point", {"ras": [-10.5, 0.0, 0.0], "label": "block centre"}),
    ("record_point", {"ras": [25.25, 12.0, 0.0], "label": "far corner"}),
    ("measure_distance", {"ras_a": [-10.5, 0.0, 0.0], "ras_b": [25.25, 12.0, 0.0], "label": "span"}),
]


def _shifted(rec_ras: list[float], origin: np.ndarray) -> list[float]:
    return [float(v) for v in np.asarray(rec_ras) + origin]


@needs_orthanc
def test_conversation_evidence_and_segmentation_go_back_to_the_pacs(
    pacs: LocalOrthanc, uploaded: Any, tmp_path: Path
) -> None:
    from copilot.agent.policy import ScriptedPolicy

    _, datasets = uploaded
    source = datasets[0]
    session = open_url(study_url(pacs, source), tmp_path / "trace", track="B")
    session.allow_store = (pacs.dicomweb,)  # a headless run that named this PACS (--allow-store)
    centre = volume_of(session)["volume"].ijk_to_ras @ np.array([64.0, 64.0, 4.0, 1.0])
    script = [(h, {k: _shifted(v, centre[:3]) if k.startswith("ras") else v for k, v in a.items()}) for h, a in SCRIPT]
    script += [
        ("segment_threshold", {"volume": _volume_name(session), "output_segment": "block",
                               "lower": 1100, "upper": 5000}),
        ("export_evidence_sr", {"output_name": "evidence_report"}),
        ("export_dicom_seg", {"segment": "block", "output_name": "block_seg"}),
    ]  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"calls": [{"handler": h, "args": a} for h, a in script], "answer": "done"}))
    ScriptedPolicy(plan).run(session, session.case, budget=20)
    events = [e for e in session.trace_events() if e["type"] == "handler_call"]
    assert [e["handler"] for e in events] == ["open_case"] + [h for h, _ in script]
    failed = [(e["handler"], e.get("error")) for e in events if not e.get("ok")]
    assert failed == []
    evidence = session.evidence()
    points = [r for r in evidence if r["kind"] == "point"]
    distance = next(r for r in evidence if r["kind"] == "distance")
    assert len(points) == 2 and distance["distance_mm"] == pytest.approx(
        float(np.linalg.norm(np.subtract(points[0]["ras"], points[1]["ras"]))), abs=1e-6
    )
    sr_event, seg_event = events[-2], events[-1]
    assert sr_event["result"]["stored_to"] == seg_event["result"]["stored_to"] == "pacs"
    counts = {k: sr_event["result"][k] for k in ("points", "distances", "key_slices", "left_out")}
    assert counts == {"points": 2, "distances": 1, "key_slices": 1, "left_out": 0}

    # retrieved back through DICOMweb
    client = PacsClient(pacs.dicomweb)
    by_modality = {s["modality"]: s for s in client.series(source.StudyInstanceUID)}
    assert set(by_modality) == {"CT", "SR", "SEG"}
    manifest = {m["file"]: m for m in stored_manifest(tmp_path / "trace" / "derived")}
    assert set(manifest) == {"evidence_report.dcm", "block_seg.dcm"}
    back = {}
    for modality, file in (("SR", "evidence_report.dcm"), ("SEG", "block_seg.dcm")):
        (ds,) = list(client.iter_series(source.StudyInstanceUID, by_modality[modality]["uid"]))
        assert manifest[file]["sop_instance_uid"] == ds.SOPInstanceUID
        assert manifest[file]["url"].startswith(pacs.dicomweb + "/studies/")
        path = tmp_path / f"back_{modality}.dcm"
        ds.save_as(path, enforce_file_format=True)
        assert _dciodvfy_errors(path) == [], modality
        back[modality] = ds
    source_uids = {d.SOPInstanceUID for d in datasets}
    from copilot.panel.model import PanelModel

    report = PanelModel(session).export_report(tmp_path / "report.html").read_text()
    assert all(f'href="{m["url"]}"' in report for m in manifest.values())  # the report links the stored instances

    sr = back["SR"]
    assert sr.StudyInstanceUID == source.StudyInstanceUID and sr.PatientID == PATIENT_ID
    evidence_refs = {
        item.ReferencedSOPInstanceUID
        for study in sr.CurrentRequestedProcedureEvidenceSequence
        for series in study.ReferencedSeriesSequence
        for item in series.ReferencedSOPSequence
    }
    assert evidence_refs == source_uids
    sr_points = _scoord3d(sr)
    expected = [np.array(ras_to_lps(p["ras"])) for p in points] + [
        np.array([ras_to_lps(distance["a"]["ras"]), ras_to_lps(distance["b"]["ras"])])
    ]
    assert len(sr_points) == 3
    for got, want in zip(sr_points, expected, strict=True):
        assert np.allclose(got.reshape(want.shape), want, atol=1e-4)  # FL (float32) coordinates
    assert _observer_device(sr) == "MedCopilot"
    length = _numeric(sr)
    assert length == pytest.approx(distance["distance_mm"], abs=1e-4)

    seg = back["SEG"]
    seg_refs = {i.ReferencedSOPInstanceUID for s in seg.ReferencedSeriesSequence for i in s.ReferencedInstanceSequence}
    assert seg_refs <= source_uids and seg_refs and seg.StudyInstanceUID == source.StudyInstanceUID

    # nothing identifying reached the model: every agent-visible result is free of patient and study identifiers
    seen = json.dumps([{k: e.get(k) for k in ("result", "state", "error")} for e in events])
    for ident in (PATIENT_ID, "Testpatient", ACCESSION, source.StudyInstanceUID, "127.0.0.1", pacs.password):
        assert ident not in seen, ident
    session.close()


def _volume_name(session: Session) -> str:
    return str(session.snapshot()["volumes"][0]["name"])


def _walk(items: Any) -> Iterator[pydicom.Dataset]:
    for item in items:
        yield item
        yield from _walk(getattr(item, "ContentSequence", []))


def _scoord3d(sr: pydicom.Dataset) -> list[np.ndarray]:
    return [np.array(i.GraphicData, dtype=float) for i in _walk(sr.ContentSequence) if i.ValueType == "SCOORD3D"]


def _numeric(sr: pydicom.Dataset) -> float:
    (value,) = [
        float(i.MeasuredValueSequence[0].NumericValue)
        for i in _walk(sr.ContentSequence)
        if i.ValueType == "NUM" and i.ConceptNameCodeSequence[0].CodeValue == "410668003"
    ]  # Length
    return value


def _observer_device(sr: pydicom.Dataset) -> str:
    items = [i for i in _walk(sr.ContentSequence) if i.ValueType == "TEXT"]
    names = [i.TextValue for i in items if i.ConceptNameCodeSequence[0].CodeMeaning == "Device Observer Name"]
    return names[0] if names else ""


@needs_orthanc
def test_a_store_the_pacs_refuses_is_a_named_error_that_changes_nothing(
    pacs: LocalOrthanc, uploaded: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, datasets = uploaded
    source = datasets[0]
    session = open_url(study_url(pacs, source, series=True), tmp_path / "trace", track="B")
    session.allow_store = (pacs.dicomweb,)
    centre = volume_of(session)["volume"].ijk_to_ras @ np.array([64.0, 64.0, 4.0, 1.0])
    assert session.call("record_point", {"ras": [float(v) for v in centre[:3]]}).ok
    before_series = {s["uid"] for s in PacsClient(pacs.dicomweb).series(source.StudyInstanceUID)}
    before = session.snapshot()
    monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", "not-the-password")  # the PACS answers 401
    out = session.call("export_evidence_sr", {"output_name": "report"})
    assert not out.ok and out.error["code"] == "pacs_refused" and "HTTP 401" in out.error["message"]
    assert session.snapshot() == before
    assert not (tmp_path / "trace" / "derived" / "report.dcm").exists()
    assert stored_manifest(tmp_path / "trace" / "derived") == []
    monkeypatch.setenv("MEDCOPILOT_PACS_PASSWORD", pacs.password)
    assert {s["uid"] for s in PacsClient(pacs.dicomweb).series(source.StudyInstanceUID)} == before_series
    again = session.call("export_evidence_sr", {"output_name": "report"})  # the same name: nothing was left behind
    assert again.ok and again.result["stored_to"] == "pacs", again.error
    session.close()


@needs_orthanc
def test_a_study_conflict_is_refused_by_the_pacs(pacs: LocalOrthanc, uploaded: Any) -> None:
    _, datasets = uploaded
    other = copy.deepcopy(datasets[0])
    other.StudyInstanceUID, other.SOPInstanceUID = pydicom.uid.generate_uid(), pydicom.uid.generate_uid()
    with pytest.raises(HandlerError) as err:
        PacsClient(pacs.dicomweb).store([other], datasets[0].StudyInstanceUID)
    assert err.value.code == "pacs_refused" and getattr(err.value, "http_status", None) == 409


def test_unreachable_pacs_is_named(tmp_path: Path) -> None:
    from copilot.pacs.orthanc import free_port

    with pytest.raises(HandlerError) as err:
        fetch(f"http://127.0.0.1:{free_port()}/dicom-web/studies/1.2.3", PacsCache(tmp_path / "c"))
    assert err.value.code == "pacs_unreachable"


def write_dicom_wsi(folder: Path, tmp: Path) -> list[pydicom.Dataset]:
    """A three-level DICOM whole-slide series: a tiled TIFF made here, converted by Orthanc's dicomizer.

    Orthanc WSI 1.1 leaves out ImageType and marks every level as a one-instance concatenation; OpenSlide needs
    the one and refuses the other, so both are set right here as a current converter writes them."""
    import tifffile

    image = np.full((1024, 1536, 3), 232, np.uint8)
    image[300:500, 400:700] = (150, 60, 120)
    tifffile.imwrite(tmp / "slide.tif", image, tile=(256, 256), compression="jpeg", photometric="rgb")
    folder.mkdir(parents=True)
    subprocess.run(
        ["OrthancWSIDicomizer", "--folder", str(folder), "--pyramid", "1", "--levels", "3", "--tile-width", "256",
         "--tile-height", "256", str(tmp / "slide.tif")],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    written = []
    for n, path in enumerate(sorted(folder.iterdir())):
        ds = pydicom.dcmread(path)
        ds.ImageType = ["ORIGINAL" if n == 0 else "DERIVED", "PRIMARY", "VOLUME", "NONE" if n == 0 else "RESAMPLED"]
        for keyword in ("ConcatenationUID", "SOPInstanceUIDOfConcatenationSource", "ConcatenationFrameOffsetNumber",
                        "InConcatenationNumber", "InConcatenationTotalNumber"):  # fmt: skip
            if keyword in ds:
                delattr(ds, keyword)
        ds.PatientID, ds.PatientName = PATIENT_ID, PATIENT_NAME
        ds.save_as(path)
        written.append(ds)
    return written


@needs_orthanc
@pytest.mark.skipif(shutil.which("OrthancWSIDicomizer") is None, reason="Debian package orthanc-wsi not installed")
def test_a_dicom_whole_slide_series_opens_in_the_slide_viewer(pacs: LocalOrthanc, tmp_path: Path) -> None:
    datasets = write_dicom_wsi(tmp_path / "wsi", tmp_path)
    ds = datasets[0]
    PacsClient(pacs.dicomweb).store(datasets, ds.StudyInstanceUID)
    local = open_study(study_for(tmp_path / "wsi"), None)
    remote = open_url(study_url(pacs, ds, series=True), tmp_path / "trace")
    assert local.kind == remote.kind == "pathology"
    a, b = local.snapshot(), remote.snapshot()
    assert a["dimensions"] == b["dimensions"] == [1536, 1024] and a["levels"] == b["levels"] == 3
    assert b["image"] == "00001" and ds.StudyInstanceUID not in json.dumps(b)
    from copilot.session import Peek

    pa, pb = local.peek(Peek(size=(200, 150))), remote.peek(Peek(size=(200, 150)))
    assert pa is not None and pb is not None
    ia, ib = np.asarray(pa["viewer"]), np.asarray(pb["viewer"])
    inner = (slice(ia.shape[0] // 4, -ia.shape[0] // 4), slice(ia.shape[1] // 4, -ia.shape[1] // 4))  # no overlays
    assert np.array_equal(ia[inner], ib[inner]) and ia[inner].std() > 5  # the same pixels, not a blank
    remote.close()


@needs_orthanc
def test_the_demo_step_stores_its_report_and_segmentation(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from copilot.pacs_demo import run_pacs_demo

    assert run_pacs_demo(tmp_path)
    out = capsys.readouterr().out
    assert "stored evidence_report.dcm → http://127.0.0.1:" in out and "stored block_seg.dcm → " in out


@needs_orthanc
def test_serve_and_mcp_take_a_url(pacs: LocalOrthanc, uploaded: Any, tmp_path: Path) -> None:
    """The command line turns a URL into a study for the one session factory (every backend and track option)."""
    from copilot.cli import _default_trace_dir, _url_study
    from copilot.runtime import open_session

    _, datasets = uploaded
    url = study_url(pacs, datasets[0], series=True)
    session = open_session(_url_study(url), track="B", trace_dir=tmp_path / "trace")
    assert session.track == "B" and session.case.inputs["origin"]["url"] == url
    assert session.snapshot()["volumes"][0]["name"] == "chest axial"
    session.close()
    assert _default_trace_dir(url).name.startswith("pacs-")  # no UID in a folder name


def test_tls_is_verified_unless_the_ca_is_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PACS with a self-signed certificate is refused (`pacs_tls`); with its CA configured the request goes
    through (this stand-in answers every request with 501, which is the server's own failure)."""
    import http.server
    import ssl
    import threading

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"https://localhost:{server.server_address[1]}/dicom-web/studies/1.2.3"
    try:
        with pytest.raises(HandlerError) as err:
            fetch(url, PacsCache(tmp_path / "c"))
        assert err.value.code == "pacs_tls" and "MEDCOPILOT_PACS_CA_BUNDLE" in err.value.message
        monkeypatch.setenv("MEDCOPILOT_PACS_CA_BUNDLE", str(cert))
        with pytest.raises(HandlerError) as err:
            fetch(url, PacsCache(tmp_path / "c"))
        assert err.value.code == "pacs_failed" and "HTTP 501" in err.value.message  # past TLS: the server answered
    finally:
        server.shutdown()
        server.server_close()


def test_chat_on_a_pacs_study_url(
    pacs: LocalOrthanc, uploaded: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`medcopilot chat URL --ask …`: the study is retrieved from the PACS, the conversation runs on it, its origin
    is in the trace header, and neither the patient nor the PACS (host, UIDs, password) reaches the model."""
    from copilot.cli import main
    from copilot.replay import read_events
    from tests.fake_openai import FakeOpenAI, tool

    _, datasets = uploaded
    ds = datasets[0]
    fake = FakeOpenAI([
        {"tool_calls": [tool("set_slice_offset", {"view": "red", "offset": 15.0})]},
        {"content": "A bright block lies in the slice shown.\nEVIDENCE:\nKEY_SLICE_AXIAL_MM: 15.0"},
    ])  # fmt: skip
    try:
        rc = main(["chat", study_url(pacs, ds), "--ask", "Is there a bright structure?", "--base-url", fake.base_url,
                   "--trace-dir", str(tmp_path / "t")])  # fmt: skip
    finally:
        fake.stop()
    out = capsys.readouterr().out
    assert rc == 0 and "answer: A bright block" in out and "key_slice" in out
    events, failure = read_events(tmp_path / "t")
    assert failure is None and "case_inputs" not in events[0]  # the trace names the study by reference only
    assert study_record(tmp_path / "t")["case_inputs"]["origin"]["study"] == ds.StudyInstanceUID
    secrets = [*SAMPLE_PATIENT.values(), ds.StudyInstanceUID, ds.SeriesInstanceUID, pacs.password,
               pacs.dicomweb.split("//")[1].split("/")[0]]  # fmt: skip
    assert len(fake.bodies) == 2
    for body in fake.bodies:
        text = body.decode("utf-8")
        assert not [s for s in secrets if s and str(s) in text]


@needs_orthanc
def test_a_search_says_what_it_hides_and_pages_through_it(pacs: LocalOrthanc, capsys: pytest.CaptureFixture) -> None:
    """52 matching studies: the first page of 50 says so, the next page holds the other 2, all 52 are found;
    and a search by name (QIDO wildcards), accession number, description and date (either format) finds one."""
    from pydicom.data import get_testdata_file

    from copilot.cli import main

    base = pydicom.dcmread(str(get_testdata_file("CT_small.dcm")))
    client = PacsClient(pacs.dicomweb)
    uids = []
    for n in range(52):
        ds = copy.deepcopy(base)
        ds.StudyInstanceUID, ds.SeriesInstanceUID = pydicom.uid.generate_uid(), pydicom.uid.generate_uid()
        ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
        ds.PatientID, ds.PatientName, ds.StudyDate = f"MC-PG-{n:02d}", f"Paging^Case{n:02d}", "20230315"
        ds.AccessionNumber, ds.StudyDescription = f"PG-{n:02d}", f"abdomen followup {n:02d}"
        client.store([ds], ds.StudyInstanceUID)
        uids.append(ds.StudyInstanceUID)
    assert main(["pacs", "search", pacs.dicomweb, "--patient-id", "MC-PG-*"]) == 0
    first = capsys.readouterr().out
    assert first.rstrip().endswith("50 of more than 50 studies (use --limit or --offset; next page: --offset 50)")
    assert main(["pacs", "search", pacs.dicomweb, "--patient-id", "MC-PG-*", "--offset", "50"]) == 0
    second = capsys.readouterr().out
    assert second.rstrip().endswith("2 studies, from number 51")
    found = {u for u in uids if f"/studies/{u}\n" in first + second}
    assert found == set(uids)
    for query in (["--patient-name", "Paging^Case0?"], ["--accession", "PG-07"], ["--description", "followup 07"],
                  ["--date", "2023-03-15", "--patient-name", "Paging^Case07"],
                  ["--date", "2023-03-01-20230331", "--accession", "PG-07"]):  # fmt: skip
        page = client.search_page(
            date=query[query.index("--date") + 1] if "--date" in query else None,
            patient_name=query[query.index("--patient-name") + 1] if "--patient-name" in query else None,
            accession=query[query.index("--accession") + 1] if "--accession" in query else None,
            description=query[query.index("--description") + 1] if "--description" in query else None,
        )  # fmt: skip
        expected = 10 if query == ["--patient-name", "Paging^Case0?"] else 1
        assert len(page.studies) == expected and not page.more, query
        assert uids[7] in {s["uid"] for s in page.studies}
