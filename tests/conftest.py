"""Shared fixtures: synthetic volumes, a small brain case pack, sessions, an HTTP server and clients."""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")  # Qt tests never need a screen

from copilot.engine.volume.image import Volume
from copilot.medflow import make_cases
from copilot.runtime import open_session
from copilot.server.client import LocalClient, RemoteViewer
from copilot.server.http import make_server
from copilot.session import Session
from tests.qupath_jvm import QuPathJvm, jdk_available

# property tests draw the same examples on every run and every machine (a failure is reproduced by rerunning)
settings.register_profile("deterministic", derandomize=True, database=None)
settings.load_profile("deterministic")


@pytest.fixture(autouse=True)
def _sessions_folder(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Desktop and chat sessions of the tests keep their traces in a temporary folder, never the user's."""
    if "MEDCOPILOT_SESSIONS" not in os.environ:
        monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(tmp_path_factory.getbasetemp() / "sessions"))


# What `make test-fast` leaves out: tests that need Qt widgets, slicer-core's MRML scene, a JVM or an external
# server, and the integration files (process pools, servers under load, fuzzing, registration, headless Chromium).
HEAVY_FILES = ("gui", "slicer", "qupath", "pacs", "workstation_gui", "bench_publishable", "batch", "operators",
               "agent", "hostile", "connection_fairness", "replay_register", "fuzz", "vista3d", "mcp", "bench_tables",
               "hardening", "model_seam", "plugins", "inspect_task")  # fmt: skip
# Single tests of otherwise light files that take 1.5 s or more each on 2 cores (a subprocess, a server, a large
# slide or volume held to a memory bound, a process pool, several generated cases, a scan of every source file):
# `make test` runs them, `make test-fast` leaves them out (every test, whatever its parameters).
SLOW_TESTS = (
    "test_memory_stays_flat_panning_a_100k_by_80k_slide",
    "test_marker_appears_where_the_conversion_says",
    "test_refused_mcp_calls_are_traced_bounded",
    "test_serve_command_prints_listening_line_and_serves",
    "test_chat_store_puts_the_answer_and_a_segment_on_the_pacs",
    "test_a_large_slide_is_written_in_bounded_memory",
    "test_brain_baseline_finds_the_lesion",
    "test_a_longitudinal_case_peaks_far_below_its_whole_volume_footprint",
    "test_scene3d_renders_volume_and_segment",
    "test_a_volume_at_the_budget_loads_within_one_and_a_half_times_its_bytes",
    "test_same_seed_same_bytes",
    "test_slicer_core_is_imported_only_when_the_backend_is_chosen",
    "test_core_imports_no_host_or_gui_modules",
    "test_generated_tumour_is_visible_where_the_mask_says",
    "test_run_baseline_on_every_module",
    "test_a_spent_call_budget_ends_tool_offering",
    "test_ledger_round_trip",
    "test_an_answer_without_evidence_is_stored_as_text_alone",
    "test_oblique_kernel_gives_the_itk_pixels_within_one_grey_level",
    "test_slab_by_slab_cases_are_the_whole_volume_cases",
    "test_sessions_list_show_export_and_purge",
    "test_no_public_mutable_lists_on_the_session",
    "test_sessions_are_built_in_one_module",
    "test_only_the_session_reaches_its_viewer_lock_and_trace",
    "test_a_store_the_clinician_rejects_writes_nothing_and_is_traced",
    "test_3d_preset_fits_the_series",
    "test_no_handler_reaches_hidden",
    "test_jump_render_and_convert_back",
    "test_nsclc_two_ct_series_uses_the_one_the_seg_references",
    "test_desktop_store_on_a_pacs_study_asks_and_stores",
    "test_gui_series_option_never_waits_on_a_dialog",
    "test_no_spelling_typed_into_chat_reaches_a_request",
    "test_the_remote_service_gets_the_burnt_in_name_blanked",
    "test_seg_validates_with_any_slice_thickness",
    "test_chat_prints_the_banner_once_and_no_request_carries_it",
    "test_an_undo_and_a_new_point_of_the_same_label_void_the_consent",
    "test_a_plugin_reusing_a_core_name_is_refused_and_the_core_stays",
    "test_replacing_a_core_entry_needs_an_explicit_logged_opt_in",
    "test_the_private_orthanc_refuses_a_remote_client",
    "test_a_busy_pacs_on_a_store_is_pacs_failed_after_its_retries",
)


