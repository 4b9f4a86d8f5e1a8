"""Prior comparison (Qt-free): a second study (a folder, a file or a PACS study) opened beside the current one and
scrolled together with it in RAS, once the clinician approves a rigid registration of the prior to the current.

The prior is a second session, with its own viewer and its own trace: the current study's session and trace stay
as they were (no study is loaded into the other's scene, nothing of one reaches the other's model). The
registration is the Track B operator's (Mattes MI, rigid), run on the two background volumes; the proposal, the
clinician's decision and the matrix are traced in both sessions. Once approved, every change of the current
views moves the prior's planes through the same RAS point (mapped by the registration), by system calls traced
in the prior's session; so does the window/level of a CT (`link_window`, on by default; the desktop's toggle).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from copilot.engine.geometry import SliceView
from copilot.session import Session
from copilot.trace.outcome import CallOutcome

VIEWS = ("red", "yellow", "green")
RECENTRE_MM = 1.0  # the prior's pictures are recentred when the current's centre moved more than this
# modalities whose voxel values mean the same in two studies (Hounsfield units): their window is linked; an MR's
# intensities are the scanner's own, so a prior MR keeps its own window
LINKED_MODALITIES = ("CT",)


def _rounded(ras: Any) -> list[float]:
    return [round(float(v), 6) for v in ras]


@dataclass
class Registration:
    """A proposed rigid registration of the prior (moving) to the current (fixed): current RAS → prior RAS."""

    matrix: np.ndarray  # 4×4
    metric: float
    iterations: int
    seconds: float

    def words(self) -> str:
        """What the clinician approves: the translation in mm and the rotation in degrees."""
        t = self.matrix[:3, 3]
        angle = float(np.degrees(np.arccos(np.clip((np.trace(self.matrix[:3, :3]) - 1.0) / 2.0, -1.0, 1.0))))
        shift = ", ".join(f"{axis} {v:+.1f} mm" for axis, v in zip("RAS", t, strict=True))
        return f"rigid: shift {shift}, rotation {angle:.1f}°, metric {self.metric:.3f}".replace("-", "−")

    def to_json(self) -> dict[str, Any]:
        return {"matrix": [[round(float(v), 6) for v in row] for row in self.matrix], "metric": round(self.metric, 6),
                "iterations": self.iterations, "seconds": round(self.seconds, 3)}  # fmt: skip


def picture_centre(views: dict[str, Any]) -> np.ndarray:
    """Where the pictures are centred: R and A of the axial view's centre, S of the sagittal's."""
    red, yellow = views["red"]["center_ras"], views["yellow"]["center_ras"]
    return np.array([red[0], red[1], yellow[2]], dtype=float)


def focus_point(session: Session) -> np.ndarray:
    """The point every slice view passes through: the meeting point of the three view planes (RAS)."""
    views = session.snapshot()["views"]
    normals, rhs = [], []
    for name in VIEWS:
        v = views[name]
        sv = SliceView(name, v["orientation"], np.array(v["center_ras"], dtype=float), tuple(v["fov_mm"]))
        normals.append(sv.normal)
        rhs.append(float(sv.normal @ sv.center))
    return np.linalg.solve(np.array(normals), np.array(rhs))


class PriorComparison:
    """The current session and a prior one; `propose`, then `approve` (or `reject`), then they scroll together."""

    def __init__(self, current: Session, prior: Session, label: str = "prior") -> None:
        self.current, self.prior, self.label = current, prior, label
        self.proposal: Registration | None = None
        self.approved: Registration | None = None
        self._following = threading.local()
        self.link_window = True  # the prior's window/level follows the current's (a CT pair: the same HU window)
        self._unsubscribe = current.subscribe(self._on_current, first=True)  # before the screens render

    def propose(self) -> Registration:
        """Align the prior's background volume to the current's (rigid, Mattes MI, `registration.align_prior`:
        coarse copies, sampled metric, started from the scanner's coordinates or the image centres): the
        proposal, traced in both sessions, changing nothing yet."""
        from copilot.engine.ops import registration as reg

        fixed = (self.current.scene_data() or {}).get("volume")
        moving = (self.prior.scene_data() or {}).get("volume")
        if fixed is None or moving is None:
            raise ValueError("both studies need an image series to register")
        result = reg.align_prior(fixed, moving)
        self.proposal = Registration(np.asarray(result.matrix_ras, dtype=float), float(result.metric),
                                     int(result.iterations), float(result.seconds))  # fmt: skip
        self._note("prior_registration_proposed", self.proposal.to_json())
        return self.proposal

    def approve(self) -> None:
        """The clinician approves the proposal: the prior follows the current from now on (at once, too)."""
        if self.proposal is None:
            raise ValueError("no registration was proposed")
        self.approved = self.proposal
        self._note("prior_registration_approved", self.approved.to_json())
        self.follow()

    def reject(self, reason: str = "") -> None:
        """The clinician rejects the proposal: nothing is aligned, the studies scroll apart."""
        if self.proposal is not None:
            self._note("prior_registration_rejected", {**self.proposal.to_json(), "reason": reason or None})
        self.proposal = None

    def _note(self, kind: str, payload: dict[str, Any]) -> None:
        self.current.note(kind, {"with": self.label, **payload})
        self.prior.note(kind, {"with": "current", **payload})

    def to_prior(self, ras: Any) -> np.ndarray:
        """A current RAS point in the prior's RAS (through the approved registration)."""
        if self.approved is None:
            raise ValueError("no approved registration")
        return (self.approved.matrix @ np.append(np.asarray(ras, dtype=float), 1.0))[:3]

    def follow(self) -> list[CallOutcome]:
        """Bring the prior's views to the current's (system calls in the prior's session): centred on the mapped
        centre of the current's pictures, at the same field of view, each plane through the mapped meeting point."""
        if self.approved is None:
            return []
        now, then = self.current.snapshot()["views"], self.prior.snapshot()["views"]
        out: list[CallOutcome] = []
        centre, shown = self.to_prior(picture_centre(now)), picture_centre(then)
        if float(np.abs(centre - shown).max()) > RECENTRE_MM:  # the pictures moved (a jump, a pan): recentre the prior
            out.append(self.prior.call("jump", {"ras": _rounded(centre), "size": 64}, actor="system"))
        for view in VIEWS:
            ratio = float(then[view]["fov_mm"][0]) / float(now[view]["fov_mm"][0])
            if abs(ratio - 1.0) > 0.01:  # the current was zoomed: the prior shows the same field
                out.append(self.prior.call("zoom", {"view": view, "factor": round(ratio, 6), "size": 64},
                                           actor="system"))  # fmt: skip
        target = self.to_prior(focus_point(self.current))
        planes = self.prior.snapshot()["views"]
        for view in VIEWS:
            axis = SliceView(view, planes[view]["orientation"], np.array(planes[view]["center_ras"]),
                             tuple(planes[view]["fov_mm"])).axis  # fmt: skip
            offset = round(float(axis @ target), 6)
            if abs(offset - float(planes[view]["offset"])) > 1e-4:
                out.append(self.prior.call("set_slice_offset", {"view": view, "offset": offset, "size": 64},
                                           actor="system"))  # fmt: skip
        out += self.follow_window()
        return out

    def follow_window(self) -> list[CallOutcome]:
        """The prior's background windowed as the current's, when `link_window` is on and both are CT (a system
        call in the prior's session); nothing otherwise."""
        now, then = self.current.scene_data() or {}, self.prior.scene_data() or {}
        fixed, moving = now.get("volume"), then.get("volume")
        if not self.link_window or fixed is None or moving is None:
            return []
        if fixed.modality != moving.modality or fixed.modality not in LINKED_MODALITIES:
            return []
        window, level = float(now["window"]), float(now["level"])
        if abs(window - float(then["window"])) < 1e-6 and abs(level - float(then["level"])) < 1e-6:
            return []
        return [self.prior.call("wl", {"window": window, "level": level, "size": 64}, actor="system")]

    def _on_current(self, outcome: CallOutcome, args: Any, actor: str) -> None:
        if self.approved is None or not outcome.ok or getattr(self._following, "busy", False):
            return
        self._following.busy = True
        try:
            self.follow()
        except Exception as exc:  # a point outside the prior: the prior stays, the reason traced there
            self.prior.note("prior_follow_refused", {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            self._following.busy = False

    def close(self) -> None:
        """Stop following and end the prior's session (its trace gets its end)."""
        self._unsubscribe()
        self.prior.close({"status": "closed"})
