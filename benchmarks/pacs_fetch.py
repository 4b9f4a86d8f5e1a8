"""A 300-instance CT series from a local Orthanc: time to first image and full-series throughput, ours against
`dicomweb-client` sequential retrieval and against the raw HTTP floor.

Run: `.venv/bin/python benchmarks/pacs_fetch.py [--n 300] [--size 256] [--repeats 5] [--workers 6]` (about a
minute; needs Debian `orthanc` + `orthanc-dicomweb`, `make sysdeps`). A private Orthanc is started on a loopback
port (the tests' `LocalOrthanc`, 8 HTTP threads: Orthanc's own default is 50) and a generated axial CT series
(`--n` slices of `--size`² int16, nothing committed) is stored into it over STOW-RS. Each repeat starts from an
empty cache and measures, on one client machine:

- ours-pool: `ProgressiveStudy` on the series URL: series and instance listings, then WADO-RS instance by
  instance through the bounded pool (`--workers` in flight), each instance checked and written to the private
  cache, the series' slices decoded into the stack as they land; first image = the first slice in the stack;
- ours-stream: the same with MEDCOPILOT_PACS_WORKERS=1: the series in one streamed multipart answer, each part
  checked, written and shown as it completes;
- dwc-series: `dicomweb-client` `retrieve_series` (one multipart answer, parsed whole in memory); its first image
  is its last (nothing is handed over before the answer is parsed);
- dwc-instances: `dicomweb-client` `search_for_instances`, then `retrieve_instance` one by one in instance order
  (first image = the first instance decoded);
- floor-seq / floor-pool: the same listings and per-instance GET requests as ours-pool with `requests`, the
  bytes read and discarded (sequential, and through a pool of the same size): no parsing, no disk, no decoding;
- floor-stream: the same series listing and one series GET as ours-stream, the bytes read and discarded (first
  image: the first part's closing delimiter arrived).

Prints median / 95th percentile (nearest rank) of time to first image and of the whole series, instances per
second and MB/s, the ratios of ours to each alternative, and the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import FileMetaDataset
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, generate_uid

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from copilot.pacs.cache import PacsCache
from copilot.pacs.client import PacsClient
from copilot.pacs.orthanc import LocalOrthanc, missing
from copilot.pacs.progressive import ProgressiveStudy

MULTIPART = 'multipart/related; type="application/dicom"; transfer-syntax=*'
Timing = tuple[float, float]  # seconds to the first image, seconds to the whole series


class BenchOrthanc(LocalOrthanc):
    """The tests' private Orthanc with more HTTP threads, so that the server does not cap a pool of requests."""

    def config(self) -> dict[str, object]:
        return {**super().config(), "HttpThreadsCount": 8, "TcpNoDelay": True}


def ct_series(n: int, size: int) -> list[pydicom.Dataset]:
    """An axial CT series: `n` int16 slices of `size`², 1 mm apart, a body ellipse with a moving bright sphere."""
    study, series, frame = generate_uid(), generate_uid(), generate_uid()
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) - size / 2
    body = (xx / (0.42 * size)) ** 2 + (yy / (0.32 * size)) ** 2 < 1
    rng = np.random.default_rng(0)
    out = []
    for k in range(n):
        hu = np.where(body, 40.0, -1000.0) + rng.normal(0, 12, (size, size))
        r = 0.12 * size * np.sqrt(max(0.0, 1 - ((k - n / 2) / (n / 3)) ** 2))
        hu[(xx - 0.1 * size) ** 2 + yy**2 < r**2] = 300.0
        ds = pydicom.Dataset()
        ds.preamble = b"\0" * 128  # stored as sent: a Part 10 file with its preamble
        ds.file_meta = FileMetaDataset()
        ds.file_meta.MediaStorageSOPClassUID, ds.file_meta.TransferSyntaxUID = CTImageStorage, ExplicitVRLittleEndian
        ds.SOPClassUID, ds.SOPInstanceUID = CTImageStorage, generate_uid()
        ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
        ds.StudyInstanceUID, ds.SeriesInstanceUID, ds.FrameOfReferenceUID = study, series, frame
        ds.PatientID, ds.PatientName, ds.Modality, ds.StudyDate = "MC-BENCH-0300", "Bench^Pacs", "CT", "20240611"
        ds.SeriesNumber, ds.InstanceNumber, ds.SeriesDescription = 1, k + 1, "bench axial"
        ds.ImagePositionPatient, ds.ImageOrientationPatient = [-128.0, -128.0, float(k)], [1, 0, 0, 0, 1, 0]
        ds.PixelSpacing, ds.SliceThickness = [1.0, 1.0], 1.0
        ds.Rows = ds.Columns = size
        ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
        ds.RescaleIntercept, ds.RescaleSlope, ds.WindowCenter, ds.WindowWidth = -1024, 1, 40, 400
        ds.PixelData = (hu + 1024).astype(np.int16).tobytes()
        out.append(ds)
    return out


