"""What reaches an agent over MCP or `serve` names a study only by its pseudonymous reference: no DICOM UID and no
path of this machine in a refusal (or, over MCP, in a result)."""

from __future__ import annotations

import json
from pathlib import Path

from copilot.server.dispatch import dispatch
from copilot.server.mcp_content import content
from copilot.tools.study_text import for_the_agent
from copilot.trace.outcome import CallOutcome

UID = "1.2.826.0.1.3680043.8.498.30689221539425854240030414527178119851"


def test_uids_and_paths_are_named_by_placeholders() -> None:
    said = for_the_agent(
        {
            "error": {"message": f"series {UID} under /srv/pacs/cache/studies/abc not readable"},
            "ok": False,
            "spacing": "0.7",
            "version": "1.2.3",
            "image": "data:image/png;base64,AAAA",
        }
    )
    assert said == {
        "error": {"message": "series [uid] under [path] not readable"},
        "ok": False,
        "spacing": "0.7",
        "version": "1.2.3",
        "image": "data:image/png;base64,AAAA",
    }


def test_an_mcp_result_carries_no_uid_nor_path() -> None:
    outcome = CallOutcome(
        "export_dicom_seg",
        True,
        200,
        result={"stored": True, "series_uid": UID, "file": "/home/me/sessions/x/derived/seg.dcm"},
    )
    text = content(outcome)[0].text
    assert UID not in text and "/home/me" not in text and json.loads(text)["result"]["series_uid"] == "[uid]"


def test_a_serve_refusal_carries_no_uid_nor_path(brain_case: Path, tmp_path: Path) -> None:
    from copilot.cases.pack import load_case
    from copilot.runtime import open_session

    session = open_session(load_case(brain_case), trace_dir=tmp_path / "t")
    try:
        status, body = dispatch(
            session, "POST", "/handlers/select_volume", json.dumps({"volume_name": f"{UID} {brain_case}"}).encode()
        )
    finally:
        session.close()
    message = json.dumps(body)
    assert status == 422 and UID not in message and str(brain_case) not in message
