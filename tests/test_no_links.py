"""Files written and removed without following links: a symlink or a hard link planted where a trace folder, a
trace file, the study sidecar, an export or the PACS cache writes is refused and the file outside stays as it was;
cache eviction, `sessions purge` and `sessions export` never leave their folder, links inside them are removed (or
skipped) themselves, and a purge that cannot remove something says so and goes on."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from copilot.pacs.cache import ORIGIN_FILE, PacsCache, write_origin
from copilot.pacs.writer import SeriesWriter
from copilot.privatefs import LinkedPathError, make_private, open_private, private_dir, write_private
from copilot.study import sessions
from copilot.trace.recorder import TraceRecorder
from copilot.trace.study_ref import SIDECAR, pseudonymous_header

SECRET = "outside, 0644, must stay as it is\n"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file of another folder, readable by all, that nothing may overwrite, truncate or narrow."""
    path = tmp_path / "elsewhere" / "keep.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o644)
    return path


def _intact(path: Path) -> bool:
    return path.read_text() == SECRET and (path.stat().st_mode & 0o777) == 0o644


def test_a_symlink_at_a_trace_folder_or_file_is_refused(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "trace").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(LinkedPathError, match="does not write through links"):
        TraceRecorder(tmp_path / "trace", {"case_id": "x"})
    folder = private_dir(tmp_path / "t2")
    (folder / "trace.jsonl").symlink_to(outside.parent / "would-be.jsonl")
    with pytest.raises(LinkedPathError):
        TraceRecorder(folder, {"case_id": "x"})
    other = private_dir(tmp_path / "t3")
    (other / "artifacts").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(LinkedPathError):
        TraceRecorder(other, {"case_id": "x"})
    with pytest.raises(LinkedPathError):
        write_private(other / "artifacts" / "000001_0_red.png", b"png")
    assert _intact(outside) and sorted(p.name for p in outside.parent.iterdir()) == ["keep.txt"]


def test_the_study_sidecar_and_any_private_file_refuse_links(tmp_path: Path, outside: Path) -> None:
    folder = private_dir(tmp_path / "session")
    (folder / SIDECAR).symlink_to(outside)
    with pytest.raises(LinkedPathError):
        pseudonymous_header({"case_root": str(tmp_path), "case_inputs": {}}, folder)
    hard = folder / "report.html"
    os.link(outside, hard)  # a hard link: same file, another name
    for mode in ("w", "a", "wb"):
        with pytest.raises(LinkedPathError, match="hard-linked"):
            open_private(hard, mode)
    dangling = folder / "new.txt"
    dangling.symlink_to(tmp_path / "elsewhere" / "created-by-link.txt")
    with pytest.raises(LinkedPathError):
        write_private(dangling, "x")
    assert _intact(outside) and not (tmp_path / "elsewhere" / "created-by-link.txt").exists()


def test_make_private_leaves_the_targets_of_links_alone(tmp_path: Path, outside: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "linked.txt").symlink_to(outside)
    (folder / "linked_dir").symlink_to(outside.parent, target_is_directory=True)
    (folder / "own.txt").write_text("mine")
    make_private(folder)
    assert (folder / "own.txt").stat().st_mode & 0o777 == 0o600 and _intact(outside)
    assert outside.parent.stat().st_mode & 0o777 != 0o700 or os.getuid() != outside.parent.stat().st_uid
    with pytest.raises(LinkedPathError):
        make_private(folder / "linked.txt")


def test_an_export_at_a_planted_link_is_refused_by_name(tmp_path: Path, outside: Path) -> None:
    from copilot.tools.writes import consent
    from tests.test_write_consent import SEG_ARGS, _session

    session = _session(tmp_path, allow_store=((tmp_path / "trace").as_uri(),))
    target = tmp_path / "trace" / "derived" / "bright_seg.dcm"
    target.parent.mkdir(exist_ok=True)
    target.symlink_to(tmp_path / "elsewhere" / "made.dcm")  # dangling: the planner sees no file there
    out = session.call("export_dicom_seg", SEG_ARGS)  # the plan names where the link leads: not allowed
    assert out.error["code"] == "write_not_approved" and "elsewhere/made.dcm" in out.error["message"]
    plan = session.plan_write("export_dicom_seg", SEG_ARGS, actor="clinician")
    assert plan is not None and plan.destinations == ((tmp_path / "elsewhere" / "made.dcm").as_uri(),)
    out = session.call("export_dicom_seg", SEG_ARGS, actor="clinician", consent=consent(plan, SEG_ARGS))
    assert out.error["code"] == "linked_path", out.error  # even with a yes, nothing is written through the link
    assert not (tmp_path / "elsewhere" / "made.dcm").exists() and target.is_symlink()
    target.unlink()
    target.symlink_to(outside)
    assert session.call("export_dicom_seg", SEG_ARGS).error["code"] == "name_taken"
    assert _intact(outside)


