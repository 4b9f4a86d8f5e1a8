"""The screen path of the desktop workstation (Qt-free): raw RGB pixels of each pane at its device size,
never a PNG, with what to draw over them (evidence markers, crosshair, slice lines) and the exact
geometry of the picture shown, so that pointer positions map back to RAS or level-0 pixels without
touching the viewer again.

This module and `act` are the app's only ways into the session's viewer: rendering here never moves
a view (a side-by-side pane shows another volume on a temporary copy of the scene state), and every
change the clinician makes goes through `act`, audited like the agent's calls.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image, ImageOps

from copilot.engine.geometry import SliceView
from copilot.engine.slide.overlays import MARGIN, OVERVIEW_MAX
from copilot.engine.slide.viewer import Viewport
from copilot.kinds import viewer_kind
from copilot.panel.probe import readout, slide_readout
from copilot.session import Peek, Session
from copilot.trace.outcome import CallOutcome

ON_PLANE_SLICES = 0.5  # a point is drawn solid within half a slice of the plane
NEAR_PLANE_MM = 10.0  # and as a faint ring up to this distance


@dataclass(frozen=True)
class Marker:
    """Something drawn over a pane, in device pixels: a point (`x`, `y`), a line (x0, y0, x1, y1) or a box."""

    kind: str  # point | cross | line | box | overview_point
    coords: tuple[float, ...]
    label: str = ""
    index: int | None = None  # evidence index, for highlighting the selected item
    solid: bool = True
    end: str = ""  # "a" or "b": this point is an end of a distance (joined to the other end by its line)


@dataclass
class Frame:
    """A rendered pane: pixels (H×W×3 uint8), markers, and the geometry that maps its pixels back."""

    pane: str
    pixels: np.ndarray
    markers: list[Marker] = field(default_factory=list)
    image_to_ras: np.ndarray | None = None  # slice panes: 4×4, image (x, y, 0, 1) → RAS
    viewport: Viewport | None = None  # slide pane: the screen viewport

    @property
    def size(self) -> tuple[int, int]:
        return int(self.pixels.shape[1]), int(self.pixels.shape[0])

    def to_ras(self, x: float, y: float) -> list[float] | None:
        if self.image_to_ras is None:
            return None
        return [float(v) for v in (self.image_to_ras @ np.array([x, y, 0.0, 1.0]))[:3]]

    def to_level0(self, x: float, y: float) -> tuple[float, float] | None:
        return None if self.viewport is None else self.viewport.screen_to_level0(x, y)


def split_pane(pane: str) -> tuple[str, str | None]:
    """('red', None) for 'red'; ('red', volume id) for a side-by-side pane 'red:<id>'."""
    view, _, vid = pane.partition(":")
    return view, vid or None


class Busy(Exception):
    """The session is running a call; the GUI thread does not wait (the call's end repaints)."""


class Screen:
    """Renders the session's panes for the screen, caching each pane's pixels by what it depends on.

    It follows the scene through the state every call returns (registered before any other listener, so
    that the panel's listeners see it current); `sync` re-reads it after a change that was no call (replay).
    """

    def __init__(self, session: Session) -> None:
        self.session = session
        self._cache: dict[str, tuple[Any, np.ndarray]] = {}
        self._marks: dict[str, tuple[Any, list[Marker]]] = {}  # each slice pane's markers and what they depend on
        self.renders = 0  # how many panes were actually rendered (the rest came from the cache)
        self._state: dict[str, Any] = session.snapshot()
        self._scene_seen: dict[str, Any] = {}  # the last scene data read (volumes are immutable)
        self._file_windows: dict[str, tuple[float, float] | None] = {}  # each background's own window, once read
        self.detach = session.subscribe(self._on_call, first=True)  # stops following the scene

    def _on_call(self, outcome: CallOutcome, args: Any, actor: str) -> None:
        if outcome.ok and outcome.state:
            self._state = outcome.state

    def sync(self) -> None:
        self._state = self.session.snapshot()

    def clear_cache(self) -> None:
        self._cache.clear()

    @property
    def kind(self) -> str:
        return str(self.session.kind)

    @property
    def slice_views(self) -> bool:
        """Whether the scene is volumes in slice views (the kind's descriptor says), not a slide."""
        return viewer_kind(self.session.kind).slice_views

    @property
    def display(self) -> str:
        """How the panes show the scene, as the kind's descriptor says: 'slices', 'slide' or 'pictures'."""
        return viewer_kind(self.session.kind).display

    @property
    def views(self) -> tuple[str, ...]:
        """The kind's own views, in order (the panes of its `views` layout)."""
        return viewer_kind(self.session.kind).view_names

    # ----- clinician actions -----
    def act(self, name: str, args: dict[str, Any]) -> CallOutcome:
        """A clinician's change of the scene: one audited handler call."""
        return self.session.call(name, args, actor="clinician")

    # ----- scene facts the widgets show -----
    def state(self) -> dict[str, Any]:
        """The scene state as of the last call."""
        return self._state

    def volumes(self) -> list[tuple[str, str]]:
        """(id, name) of the loaded volumes."""
        return [(v["id"], v["name"]) for v in self._state.get("volumes", [])] if self.slice_views else []

    def has_image(self) -> bool:
        if self.slice_views:
            return bool(self.volumes())
        return bool(self._state.get("image_open", self.display == "pictures"))  # a picture viewer may not say

    def agent_viewport(self) -> Viewport:
        """The slide viewer's viewport (the agent's field), from the state."""
        st = self._state
        return Viewport(float(st["center"][0]), float(st["center"][1]), float(st["downsample"]),
                        int(st["viewer_size"][0]), int(st["viewer_size"][1]))  # fmt: skip

    def slide_norm1000(self, level0: tuple[float, float]) -> tuple[float, float]:
        """Where a level-0 point lies in the agent's viewport, in 0–1000 coordinates (the zoom handler's)."""
        return self.agent_viewport().level0_to_norm1000(*level0)

    def slide_dimensions(self) -> tuple[int, int]:
        w, h = self._state["dimensions"]
        return int(w), int(h)

    def readout(self, ras: list[float], pane_volume: str | None = None) -> str:
        """The status-bar line for a RAS point under the cursor: coordinates and the background's and foreground's
        values (HU, SUV or as stored); coordinates alone while a call holds the scene, and over a side-by-side
        pane showing another volume than the background (its voxels are not the scene's to read)."""
        if pane_volume is not None and pane_volume != self._state.get("background_volume"):
            return readout(ras, [])
        data = self.session.scene_data(blocking=False)
        if data is None:
            data = self._scene_seen
        else:
            self._scene_seen = data
        shown = [(tag, data.get(key)) for tag, key in (("B", "volume"), ("F", "foreground")) if data]
        return readout(ras, [(tag, vol) for tag, vol in shown if vol is not None])

    def slide_readout(self, x: float, y: float) -> str:
        """The status-bar line for a level-0 slide point: pixels and µm."""
        return slide_readout(x, y, self._state.get("mpp"), self.slide_dimensions())

    def overview_target(self, vp: Viewport, x: float, y: float) -> tuple[float, float] | None:
        """The level-0 point under a click on the slide's overview thumbnail (device pixels); None off it."""
        x0, y0, x1, y1 = overview_rect(self.slide_dimensions(), vp)
        if not (x0 <= x <= x1 and y0 <= y <= y1):
            return None
        w, h = self.slide_dimensions()
        return (x - x0) / max(1, x1 - x0) * w, (y - y0) / max(1, y1 - y0) * h

    def frames(self) -> tuple[int, int] | None:
        """(frame, number of frames) of the background volume when it comes from a 4D file; else None."""
        bg = self._state.get("background_volume")
        entry = next((v for v in self._state.get("volumes", []) if v["id"] == bg), None)
        if entry is None or "frames" not in entry:
            return None
        return int(entry["frame"]), int(entry["frames"])

    def view(self, name: str) -> SliceView:
        """A slice view's geometry as of the last call."""
        v = self._state["views"][name]
        return SliceView(name, v["orientation"], np.array(v["center_ras"], dtype=float), tuple(v["fov_mm"]))

    def file_window(self) -> tuple[float, float] | None:
        """The background image's own (window, level) — DICOM WindowWidth/WindowCenter — or None; `Busy` when a
        call is running and it was not read yet (never waits for the session's lock)."""
        from copilot.engine.volume.display import file_window

        vid = self._state.get("background_volume")
        if not self.slice_views or vid is None:
            return None
        if vid not in self._file_windows:
            data = self.session.scene_data(blocking=False)
            if data is None:
                raise Busy
            volume = data.get("volume")
            names = {v["id"]: v["name"] for v in self._state.get("volumes", [])}
            if volume is None or getattr(volume, "name", None) != names.get(vid):
                raise Busy  # the scene moved on since this state: read it with the next one
            self._file_windows[vid] = file_window(volume)
        return self._file_windows[vid]

    def scene3d_inputs(self, blocking: bool = True) -> dict[str, Any] | None:
        """What the 3D view shows: the active volume and its window/level, the segments, the slice planes;
        None when there is nothing to show; `Busy` when not blocking and a call is running."""
        if not self.slice_views or not self.has_image():
            return None
        data = self.session.scene_data(blocking=blocking)
        if data is None:
            raise Busy
        if not data:
            return None
        planes = {n: (v.center, v.matrix.copy()) for n in ("red", "yellow", "green") for v in (self.view(n),)}
        return {**data, "planes": planes}

    # ----- rendering -----
    def frame(
        self, pane: str, size: tuple[int, int], evidence: list[dict[str, Any]] | None = None,
        crosshair: list[float] | None = None, selected: int | None = None, blocking: bool = True,
    ) -> Frame | None:  # fmt: skip
        """The pane rendered at `size` (device pixels) with its markers; None when nothing is loaded; `Busy` when
        not blocking and a call is running."""
        if not self.has_image():
            return None
        display = self.display
        if display == "slide":
            return self._slide_frame(size, evidence or [], selected, blocking)
        if display == "pictures":
            return self._picture_frame(pane, size, blocking)
        return self._slice_frame(pane, size, evidence or [], crosshair, selected, blocking)

    def _pixels(self, pane: str, key: Any, request: Peek, blocking: bool, fit: bool = False) -> np.ndarray:
        """The pane's RGB pixels for `request`, from the cache while `key` holds; `fit`: the picture fitted into
        the requested size whatever size the viewer drew."""
        hit = self._cache.get(pane)
        if hit is not None and hit[0] == key:
            return hit[1]
        state = self._state
        images = self.session.peek(request, blocking=blocking)
        if images is None:
            raise Busy
        image = images[pane] if pane in images else next(iter(images.values()), None)
        if image is None:
            return np.zeros((request.size[1], request.size[0], 3), np.uint8)
        if fit:
            image = ImageOps.pad(image.convert("RGB"), request.size, Image.Resampling.BILINEAR, color=(0, 0, 0))
        pixels = np.asarray(image.convert("RGB"))
        self.renders += 1
        if self._state is state:  # no call came in between: the pixels are those of `key`
            self._cache[pane] = (key, pixels)
        return pixels

    def _slice_frame(
        self, pane: str, size: tuple[int, int], evidence: list[dict[str, Any]], crosshair: list[float] | None,
        selected: int | None, blocking: bool,
    ) -> Frame:  # fmt: skip
        view, vid = split_pane(pane)
        key = _slice_key(self._state, view, vid, size)
        pixels = self._pixels(pane, key, Peek((view,), tuple(size), background=vid), blocking)  # type: ignore[arg-type]
        sv = self.view(view)
        m = sv.image_to_ras_matrix(size)
        step = float(self._state.get("slice_step_mm") or 1.0)
        depends = (key, step, list(evidence), list(crosshair or []), selected)  # another view's scroll changes none
        seen = self._marks.get(pane)
        if seen is None or seen[0] != depends:
            seen = self._marks[pane] = (depends, slice_markers(sv, size, step, evidence, crosshair, selected))
        return Frame(pane, pixels, seen[1], m)

    def _slide_frame(
        self, size: tuple[int, int], evidence: list[dict[str, Any]], selected: int | None, blocking: bool
    ) -> Frame:
        agent = self.agent_viewport()
        vp = screen_viewport(agent, size)
        key = ("slide", self._state.get("image"), vp.cx, vp.cy, vp.downsample, vp.width, vp.height)
        pixels = self._pixels("viewer", key, Peek(size=tuple(size), fill=True), blocking)  # type: ignore[arg-type]
        markers = slide_markers(self.slide_dimensions(), vp, agent, evidence, selected)
        return Frame("viewer", pixels, markers, viewport=vp)

    def _picture_frame(self, pane: str, size: tuple[int, int], blocking: bool) -> Frame:
        """Another kind's view as its viewer renders it (asked at the pane's size), fitted into the pane with its
        proportions kept and black around it (black all over while the viewer shows nothing)."""
        key = json.dumps([self._state, pane, list(size)], sort_keys=True, default=str)
        request = Peek((pane,), (int(size[0]), int(size[1])))
        return Frame(pane, self._pixels(pane, key, request, blocking, fit=True))


def _slice_key(st: dict[str, Any], view: str, vid: str | None, size: tuple[int, int]) -> str:
    """Everything a slice pane's pixels depend on (the scene state without the other views)."""
    scene = {k: v for k, v in st.items() if k not in ("views", "evidence")}
    if vid is not None:
        scene = {"display": st["display"].get(vid), "segments": st.get("segments"), "background": vid}
    geometry = {k: v for k, v in st["views"][view].items() if k != "last_size"}
    return json.dumps([scene, geometry, vid, list(size)], sort_keys=True)


def screen_viewport(agent: Viewport, size: tuple[int, int]) -> Viewport:
    """The slide as the screen shows it: the agent's viewport centre, scaled so that its whole field fits the
    pane (and the pane is filled with the slide around it)."""
    w, h = size
    scale = max(agent.width / w, agent.height / h)
    return Viewport(agent.cx, agent.cy, agent.downsample * scale, int(w), int(h))


def evidence_points_ras(evidence: list[dict[str, Any]], selected: int | None) -> list[tuple[list[float], bool]]:
    """Every RAS point of the evidence, flagged when its item is the selected one (for the 3D view)."""
    return [(ras, n == selected) for n, ev in enumerate(evidence) for ras, _, _ in _evidence_ras(ev)]


def _evidence_ras(ev: dict[str, Any]) -> list[tuple[list[float], str, str]]:
    """The RAS points of an item: (point, label, which end of a line or ""). A line's ends are `a`/`b`, a second
    line's `a2`/`b2` (a bidirectional's short axis, an angle's second arm), each pair joined where it is drawn."""
    out = []
    kind, name = ev.get("kind"), ev.get("label") or ev.get("kind", "")
    if kind == "bidirectional":
        said = f"{name} {float(ev['long_mm']):.1f} × {float(ev['short_mm']):.1f} mm"
        return [(ev[axis][end]["ras"], said, end + tag) for axis, tag in (("long", ""), ("short", "2"))
                for end in ("a", "b")]  # fmt: skip
    if kind == "angle":
        a, v, b = (p["ras"] for p in ev["points"])
        said = f"{name} {float(ev['angle_deg']):.1f}°"
        return [(v, said, "a"), (a, said, "b"), (v, said, "a2"), (b, said, "b2")]
    if kind == "ellipse":
        means = (ev.get("values") or {}).get("mean")
        said = f"{name} {float(ev['area_mm2']):.1f} mm²" + (f", mean {means:g} {ev.get('units') or ''}".rstrip()
                                                          if means is not None else "")  # fmt: skip
        return [(p, said, end) for p, end in zip(ev["axes_ras"], ("a", "b", "a2", "b2"), strict=True)]
    if "ras" in ev:
        out.append((ev["ras"], ev.get("label") or ev.get("kind", ""), ""))
    for end in ("a", "b"):
        if isinstance(ev.get(end), dict) and "ras" in ev[end]:
            out.append((ev[end]["ras"], distance_label(ev), end))
    return out


def distance_label(ev: dict[str, Any]) -> str:
    """What a distance is called where it is drawn: its label and its length in mm ("long axis 24.0 mm")."""
    length = ev.get("distance_mm")
    if length is None and isinstance(ev.get("a"), dict) and isinstance(ev.get("b"), dict):
        length = float(np.linalg.norm(np.subtract(ev["a"]["ras"], ev["b"]["ras"])))
    size = f"{float(length):.1f} mm" if length is not None else ""
    return f"{ev.get('label') or 'distance'} {size}".strip()


def slice_markers(
    sv: Any, size: tuple[int, int], step: float, evidence: list[dict[str, Any]], crosshair: list[float] | None,
    selected: int | None,
) -> list[Marker]:  # fmt: skip
    """Evidence points near the plane, key-slice lines of the other orientations, and the linked cursor."""
    out: list[Marker] = []
    w, h = size
    inv = np.linalg.inv(sv.image_to_ras_matrix(size))
    normal = sv.normal
    for n, ev in enumerate(evidence):
        labelled = False  # a distance is named once, at the first of its ends drawn here
        for ras, label, end in _evidence_ras(ev):
            p = np.asarray(ras, dtype=float)
            dist = abs(float(normal @ (p - sv.center)))
            if dist > max(NEAR_PLANE_MM, step):
                continue
            x, y = (inv[:2, :3] @ p + inv[:2, 3]).tolist()
            shown = "" if end and labelled else label
            labelled = labelled or bool(end)
            out.append(Marker("point", (x, y), shown, n, dist <= ON_PLANE_SLICES * step + 1e-6, end))
        if ev.get("kind") == "key_slice" and ev.get("view") in ("red", "yellow", "green"):
            line = _plane_line(sv, inv, size, ev["view"], float(ev["offset_mm"]))
            if line is not None:
                out.append(Marker("line", line, ev.get("label") or f"key {ev['view']}", n))
    if crosshair is not None:
        p = np.asarray(crosshair, dtype=float)
        x, y = (inv[:2, :3] @ p + inv[:2, 3]).tolist()
        if 0 <= x <= w and 0 <= y <= h:
            out.append(Marker("cross", (x, y)))
    return out


def _plane_line(sv: Any, inv: np.ndarray, size: tuple[int, int], view: str, offset: float) -> tuple[float, ...] | None:
    """The intersection of another view's key slice plane with this view, as a line across the image."""
    from copilot.engine.geometry import AXIS_VECTORS, VIEW_ORIENTATION

    n = AXIS_VECTORS[VIEW_ORIENTATION[view]]  # key slices give canonical offsets: the plane n·p = offset
    if abs(float(n @ sv.normal)) > 0.999:  # parallel: the view's own orientation
        return None
    w, h = size
    m = sv.image_to_ras_matrix(size)
    # points of the image (x, y) whose RAS lies on the plane n·p = offset: linear in x and y
    a, b, c = float(n @ m[:3, 0]), float(n @ m[:3, 1]), float(n @ m[:3, 3]) - offset
    if abs(b) >= abs(a):
        return (0.0, -c / b, float(w), -(a * w + c) / b)
    return (-c / a, 0.0, -(b * h + c) / a, float(h))


def slide_markers(
    dims: tuple[int, int], vp: Viewport, agent: Viewport, evidence: list[dict[str, Any]], selected: int | None
) -> list[Marker]:
    """Evidence points on the slide and on its overview thumbnail, and the agent's field of view."""
    out: list[Marker] = []
    x0, y0, x1, y1 = agent.bounds()
    sx0, sy0 = vp.level0_to_screen(x0, y0)
    sx1, sy1 = vp.level0_to_screen(x1, y1)
    if not (math.isclose(sx0, 0, abs_tol=1) and math.isclose(sx1, vp.width, abs_tol=1)) or not (
        math.isclose(sy0, 0, abs_tol=1) and math.isclose(sy1, vp.height, abs_tol=1)
    ):
        out.append(Marker("box", (sx0, sy0, sx1, sy1), "agent's view"))
    w, h = dims
    ox0, oy0, ox1, oy1 = overview_rect(dims, vp)
    for n, ev in enumerate(evidence):
        for (px, py), label in _evidence_points(ev):
            out.append(Marker("point", vp.level0_to_screen(px, py), label, n))
            out.append(Marker("overview_point", (ox0 + px / w * (ox1 - ox0), oy0 + py / h * (oy1 - oy0)), label, n))
    return out


def overview_rect(dims: tuple[int, int], vp: Viewport) -> tuple[int, int, int, int]:
    """Screen rectangle of the overview thumbnail the slide overlays draw (top right), from the slide's size."""
    w, h = dims
    scale = OVERVIEW_MAX / max(w, h)
    tw, th = max(1, round(w * scale)), max(1, round(h * scale))
    return (vp.width - MARGIN - tw, MARGIN, vp.width - MARGIN, MARGIN + th)


def _evidence_points(ev: dict[str, Any]) -> list[tuple[tuple[float, float], str]]:
    label = ev.get("label") or ev.get("kind", "")
    if isinstance(ev.get("point"), dict):
        return [((float(ev["point"]["x"]), float(ev["point"]["y"])), label)]
    if ev.get("center") is not None and ev.get("kind") == "view":
        return [((float(ev["center"][0]), float(ev["center"][1])), label)]
    return []


def jump_plan(session: Session, ras: list[float]) -> tuple[str, dict[str, float]]:
    """How to bring every slice view to a RAS point: ('offsets', {view: offset}) moves only the planes (the
    picture does not shift) when the point is inside each view's field; ('jump', {}) centres the views on it."""
    p = np.asarray(ras, dtype=float)
    views = session.snapshot()["views"]
    out: dict[str, float] = {}
    for name in ("red", "yellow", "green"):
        v = SliceView(name, views[name]["orientation"], np.array(views[name]["center_ras"]), views[name]["fov_mm"])
        in_plane = (p - v.center) - v.normal * float(v.normal @ (p - v.center))
        half = min(v.fov) / 2.0
        if abs(float(v.matrix[:, 0] @ in_plane)) > 0.9 * half or abs(float(v.matrix[:, 1] @ in_plane)) > 0.9 * half:
            return "jump", {}
        offset = float(v.axis @ p)  # the canonical offset (S, R or A), as set_slice_offset takes it
        if abs(offset - v.offset) > 1e-6:
            out[name] = round(offset, 6)
    return "offsets", out


def blank_views(session: Session, threshold: float = 0.005) -> list[str]:
    """Slice views showing (almost) nothing of the active volume: where an episode left them past the anatomy."""
    if not viewer_kind(session.kind).slice_views or not session.snapshot().get("volumes"):
        return []
    images = session.peek(Peek(("red", "yellow", "green"), (128, 128))) or {}
    return [
        name for name, image in images.items()
        if float((np.asarray(image.convert("L"))[32:-24, 16:-16] > 8).mean()) < threshold
    ]  # fmt: skip
