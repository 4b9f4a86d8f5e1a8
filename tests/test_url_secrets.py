"""A secret in any URL — user-info, `key=`, `token=`, `password=` query parameters — is cut out before it is traced,
shown or printed: a password in `--base-url` reaches neither stderr, nor the trace, nor the session report."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import pytest

from copilot import oneline
from copilot.cli import main
from copilot.trace.recorder import TraceRecorder
from copilot.trace.redact import redact_text
from tests.workstation_data import write_dicom_series

SECRET = "s3cretPW77"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"http://alice:{SECRET}@10.0.0.1:8000/v1", "http://[redacted]@10.0.0.1:8000/v1"),
        (f"https://{SECRET}@api.example/v1/chat", "https://[redacted]@api.example/v1/chat"),
        (f"GET https://h.example/x?key={SECRET}&view=red", "GET https://h.example/x?key=[redacted]&view=red"),
        (f"https://h.example/x?a=1&token={SECRET}", "https://h.example/x?a=1&token=[redacted]"),
        (f"https://h.example/x?password={SECRET}#f", "https://h.example/x?password=[redacted]#f"),
        ("mail bob@example.org about https://h.example/x?monkey=1", "mail bob@example.org about https://h.example/x?monkey=1"),
    ],
)  # fmt: skip
def test_secrets_in_urls_are_cut_out(text: str, expected: str) -> None:
    assert redact_text(text) == expected


def test_a_traced_url_keeps_no_secret(tmp_path: Path) -> None:
    trace = TraceRecorder(tmp_path / "t", {"base_url": f"http://alice:{SECRET}@h/v1"})
    trace.record("note", {"where": f"https://h/x?key={SECRET}"})
    trace.close()
    assert SECRET not in (tmp_path / "t" / "trace.jsonl").read_text(encoding="utf-8")


def test_one_line_errors_keep_no_secret(capsys: pytest.CaptureFixture[str]) -> None:
    oneline.say(f"error: request to http://alice:{SECRET}@h/v1 failed")
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, f"retry https://h/v1?api_key={SECRET}", None, None)
    assert SECRET not in oneline.OneLineFormatter().format(record)
    assert SECRET not in capsys.readouterr().err


def test_a_password_in_base_url_is_never_written_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "series"
    data = np.zeros((4, 16, 16), dtype=np.int16)
    data[1:3, 4:12, 4:12] = 300
    write_dicom_series(folder, data, "2.25.99887766", "T1 axial", 2)
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    trace = tmp_path / "trace"
    main(["chat", str(folder), "--ask", "Anything?", "--base-url", f"http://alice:{SECRET}@127.0.0.1:9/v1",
          "--trace-dir", str(trace)])  # fmt: skip
    captured = capsys.readouterr()
    assert SECRET not in captured.out + captured.err
    for path in trace.rglob("*") if trace.exists() else []:
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
