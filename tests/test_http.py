"""The HTTP API: authentication, status codes, envelopes, the read-only /slicer subset, refused exec."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import numpy as np
import pytest
from PIL import Image

from copilot.server.client import RemoteViewer
from copilot.session import Session
from copilot.tools.registry import HandlerOutput, Registry
from tests.conftest import RunningServer


def test_requests_without_the_token_are_refused(server: RunningServer) -> None:
    anon = RemoteViewer(server.url, "wrong-token")
    for method, path in [("GET", "/medcopilot/v1/handlers"), ("GET", "/medcopilot/v1/state"),
                         ("POST", "/medcopilot/v1/handlers/ping"), ("GET", "/medcopilot/v1/trace")]:  # fmt: skip
        assert anon.request(method, path, {} if method == "POST" else None).status == 401
        assert server.client.request(method, path, {} if method == "POST" else None, auth=False).status == 401
    assert server.client.request("POST", "/medcopilot/v1/handlers/ping", {}).status == 200


def test_handlers_listing_has_schemas(server: RunningServer) -> None:
    handlers = {h["name"]: h for h in server.client.handlers()}
    offset = handlers["set_slice_offset"]
    assert offset["role"] == "viewer_control" and offset["tracks"] == ["A", "B"]
    assert offset["parameters"]["required"] == ["view", "offset"]
    assert offset["parameters"]["additionalProperties"] is False
    assert handlers["record_point"]["role"] == "evidence_capture"
    assert all(h["description"] for h in handlers.values())


def test_envelope_images_are_base64_png_with_hashes(server: RunningServer) -> None:
    reply = server.client.call("observe", {"view": "red", "size": 200})
    assert reply.status == 200 and reply.body["ok"] is True
    (img,) = reply.body["images"]
    data = base64.b64decode(img["data_base64"])
    assert img["mime"] == "image/png" and img["view"] == "red"
    assert hashlib.sha256(data).hexdigest() == img["sha256"]
    assert Image.open(io.BytesIO(data)).size == (200, 200)


def test_status_codes(server: RunningServer) -> None:
    c = server.client
    assert c.call("nope", {}).status == 404
    assert c.request("POST", "/medcopilot/v1/handlers/ping", b"{not json").status == 400
    assert c.request("GET", "/medcopilot/v1/nothing").status == 404
    refused = c.request("DELETE", "/medcopilot/v1/state")
    assert refused.status == 405 and refused.error_code == "method_not_allowed"
    assert refused.headers.get("allow") == "GET"  # HTTP's Allow: the methods the path takes
    assert c.call("set_slice_offset", {"view": "red", "offset": 1e9}).status == 422


def test_handler_outside_the_track_is_403(brain_case) -> None:
    reg = Registry("radiology")

    @reg.handler(role="analysis_operator", tracks=("B",))
    def segment_everything(ctx) -> HandlerOutput:
        """Track B only."""
        return HandlerOutput({"done": True})

    from copilot.engine.volume.viewer import EmbeddedVolumeViewer

    for track, status in (("A", 403), ("B", 200)):
        srv = RunningServer(Session(EmbeddedVolumeViewer(), reg, brain_case, track=track))
        try:
            assert srv.client.call("segment_everything", {}).status == status
            listed = [h["name"] for h in srv.client.handlers()]
            assert ("segment_everything" in listed) == (track == "B")
        finally:
            srv.stop()


def test_state_and_trace_endpoints(server: RunningServer) -> None:
    c = server.client
    c.call("set_slice_offset", {"view": "yellow", "offset": 0, "size": 64})
    state = c.state()
    assert state["views"]["yellow"]["offset"] == 0.0
    events = c.trace()
    assert events[0]["type"] == "episode_start"
    assert [e.get("handler") for e in events[1:]] == ["open_case", "set_slice_offset"]
    assert events[1]["actor"] == "system" and events[2]["actor"] == "http"


def _png(reply) -> np.ndarray:
    assert reply.status == 200, reply.body
    return np.asarray(Image.open(io.BytesIO(reply.body)))


def test_slicer_subset_without_token_on_loopback(server: RunningServer) -> None:
    c = server.client
    before = json.dumps(c.state(), sort_keys=True)
    vols = c.request("GET", "/slicer/volumes", auth=False).body
    assert [v["name"] for v in vols] == ["T1", "T1c", "T2", "FLAIR"]
    assert "Red" in c.request("GET", "/slicer/mrml/names", auth=False).body
    assert "vtkMRMLSliceNodeRed" in c.request("GET", "/slicer/mrml/ids", auth=False).body
    assert c.request("GET", "/slicer/system/version", auth=False).body["applicationName"] == "MedCopilot"
    # offset=0 and size are honoured (Slicer's own handler ignores both)
    at0 = _png(c.request("GET", "/slicer/slice?view=red&offset=0&size=123", auth=False, raw=True))
    assert at0.shape[:2] == (123, 123)
    moved = c.call("set_slice_offset", {"view": "red", "offset": 0, "size": 123})
    same = np.asarray(Image.open(io.BytesIO(moved.images()[0][1])))
    assert np.array_equal(at0, same)
    c.call("set_slice_offset", {"view": "red", "offset": 10, "size": 64})
    before = json.dumps(c.state(), sort_keys=True)
    sag = _png(c.request("GET", "/slicer/slice?view=red&orientation=sagittal&scrollTo=0.5&size=64", auth=False,
                         raw=True))  # fmt: skip
    assert sag.shape[:2] == (64, 64)
    shot = _png(c.request("GET", "/slicer/screenshot?size=50", auth=False, raw=True))
    assert shot.shape[:2] == (50, 150)
    assert json.dumps(c.state(), sort_keys=True) == before  # read-only: nothing moved
    assert c.request("GET", "/slicer/slice?view=red&offset=abc", auth=False).status == 422
    assert c.request("GET", "/slicer/slice?view=red&size=99999", auth=False).status == 422
    posted = c.request("POST", "/slicer/slice", {}, auth=False)
    assert posted.status == 405 and posted.headers.get("allow") == "GET"
    assert c.request("GET", "/slicer/gui", auth=False).status == 404


@pytest.mark.parametrize("backend", ["embedded", "slicer"], indirect=True)
def test_slicer_subset_offsets_are_slicers_own(server: RunningServer) -> None:
    """/slicer/slice reads Slicer's native offset: the sagittal one is −R, the handlers' canonical one +R."""
    c = server.client
    shown = c.call("set_slice_offset", {"view": "yellow", "offset": 6, "size": 96})
    canonical = np.asarray(Image.open(io.BytesIO(shown.images()[0][1])))
    native = _png(c.request("GET", "/slicer/slice?view=yellow&offset=-6&size=96", auth=False, raw=True))
    assert np.array_equal(native, canonical)
    axial = c.call("set_slice_offset", {"view": "red", "offset": 6, "size": 96})
    same = _png(c.request("GET", "/slicer/slice?view=red&offset=6&size=96", auth=False, raw=True))
    assert np.array_equal(same, np.asarray(Image.open(io.BytesIO(axial.images()[0][1]))))


def test_slicer_exec_is_always_refused(server: RunningServer) -> None:
    c = server.client
    for auth in (False, True):
        for method in ("GET", "POST"):
            reply = c.request(method, "/slicer/exec", b"import os", auth=auth)
            assert reply.status == 403 and reply.body["error"]["code"] == "forbidden"


def test_slicer_subset_needs_token_without_compat(traced_session) -> None:
    srv = RunningServer(traced_session, slicer_compat=False)
    try:
        assert srv.client.request("GET", "/slicer/volumes", auth=False).status == 401
        assert srv.client.request("GET", "/slicer/volumes").status == 200
    finally:
        srv.stop()


def test_routes_are_compiled_once_and_every_operation_has_its_answer() -> None:
    """The route table's patterns are compiled on first use and kept; a route without an answer cannot exist."""
    from copilot.server.dispatch import ANSWERS
    from copilot.server.routes import ROUTES, find_route

    call = next(r for r in ROUTES if r.operation == "call")
    assert call.pattern is call.pattern and call.match("/handlers/observe") == {"name": "observe"}
    assert set(ANSWERS) == {r.operation for r in ROUTES}
    assert find_route("DELETE", "/jobs/j1")[0].operation == "cancel_job"