def test_the_pacs_cache_refuses_links_where_it_writes(tmp_path: Path, outside: Path) -> None:
    series = private_dir(tmp_path / "cache" / "s" / "t" / "u")
    (series / ORIGIN_FILE).symlink_to(outside)
    with pytest.raises(LinkedPathError):
        write_origin(series, {"dicomweb": "http://pacs/dw"})
    writer = SeriesWriter(series, "1.2.3")
    (series / f".00001.dcm.part-{os.getpid()}").symlink_to(outside)
    with pytest.raises(LinkedPathError):
        writer.begin({"content-type": "application/dicom"})
    assert _intact(outside)


def _series(folder: Path, size: int, age: float) -> Path:
    folder.mkdir(parents=True)
    write_origin(folder, {"dicomweb": "http://pacs/dw", "complete": True})
    (folder / "00001.dcm").write_bytes(b"\0" * size)
    os.utime(folder / ORIGIN_FILE, (time.time() - age, time.time() - age))
    return folder


def test_eviction_never_leaves_the_cache_through_a_linked_study(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    own = _series(root / "srv" / "study" / "series", 4096, age=50)
    elsewhere = _series(tmp_path / "elsewhere" / "study" / "series", 4096, age=100)  # older: evicted first if seen
    (elsewhere.parent / "other.dcm").write_bytes(b"x")
    (root / "srv" / "linked").symlink_to(elsewhere.parent, target_is_directory=True)
    (own / "link.dcm").symlink_to(elsewhere / "00001.dcm")  # a link inside a series: removed itself
    cache = PacsCache(root, max_bytes=1)
    assert cache.series_dirs() == [own] and cache.size() < 3 * 4096
    assert cache.evict() == [own]
    assert not own.exists() and (root / "srv" / "linked").is_symlink()
    assert sorted(p.name for p in elsewhere.parent.rglob("*")) == ["00001.dcm", "origin.json", "other.dcm", "series"]
    assert cache.evict_one(()) is None and cache.clear() >= 0
    assert not (root / "srv").exists() and elsewhere.joinpath("00001.dcm").is_file()


def _session_folder(root: Path, name: str, age_days: float) -> Path:
    folder = root / name
    rec = TraceRecorder(folder, {"case_id": name, "kind": "radiology"})
    rec.close({"status": "ok"})
    old = time.time() - age_days * 86400
    os.utime(folder / "trace.jsonl", (old, old))
    return folder


def test_purge_survives_links_and_goes_on_past_what_it_cannot_remove(
    tmp_path: Path, outside: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "sessions"
    monkeypatch.setenv("MEDCOPILOT_SESSIONS", str(root))
    first = _session_folder(root, "20240101-000000-radiology-aaaaaa", 90)
    stuck = _session_folder(root, "20240102-000000-radiology-bbbbbb", 80)
    last = _session_folder(root, "20240103-000000-radiology-cccccc", 70)
    kept = _session_folder(root, "20991231-000000-radiology-dddddd", 0)
    (first / "derived").mkdir()
    (first / "derived" / "outside.txt").symlink_to(outside)
    (first / "elsewhere").symlink_to(outside.parent, target_is_directory=True)
    foreign = _session_folder(tmp_path / "foreign", "20230101-000000-radiology-eeeeee", 400)
    (root / foreign.name).symlink_to(foreign, target_is_directory=True)  # a linked session folder
    assert [i.name for i in sessions.list_sessions(root)] == [first.name, stuck.name, last.name, kept.name]

    real_rmtree = shutil.rmtree

    def busy(path: Any, *args: Any, **kw: Any) -> None:  # one folder the system will not let go
        if str(path) == stuck.name:
            kw["onerror"](os.rmdir, path, (OSError, OSError(16, "Device or resource busy"), None))
            return
        real_rmtree(path, *args, **kw)

    monkeypatch.setattr("copilot.privatefs.shutil.rmtree", busy)
    from copilot.cli import main

    assert main(["sessions", "purge", "--older-than", "30"]) == 1
    out, err = capsys.readouterr()
    assert f"removed {first.name}" in out and f"removed {last.name}" in out and "removed 2 session(s)" in out
    assert f"could not remove {stuck}: [Errno 16] Device or resource busy" in err
    assert not first.exists() and not last.exists() and stuck.exists() and kept.exists()
    assert (root / foreign.name).is_symlink() and (foreign / "trace.jsonl").is_file() and _intact(outside)


def test_a_session_export_copies_no_link(tmp_path: Path, outside: Path) -> None:
    folder = _session_folder(tmp_path / "s", "20240101-000000-radiology-ffffff", 1)
    (folder / "linked.txt").symlink_to(outside)
    sessions.export_session(folder, tmp_path / "copy")
    assert not (tmp_path / "copy" / "linked.txt").exists() and (tmp_path / "copy" / "trace.jsonl").is_file()
    (tmp_path / "copy2").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises((LinkedPathError, ValueError)):
        sessions.export_session(folder, tmp_path / "copy2")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["keep.txt"] and _intact(outside)


def test_a_linked_pseudonym_key_is_not_read(tmp_path: Path) -> None:
    from copilot.trace.study_ref import KEY_FILE, pseudonym_key

    planted = tmp_path / "elsewhere-key"
    planted.write_text("00" * 32)  # a key someone else chose
    root = private_dir(tmp_path / "sessions")
    (root / KEY_FILE).symlink_to(planted)
    assert pseudonym_key(root) != bytes(32)
