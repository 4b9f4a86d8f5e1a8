"""The PACS client against a hostile DICOMweb server (`tests/hostile_pacs.py`): every misbehaviour ends in its
named refusal within its deadline, memory stays bounded, nothing is written past the cache bound, nothing
incomplete is called complete, and no control character reaches the terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest

from copilot.errors import HandlerError
from copilot.pacs.cache import PacsCache, read_origin
from copilot.pacs.client import PacsClient
from copilot.pacs.fetch import fetch, local_study
from copilot.pacs.query import qido_date, study_filters
from tests.hostile_pacs import HostilePacs, private_env

DEADLINE_S, RETRIEVAL_S, BOUND = 2.0, 3.0, 6 * 1024 * 1024
SLACK_S = 1.5  # the last read may wait up to its read limit (1 s) past the deadline check


@pytest.fixture(scope="module")
def pacs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostilePacs]:
    with HostilePacs(tmp_path_factory.mktemp("hostile") / "ct") as server:
        yield server


@pytest.fixture(autouse=True)
def short_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, pacs: HostilePacs) -> None:
    private_env(monkeypatch, tmp_path)
    monkeypatch.setenv("MEDCOPILOT_PACS_CACHE_MB", str(BOUND / (1024 * 1024)))
    monkeypatch.setenv("MEDCOPILOT_PACS_DEADLINE_S", str(DEADLINE_S))
    monkeypatch.setenv("MEDCOPILOT_PACS_RETRIEVAL_S", str(RETRIEVAL_S))
    monkeypatch.setenv("MEDCOPILOT_PACS_READ_S", "1")
    monkeypatch.setenv("MEDCOPILOT_PACS_MAX_PART_MB", "4")
    pacs.mode, pacs.retrieval, pacs.requests[:] = "ok", None, []


def _controls(text: str) -> list[str]:
    return [c for c in text if c != "\n" and unicodedata.category(c) in ("Cc", "Cf")]


def test_ten_thousand_studies_draw_only_the_page_shown(pacs: HostilePacs, capsys: pytest.CaptureFixture) -> None:
    from copilot.cli import main

    pacs.mode = "many"
    start = time.monotonic()
    assert main(["pacs", "search", pacs.root, "--limit", "50"]) == 0
    out = capsys.readouterr().out
    assert time.monotonic() - start < DEADLINE_S
    assert out.count("\nstudy ") + out.startswith("study ") == 50
    assert out.rstrip().endswith("50 of more than 50 studies (use --limit or --offset; next page: --offset 50)")
    studies = [p for p in pacs.requests if p.split("?")[0].endswith("/studies")]
    series = [p for p in pacs.requests if p.split("?")[0].endswith("/series")]
    assert len(studies) == 1 and "limit=51" in studies[0] and len(series) == 50  # series only of those shown


def test_escape_sequences_never_reach_the_terminal(pacs: HostilePacs, capsys: pytest.CaptureFixture) -> None:
    from copilot.cli import main

    pacs.mode = "escapes"
    assert main(["pacs", "search", pacs.root]) == 0
    out = capsys.readouterr().out
    assert "chest" in out and "redevil" in out and _controls(out) == []
    assert main(["pacs", "search", pacs.root, "--json"]) == 0
    text = capsys.readouterr().out
    assert _controls(json.loads(text)[0]["description"]) == [] and "\\u001b" not in text


@pytest.mark.parametrize(
    ("mode", "code"),
    [("nested", "pacs_too_deep"), ("not_objects", "pacs_bad_answer"), ("gzip_bomb", "pacs_answer_too_large"),
     ("trickle", "pacs_deadline"), ("redirect_away", "pacs_redirect")],
)  # fmt: skip
def test_a_hostile_search_is_refused_by_name(pacs: HostilePacs, mode: str, code: str) -> None:
    pacs.mode = mode
    start = time.monotonic()
    with pytest.raises(HandlerError) as err:
        PacsClient(pacs.root).search()
    assert err.value.code == code, err.value.message
    assert time.monotonic() - start < DEADLINE_S + SLACK_S
    assert _controls(err.value.message) == []


def test_a_same_origin_redirect_is_followed(pacs: HostilePacs) -> None:
    pacs.mode = "redirect_here"
    (study,) = PacsClient(pacs.root).search()
    assert study["uid"] == "1.2.3.1" and any("moved=1" in p for p in pacs.requests)


def test_a_store_whose_reply_is_a_gzip_bomb_is_refused_by_name(
    pacs: HostilePacs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDCOPILOT_PACS_MAX_JSON_MB", "1")
    monkeypatch.setenv("MEDCOPILOT_PACS_RETRIEVAL_S", "20")  # the store client tries three times: not timed here
    start = time.monotonic()
    with pytest.raises(HandlerError) as err:
        PacsClient(pacs.root).store(pacs.data.datasets[:1], pacs.data.study)
    assert err.value.code == "pacs_answer_too_large" and time.monotonic() - start < 20


def _held(folder: Path, series: str) -> int:
    """Complete instances of the series in a cache folder (each read back whole)."""
    files = sorted(folder.glob("*.dcm"))
    for f in files:
        ds = pydicom.dcmread(f)
        assert str(ds.SeriesInstanceUID) == series and ds.pixel_array.shape == (128, 128)
    return len(files)


@pytest.mark.parametrize(
    ("mode", "code", "kept"),
    [("short_series", "pacs_incomplete", 3), ("short_length", "pacs_truncated", 2), ("dropped", "pacs_truncated", 2),
     ("cut_pixels", "pacs_truncated", 3),
     ("endless_part", "pacs_part_too_large", 1), ("gzip_bomb", "pacs_part_too_large", 0),
     ("endless_series", "pacs_cache_full", None), ("not_dicom", "pacs_bad_answer", 0),
     ("trickle", "pacs_deadline", 0)],
)  # fmt: skip
def test_a_hostile_retrieval_keeps_what_was_complete(
    pacs: HostilePacs, tmp_path: Path, mode: str, code: str, kept: int | None
) -> None:
    pacs.mode = mode
    cache = PacsCache(max_bytes=BOUND // 6 if mode == "endless_series" else None)  # stops sooner on a busy machine
    start = time.monotonic()
    with pytest.raises(HandlerError) as err:
        fetch(pacs.series_url, cache)
    elapsed = time.monotonic() - start
    assert err.value.code == code, err.value.message
    assert elapsed < RETRIEVAL_S + SLACK_S
    assert cache.size() <= cache.max_bytes  # nothing written past the bound
    (folder,) = cache.series_dirs()
    origin = read_origin(folder)
    assert origin is not None and origin["complete"] is False and origin["expected"] == 4
    held = _held(folder, pacs.data.series)
    assert origin["instances"] == held and (kept is None or held == kept)
    assert not [p for p in folder.iterdir() if ".part-" in p.name]  # the part in progress was cleaned
    with pytest.raises(HandlerError) as refused:
        local_study(folder)
    assert refused.value.code == "pacs_incomplete" and f"{4 - held} of 4 instances missing" in refused.value.message


def test_an_incomplete_series_is_refused_then_resumed_by_pacs_get(
    pacs: HostilePacs, capsys: pytest.CaptureFixture
) -> None:
    from copilot.cli import main
    from copilot.engine.volume.loading import load_volume

    pacs.mode = "short_series"
    assert main(["pacs", "get", pacs.series_url]) == 2
    err = capsys.readouterr().err
    assert "[pacs_incomplete]" in err and "1 of 4 instances missing" in err and "pacs get" in err
    assert main(["pacs", "cache"]) == 0 and "1 incomplete" in capsys.readouterr().out
    pacs.mode = "ok"
    assert main(["pacs", "get", pacs.series_url]) == 0
    folder = Path(capsys.readouterr().out.strip())
    origin = read_origin(folder)
    assert origin is not None and origin["complete"] is True and origin["instances"] == 4
    assert _held(folder, pacs.data.series) == 4  # the three held were kept, not stored twice
    volume = load_volume(local_study(folder).path)
    corners = volume.corners_ras()
    assert volume.dimensions[2] == 4 and corners[:, 2].max() - corners[:, 2].min() == pytest.approx(6.0)


def test_leftovers_of_a_killed_retrieval_are_counted_and_swept(capsys: pytest.CaptureFixture) -> None:
    from copilot.cli import main

    cache = PacsCache()
    series = cache.series_dir("http://h/dw", "1.2", "1.2.3")
    series.mkdir(parents=True)
    (series / ".00001.dcm.part-999999999").write_bytes(b"\0" * 300_000)
    (series.parent / ".abc.partial-999999999").mkdir()
    (series.parent / ".abc.partial-999999999" / "00001.dcm").write_bytes(b"\0" * 300_000)
    assert len(cache.leftovers()) == 2
    assert main(["pacs", "cache"]) == 0
    assert "swept 2 leftover(s) of interrupted retrievals (0.6 MiB)" in capsys.readouterr().out
    assert cache.leftovers() == [] and cache.size() == 0


CHILD = r"""
import json, re, sys
from copilot.errors import HandlerError
from copilot.pacs.cache import PacsCache
from copilot.pacs.client import PacsClient
from copilot.pacs.fetch import fetch
root, series_url, cache = sys.argv[1:4]
codes = {}
for name, call in [("search", lambda: PacsClient(root).search(limit=50)),
                   ("retrieve", lambda: fetch(series_url, PacsCache(cache)))]:
    try:
        result = call()
        codes[name] = len(result) if isinstance(result, list) else "opened"
    except HandlerError as exc:
        codes[name] = exc.code