# The longest files, longest first (about 60 % of the suite's time on 2 cores): `make test` hands files to the
# workers in collection order (--no-loadscope-reorder), so these start early and the short files even out the end
# (a long file handed out last keeps one worker busy while the other idles).
LONG_FILES = ("bench_publishable", "contract", "plugins", "bench_tables", "batch", "vista3d", "model_seam",
              "workstation_gui", "slide_viewer", "operators", "baselines", "hidden_truth", "slicer_backend",
              "clinician_store", "pacs", "qupath_bridge", "pacs_hostile", "mri_generators", "replay_register",
              "slide_tiles")  # fmt: skip


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark as `heavy` what `make test-fast` skips: heavy files, and every case run on the slicer backend; put the
    long files first (a stable sort: each file keeps its own order)."""
    rank = {f"test_{name}.py": i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        name = item.path.name
        params = getattr(item, "callspec", None)
        on_slicer = params is not None and params.params.get("backend") == "slicer"
        slow = item.get_closest_marker("slow") or item.originalname in SLOW_TESTS
        if on_slicer or any(h in name for h in HEAVY_FILES) or slow:
            item.add_marker(pytest.mark.heavy)


def rotation(ax: float, ay: float, az: float) -> np.ndarray:
    """Rotation matrix from three angles (radians)."""
    cx, sx, cy, sy, cz, sz = np.cos(ax), np.sin(ax), np.cos(ay), np.sin(ay), np.cos(az), np.sin(az)
    rx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    ry = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    rz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return rz @ ry @ rx


def make_volume(
    dims: tuple[int, int, int] = (40, 40, 40),
    spacing: tuple[float, float, float] = (1.0, 1.0, 1.0),
    direction: np.ndarray | None = None,
    origin: tuple[float, float, float] = (0.0, 0.0, 0.0),
    name: str = "vol",
    fill: float = 0.0,
    modality: str = "MR",
) -> Volume:
    """A constant volume with the given geometry (IJK→RAS = [direction·diag(spacing) | origin])."""
    m = np.eye(4)
    d = np.eye(3) if direction is None else np.asarray(direction, dtype=float)
    m[:3, :3] = d @ np.diag(spacing)
    m[:3, 3] = origin
    data = np.full(dims[::-1], fill, dtype=np.float32)
    return Volume(name=name, data=data, ijk_to_ras=m, modality=modality)


@pytest.fixture(scope="session")
def brain_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One brain_mri case pack at 2 mm (fast to make and load)."""
    out = tmp_path_factory.mktemp("cases")
    return make_cases("brain_mri", 1, 6, out, spacing=2.0)[0]  # seed 6 → option A (glioblastoma)


BACKENDS = ("embedded", "slicer")


def in_slicer_application() -> bool:
    """Whether the tests run inside the 3D Slicer application (not merely next to the slicer-core wheel)."""
    from copilot.slicer_backend.mrml import application

    return application() is not None


def backend_viewer(backend: str = "embedded") -> object | None:
    """The viewer a session runs on: the embedded engine (None), or the `slicer` backend — on slicer-core's
    standalone scene, or on Slicer's own scene when the tests run inside the Slicer application
    (tests/run_in_slicer.py)."""
    if backend == "embedded":
        return None
    from copilot.slicer_backend import available, new_slicer_viewer

    if not available():
        pytest.skip("the slicer backend needs slicer-core (pip install '.[slicer]')")
    return new_slicer_viewer()


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The radiology backend under test: a test parametrizes it over BACKENDS, else MEDCOPILOT_BACKEND."""
    return getattr(request, "param", os.environ.get("MEDCOPILOT_BACKEND", "embedded"))


@pytest.fixture
def session(brain_case: Path, backend: str) -> Session:
    return open_session(brain_case, viewer=backend_viewer(backend), backend=backend)


@pytest.fixture
def traced_session(brain_case: Path, tmp_path: Path, backend: str) -> Session:
    return open_session(brain_case, trace_dir=tmp_path / "trace", viewer=backend_viewer(backend), backend=backend)


class RunningServer:
    def __init__(self, session: Session, slicer_compat: bool = False) -> None:
        self.session = session
        self.token = secrets.token_urlsafe(16)
        self.server = make_server(session, "127.0.0.1", 0, self.token, slicer_compat=slicer_compat)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = self.server.url
        self.client = RemoteViewer(self.url, self.token)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def stop_behind(self) -> None:
        """Stop without waiting for the server loop to end (about 0.2 s, after hundreds of tests): the next test
        starts meanwhile, on its own port and session."""
        threading.Thread(target=self.stop, daemon=True).start()


@pytest.fixture
def server(traced_session: Session) -> Iterator[RunningServer]:
    srv = RunningServer(traced_session, slicer_compat=True)
    yield srv
    srv.stop_behind()


@pytest.fixture(params=["local", "http"])
def client(request: pytest.FixtureRequest, traced_session: Session) -> Iterator[LocalClient | RemoteViewer]:
    """The same handler API in-process and over HTTP: contract tests run against both."""
    if request.param == "local":
        yield LocalClient(traced_session)
        return
    srv = RunningServer(traced_session)
    yield srv.client
    srv.stop_behind()


def canonical_state(client: LocalClient | RemoteViewer) -> str:
    return json.dumps(client.state(), sort_keys=True, separators=(",", ":"))


@pytest.fixture(scope="module")
def jvm() -> Iterator[QuPathJvm]:
    """The fixture JVM with QuPath's class names (tests/java), one per test module that asks for it."""
    if not jdk_available():
        pytest.skip("no JDK (javac); `make test` installs openjdk-17-jdk-headless")
    server = QuPathJvm()
    yield server
    server.stop()


def older_trace(case_dir: Path, trace_dir: Path, unnamed: str, calls: list[tuple[str, dict]], **drawn_by: str) -> None:
    """A trace as a version before `unnamed` was recorded wrote it: its header without that field, its images made
    by `drawn_by` (e.g. `png_encoder=` or `renderer=`, the legacy one)."""
    from copilot.cases.pack import load_case
    from copilot.runtime import new_session, session_header
    from copilot.trace.recorder import TraceRecorder

    case = load_case(case_dir)
    header = session_header(case, "A")
    del header[unnamed]
    session = new_session("radiology", trace=TraceRecorder(trace_dir, header), case=case, **drawn_by)
    assert session.call("open_case", {}, actor="system").ok
    for name, args in calls:
        assert session.call(name, args).ok, name
    session.close()
