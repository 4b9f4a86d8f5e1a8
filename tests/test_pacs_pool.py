"""Pooled, progressive PACS retrieval against a real HTTP server (`tests/hostile_pacs.py` at instance level): the
requests in flight stay within the pool's bound, files follow instance order whatever the arrival order, the
first slice shows before the series is complete, `wait()` holds the study back until it is, and a failure midway
is its named refusal with nothing marked complete and no part file left, under the same limits as before."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pydicom
import pytest

from copilot.errors import HandlerError
from copilot.pacs.cache import PacsCache, read_origin
from copilot.pacs.fetch import fetch, local_study
from copilot.pacs.progressive import ProgressiveStudy
from tests.hostile_pacs import HostilePacs, private_env

N = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostilePacs]:
    with HostilePacs(tmp_path_factory.mktemp("pooled") / "ct", n=N) as pacs:
        yield pacs


@pytest.fixture(autouse=True)
def limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: HostilePacs) -> None:
    private_env(monkeypatch, tmp_path)
    monkeypatch.setenv("MEDCOPILOT_PACS_RETRIEVAL_S", "10")
    monkeypatch.setenv("MEDCOPILOT_PACS_READ_S", "2")
    monkeypatch.setenv("MEDCOPILOT_PACS_MAX_PART_MB", "4")
    monkeypatch.setenv("MEDCOPILOT_PACS_WORKERS", "3")
    server.mode, server.retrieval, server.requests[:] = "ok", None, []
    server.instance_level, server.instance_mode, server.fail_at = True, "ok", 5
    server.delay, server.peak = (lambda index: 0.0), 0


def _numbers(folder: Path) -> list[int]:
    return [int(pydicom.dcmread(p, stop_before_pixels=True).InstanceNumber) for p in sorted(folder.glob("*.dcm"))]


def _instance_requests(server: HostilePacs) -> list[str]:
    return [p for p in server.requests if "/instances/" in p]


@pytest.mark.parametrize("workers", [2, 3])
def test_requests_in_flight_stay_within_the_pool(server: HostilePacs, monkeypatch: pytest.MonkeyPatch,
                                                 workers: int) -> None:  # fmt: skip
    monkeypatch.setenv("MEDCOPILOT_PACS_WORKERS", str(workers))
    server.delay = lambda index: 0.05
    local = fetch(server.series_url, PacsCache())
    assert server.peak == workers  # reached, never passed
    assert len(_instance_requests(server)) == N and _numbers(local.path) == list(range(1, N + 1))


def test_files_follow_instance_order_whatever_order_the_answers_come_in(server: HostilePacs) -> None:
    server.delay = lambda index: 0.02 * (N - index)  # later instances answer sooner
    order: list[int] = []
    study = ProgressiveStudy(server.series_url, PacsCache())
    study.listed = lambda series, total: None  # type: ignore[method-assign]
    study.arrived = lambda series, position, path, ds=None: order.append(position)  # type: ignore[method-assign]
    local = study.start().wait(10)
    assert sorted(order) == list(range(N)) and order != sorted(order)  # arrived out of order
    assert _numbers(local.path) == list(range(1, N + 1))  # kept in order


def test_first_slice_shows_before_the_series_is_complete_and_tools_wait(server: HostilePacs) -> None:
    server.delay = lambda index: 0.03
    seen: list[tuple[int, bool, int]] = []
    study = ProgressiveStudy(server.series_url, PacsCache()).start()
    while study.stack is None and not study.done:
        time.sleep(0.005)
    assert study.stack is not None and study.stack.total == N
    study.stack.listeners.append(lambda position: seen.append((position, study.done, study.stack.count)))  # type: ignore[union-attr]
    with pytest.raises(HandlerError) as early:
        study.wait(0.01)  # the agent's tools ask too soon: a named refusal, not half a series
    assert early.value.code == "pacs_not_ready" and f"of {N} instances" in early.value.message
    local = study.wait(10)
    assert seen and seen[0][1] is False and seen[-1][2] == N  # the first slice came while the rest streamed
    assert study.first_slice_s is not None and study.first_slice_s < time.monotonic() - study.started
    image = study.stack.image()
    assert image is not None and image.dtype == np.uint8 and image.shape == (128, 128)
    first = pydicom.dcmread(sorted(local.path.glob("*.dcm"))[0])
    expected = first.pixel_array * float(first.RescaleSlope) + float(first.RescaleIntercept)
    shown = study.stack.volume[study.stack.current]  # type: ignore[index]
    position = _numbers(local.path).index(int(first.InstanceNumber))
    assert np.array_equal(study.stack.volume[position], expected) and shown.shape == expected.shape  # type: ignore[index]
    assert study.stack.scroll(N) == N - 1 and study.stack.caption() == f"slice {N} of {N} · {N} of {N} arrived"


@pytest.mark.parametrize(("mode", "code"), [
    ("failed", "pacs_failed"), ("dropped", "pacs_truncated"), ("other_instance", "pacs_bad_answer"),
    ("two_parts", "pacs_bad_answer"), ("endless_part", "pacs_part_too_large")])  # fmt: skip
def test_a_failure_midway_is_named_and_leaves_nothing_marked_complete(
    server: HostilePacs, mode: str, code: str
) -> None:
    server.instance_mode = mode
    server.delay = lambda index: 0.2 if index > server.fail_at else 0.0  # the later ones still in flight
    cache = PacsCache()
    study = ProgressiveStudy(server.series_url, cache).start()
    with pytest.raises(HandlerError) as err:
        study.wait(20)
    assert err.value.code == code, err.value.message
    (folder,) = cache.series_dirs()
    origin = read_origin(folder)
    assert origin is not None and origin["complete"] is False and origin["expected"] == N
    assert not [p for p in folder.iterdir() if ".part-" in p.name]  # no half-written instance
    held = len(list(folder.glob("*.dcm")))
    assert origin["instances"] == held < N and len(_instance_requests(server)) < N  # the rest were not asked for
    with pytest.raises(HandlerError) as refused:
        local_study(folder)
    assert refused.value.code == "pacs_incomplete"
    server.instance_mode, server.requests[:] = "ok", []
    resumed = fetch(server.series_url, cache)  # a resume asks only for what is missing
    assert len(_instance_requests(server)) == N - held and sorted(_numbers(resumed.path)) == list(range(1, N + 1))


def test_the_cache_bound_holds_while_instances_arrive_at_once(server: HostilePacs) -> None:
    one = len(server.data.parts[0])
    cache = PacsCache(max_bytes=4 * one)
    with pytest.raises(HandlerError) as err:
        fetch(server.series_url, cache)
    assert err.value.code == "pacs_cache_full" and cache.size() <= cache.max_bytes
    assert not [p for p in cache.root.rglob("*") if ".part-" in p.name]


def test_a_deadline_ends_every_request_in_flight(server: HostilePacs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEDCOPILOT_PACS_RETRIEVAL_S", "1")
    monkeypatch.setenv("MEDCOPILOT_PACS_READ_S", "0.5")
    server.delay = lambda index: 0.3
    start = time.monotonic()
    with pytest.raises(HandlerError) as err:
        fetch(server.series_url, PacsCache())
    assert err.value.code in ("pacs_deadline", "pacs_unreachable") and time.monotonic() - start < 2.5
    assert threading.active_count() < 20  # the pool's threads ended


@pytest.mark.parametrize("listing", [False, True])
def test_one_worker_or_a_pacs_without_instance_listing_streams_the_whole_series(
    server: HostilePacs, monkeypatch: pytest.MonkeyPatch, listing: bool
) -> None:
    server.instance_level = listing
    if listing:
        monkeypatch.setenv("MEDCOPILOT_PACS_WORKERS", "1")
    study = ProgressiveStudy(server.series_url, PacsCache()).start()
    local = study.wait(10)
    assert _instance_requests(server) == [] and sorted(_numbers(local.path)) == list(range(1, N + 1))
    assert study.stack is not None and study.stack.count == N  # shown as the parts of the one answer arrive


def test_a_streamed_series_fills_its_slices_by_instance_number(server: HostilePacs) -> None:
    from copilot.pacs.progressive import SliceStack

    stack = SliceStack(N)
    arrived = list(reversed(server.data.datasets))  # a server's own order: last instance first
    for k, ds in enumerate(arrived):
        assert stack.put(k, ds)
    assert stack.current == N - 1 and stack.count == N
    for ds in server.data.datasets:
        assert np.array_equal(stack.volume[int(ds.InstanceNumber) - 1], ds.pixel_array * float(ds.RescaleSlope)  # type: ignore[index]
                              + float(ds.RescaleIntercept))  # fmt: skip