def _auth(pacs: LocalOrthanc) -> tuple[str, str]:
    return pacs.user, pacs.password


def ours(url: str, cache_root: Path, workers: int) -> Timing:
    os.environ["MEDCOPILOT_PACS_WORKERS"] = str(workers)  # read when the study's client is made
    study = ProgressiveStudy(url, PacsCache(cache_root)).start()
    study.wait(600)
    assert study.first_slice_s is not None and study.stack is not None and study.stack.count == study.stack.total
    return study.first_slice_s, time.monotonic() - study.started


def dwc_series(pacs: LocalOrthanc, study: str, series: str) -> Timing:
    import requests
    from dicomweb_client import DICOMwebClient

    start = time.monotonic()
    session = requests.Session()
    session.auth = _auth(pacs)
    client = DICOMwebClient(pacs.dicomweb, session=session)
    found = client.retrieve_series(study, series)
    first = sorted(found, key=lambda ds: int(ds.InstanceNumber))[0].pixel_array
    assert first is not None and len(found) > 0
    elapsed = time.monotonic() - start
    return elapsed, elapsed


def dwc_instances(pacs: LocalOrthanc, study: str, series: str) -> Timing:
    import requests
    from dicomweb_client import DICOMwebClient

    start = time.monotonic()
    session = requests.Session()
    session.auth = _auth(pacs)
    client = DICOMwebClient(pacs.dicomweb, session=session)
    listed = client.search_for_instances(study, series, fields=["InstanceNumber"])
    uids = [str(item["00080018"]["Value"][0]) for item in
            sorted(listed, key=lambda item: int(item["00200013"]["Value"][0]))]  # fmt: skip
    first_s = 0.0
    for k, uid in enumerate(uids):
        ds = client.retrieve_instance(study, series, uid)
        if k == 0:
            assert ds.pixel_array is not None
            first_s = time.monotonic() - start
    return first_s, time.monotonic() - start


def floor(pacs: LocalOrthanc, study: str, series: str, workers: int) -> Timing:
    """The listings and the per-instance GET requests ours makes, the bytes read and dropped."""
    import requests
    from requests.adapters import HTTPAdapter

    start = time.monotonic()
    session = requests.Session()
    session.auth = _auth(pacs)
    session.mount("http://", HTTPAdapter(pool_maxsize=max(10, workers)))
    root = f"{pacs.dicomweb}/studies/{study}/series"
    accept = {"Accept": MULTIPART, "Accept-Encoding": "identity"}
    assert session.get(root, headers={"Accept": "application/dicom+json"}).ok  # the series listing ours asks too
    listed = session.get(f"{root}/{series}/instances", params={"includefield": "InstanceNumber"},
                         headers={"Accept": "application/dicom+json"}).json()  # fmt: skip
    uids = [str(item["00080018"]["Value"][0]) for item in
            sorted(listed, key=lambda item: int(item["00200013"]["Value"][0]))]  # fmt: skip
    done: dict[int, float] = {}

    def get(k: int) -> None:
        with session.get(f"{root}/{series}/instances/{uids[k]}", headers=accept, stream=True) as response:
            for _ in response.iter_content(64 * 1024):
                pass
        done[k] = time.monotonic() - start

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(get, range(len(uids))))
    return min(done.values()), time.monotonic() - start