status = open("/proc/self/status").read()  # VmHWM: this process's own peak (ru_maxrss would count its parent's)
print(json.dumps({"codes": codes, "peak_mb": int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024}))
"""


@pytest.mark.parametrize(("mode", "retrieval", "search", "retrieve"), [
    ("many", "endless_part", 50, "pacs_cache_full"),
    ("gzip_bomb", "gzip_bomb", "pacs_answer_too_large", "pacs_cache_full"),
    ("trickle", "dropped", "pacs_deadline", "pacs_truncated")])  # fmt: skip
def test_peak_memory_stays_bounded_in_a_child_process(
    pacs: HostilePacs, tmp_path: Path, mode: str, retrieval: str, search: object, retrieve: str
) -> None:
    """Default limits (a 2 GiB part bound) but a 20 MiB cache: a 4 GiB gzip bomb never inflates in memory."""
    pacs.mode, pacs.retrieval = mode, retrieval
    env = {**os.environ, "MEDCOPILOT_PACS_CACHE_MB": "20", "MEDCOPILOT_PACS_MAX_PART_MB": "2048"}
    run = subprocess.run([sys.executable, "-c", CHILD, pacs.root, pacs.series_url, str(tmp_path / "c")],
                         capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["codes"] == {"search": search, "retrieve": retrieve}
    assert report["peak_mb"] < 300, report
    assert PacsCache(tmp_path / "c").size() <= 20 * 1024 * 1024


def test_dates_and_filters_as_a_clinician_types_them() -> None:
    assert qido_date("2024-06-11") == qido_date("20240611") == "20240611"
    assert qido_date("2024-01-01-2024-12-31") == qido_date("20240101 - 2024-12-31") == "20240101-20241231"
    assert qido_date("2024-01-01-") == "20240101-" and qido_date("-20241231") == "-20241231"
    for bad in ("2024-13-01", "yesterday", "-", "20241231-20240101"):
        with pytest.raises(HandlerError) as err:
            qido_date(bad)
        assert err.value.code == "invalid_query"
    assert study_filters(patient_name="Doe^J", accession="A-17", description="chest ct", date="2024-06-11") == {
        "PatientName": "Doe?J*", "AccessionNumber": "A-17", "StudyDescription": "*chest*ct*", "StudyDate": "20240611"}
    assert study_filters(patient_name="D?e^J*")["PatientName"] == "D?e?J*"  # the user's own wildcards kept
    with pytest.raises(HandlerError):
        study_filters(patient_name="Doe\x1b[2J")