def floor_stream(pacs: LocalOrthanc, study: str, series: str) -> Timing:
    """The series listing and the one series GET ours-stream makes, the bytes read and dropped; the first image
    is the moment the first part's closing delimiter has arrived."""
    import requests

    start = time.monotonic()
    session = requests.Session()
    session.auth = _auth(pacs)
    root = f"{pacs.dicomweb}/studies/{study}/series"
    assert session.get(root, headers={"Accept": "application/dicom+json"}).ok
    headers = {"Accept": MULTIPART, "Accept-Encoding": "identity"}
    first, tail = 0.0, b""
    with session.get(f"{root}/{series}", headers=headers, stream=True) as response:
        boundary = b"\r\n--" + response.headers["Content-Type"].split("boundary=")[1].strip('"').encode()
        for piece in response.iter_content(64 * 1024):
            if not first and boundary in tail + piece:
                first = time.monotonic() - start
            tail = piece[-len(boundary):]
    return first, time.monotonic() - start


def p95(values: list[float]) -> float:
    """The 95th percentile, nearest rank (with five repeats: the largest)."""
    ordered = sorted(values)
    return ordered[max(0, -(-95 * len(ordered) // 100) - 1)]


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--workers", type=int, default=6)
    args = parser.parse_args(argv)
    if missing() is not None:
        print(f"pacs_fetch: skipped: {missing()}")
        return 0
    with tempfile.TemporaryDirectory(prefix="medcopilot-bench-pacs-") as tmp, BenchOrthanc() as pacs:
        os.environ["MEDCOPILOT_PACS_USER"], os.environ["MEDCOPILOT_PACS_PASSWORD"] = _auth(pacs)
        datasets = ct_series(args.n, args.size)
        study, series = str(datasets[0].StudyInstanceUID), str(datasets[0].SeriesInstanceUID)
        client = PacsClient(pacs.dicomweb)
        for k in range(0, len(datasets), 50):
            client.store(datasets[k : k + 50], study)
        mb = sum(len(ds.PixelData) for ds in datasets) / 1e6
        url = f"{pacs.dicomweb}/studies/{study}/series/{series}"
        runs: dict[str, Callable[[int], Timing]] = {
            "ours-pool": lambda r: ours(url, Path(tmp) / f"pool{r}", args.workers),
            "ours-stream": lambda r: ours(url, Path(tmp) / f"stream{r}", 1),
            "dwc-series": lambda r: dwc_series(pacs, study, series),
            "dwc-instances": lambda r: dwc_instances(pacs, study, series),
            "floor-seq": lambda r: floor(pacs, study, series, 1),
            "floor-pool": lambda r: floor(pacs, study, series, args.workers),
            "floor-stream": lambda r: floor_stream(pacs, study, series),
        }
        before = loadavg()
        ours(url, Path(tmp) / "warm", args.workers)  # Orthanc's own caches warmed once, untimed
        times: dict[str, list[Timing]] = {name: [] for name in runs}
        for r in range(args.repeats):
            for name, run in runs.items():  # interleaved, so that load changes touch every row alike
                times[name].append(run(r))
        after = loadavg()
    print(f"PACS fetch: {args.n} CT instances of {args.size}² int16 ({mb:.1f} MB of pixels) from a local Orthanc, "
          f"{args.repeats} repeats, {args.workers} workers, {os.cpu_count()} cores")  # fmt: skip
    print(f"{'':15}{'first image s (med / p95)':>28}{'whole series s (med / p95)':>30}{'inst/s':>9}{'MB/s':>8}")
    summary: dict[str, tuple[float, float]] = {}
    for name, values in times.items():
        first, whole = [v[0] for v in values], [v[1] for v in values]
        summary[name] = statistics.median(first), statistics.median(whole)
        rate = args.n / summary[name][1]
        print(f"{name:15}{summary[name][0]:18.3f} / {p95(first):7.3f}{summary[name][1]:20.3f} / {p95(whole):7.3f}"
              f"{rate:9.0f}{mb / summary[name][1]:8.1f}")  # fmt: skip
    for mine, others in (("ours-pool", ("dwc-instances", "dwc-series", "floor-pool", "floor-seq")),
                         ("ours-stream", ("dwc-series", "dwc-instances", "floor-stream"))):  # fmt: skip
        first_ours, whole_ours = summary[mine]
        for name in others:
            first_theirs, whole_theirs = summary[name]
            print(f"{mine} vs {name:14} first image {first_theirs / first_ours:5.2f}× sooner, whole series "
                  f"{whole_theirs / whole_ours:5.2f}× faster (medians; below 1: ours is slower)")  # fmt: skip
    print(f"load average before {before}, after {after}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
