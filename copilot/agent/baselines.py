"""Offline baseline policies: image heuristics that act only through the audited handlers.

They read the images the handlers return, like a model would, and are reported as baselines, never as
the product's intelligence:
- brain MRI: scroll FLAIR, take the largest very bright region, convert its centre to RAS, check T1c
  enhancement there (enhancing → A glioblastoma, else B; nothing bright → C);
- longitudinal MRI: bright (enhancing) area on CURRENT vs OLD CT1 at the same window → RANO by the
  area ratio (≥ 1.25 PD, ≤ 0.5 PR, ≈ 0 CR, else SD);
- lung PET/CT: the hottest PET region → RAS on the source CT; lobe from its position, T stage from its
  diameter, N0, adenocarcinoma G2 (the commonest);
- breast WSI: the densest nuclear region at low power → zoom → its centre in level-0 px; label IC;
- lymph-node WSI: a nest darker than the lymphoid background (but not as dark as a fold), if it stands
  out → tumour, sized
  from the pixel size into ITC / micro / macro; otherwise negative.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image
from scipy import ndimage

from copilot.agent.policy import EpisodeResult
from copilot.cases.pack import CasePack
from copilot.session import Session
from copilot.trace.outcome import CallOutcome


def _grey(outcome: CallOutcome, n: int = 0) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(outcome.images[n].data)).convert("L"), dtype=np.float32)


def _rgb(outcome: CallOutcome, n: int = 0) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(outcome.images[n].data)).convert("RGB"), dtype=np.float32)


def _no_overlays(img: np.ndarray) -> np.ndarray:
    """Blank the bands where corner text is drawn."""
    out = img.copy()
    h = out.shape[0]
    out[: int(0.12 * h)] = 0
    out[int(0.92 * h) :] = 0
    return out


def _largest_bright(img: np.ndarray, level: float) -> tuple[float, float, float] | None:
    """(area px, x, y) of the largest component above `level`."""
    labels, n = ndimage.label(img >= level)
    if n == 0:
        return None
    sizes = ndimage.sum(np.ones_like(img), labels, range(1, n + 1))
    k = int(np.argmax(sizes)) + 1
    ys, xs = np.nonzero(labels == k)
    return float(sizes[k - 1]), float(xs.mean() + 0.5), float(ys.mean() + 0.5)


class _Episode:
    """Handler calls with a round budget."""

    def __init__(self, session: Session, budget: int) -> None:
        self.session, self.budget, self.rounds = session, budget, 0

    def call(self, name: str, args: dict[str, Any]) -> CallOutcome:
        if self.rounds >= self.budget:
            raise _BudgetSpent
        self.rounds += 1
        outcome = self.session.call(name, args, actor="agent")
        if not outcome.ok:  # rejected by the clinician or refused: the heuristic cannot read what it needed
            raise Refused(outcome, self.rounds)
        return outcome


class _BudgetSpent(Exception):
    pass


class Refused(Exception):
    """A call the baseline needed was rejected or refused; it ends its reading and says which and why."""

    def __init__(self, outcome: CallOutcome, rounds: int) -> None:
        error = outcome.error or {}
        super().__init__(f"{outcome.name}: {error.get('message') or error.get('code') or 'refused'}")
        self.outcome, self.rounds = outcome, rounds

    def result(self) -> EpisodeResult:
        """What the baseline answers: no finding, and the call that stopped it."""
        code = (self.outcome.error or {}).get("code", "")
        what = "was rejected" if code == "rejected_by_clinician" else "was refused"
        text = f"The baseline stopped reading: {self.outcome.name} {what} ({self}). No answer is given."
        return EpisodeResult(text, "rejected" if code == "rejected_by_clinician" else "done", self.rounds)


def _scan_axial(ep: _Episode, size: int, calls: int = 3) -> list[tuple[float, np.ndarray]]:
    """(offset, grey image) keyframes over the axial range of the active volume."""
    rng = ep.call("get_slice_offset_range", {"view": "red"}).result
    lo, hi, step = rng["min"], rng["max"], rng["step"]
    ep.call("set_slice_offset", {"view": "red", "offset": lo, "size": 64})
    per = max(1, int((hi - lo) / step / calls))
    frames = []
    for _ in range(calls):
        out = ep.call(
            "scroll", {"view": "red", "direction": "up", "num_slices": per, "output": "keyframes", "size": size}
        )
        frames += [(off, _grey(out, n)) for n, off in enumerate(out.result["frame_offsets"])]
    return frames


def _evidence(ras: list[float]) -> str:
    r, a, s = ras
    return (
        f"EVIDENCE:\nKEY_SLICE_AXIAL_MM: {s:.2f}\nKEY_SLICE_SAGITTAL_MM: {r:.2f}\nKEY_SLICE_CORONAL_MM: {a:.2f}\n"
        f"RAS: [{r:.2f}, {a:.2f}, {s:.2f}]\n"
    )


def _locate_bright(ep: _Episode, volume: str, size: int = 256) -> tuple[list[float], float, float] | None:
    """RAS of the largest very bright region of a volume, with its area (px) and the frame offset."""
    ep.call("select_volume", {"volume_name": volume, "view": "red", "size": 64})
    best = None
    for off, img in _scan_axial(ep, size):
        img = _no_overlays(img)
        found = _largest_bright(img, max(200.0, float(np.percentile(img[img > 10], 99.5)) if np.any(img > 10) else 255))
        if found and (best is None or found[0] > best[1][0]):
            best = (off, found)
    if best is None or best[1][0] < 12:
        return None
    off, (area, x, y) = best
    ep.call("set_slice_offset", {"view": "red", "offset": off, "size": size})
    ras = ep.call("image_coords_to_ras", {"view": "red", "point_1000": [x / size * 1000, y / size * 1000]}).result[
        "ras"
    ]
    return ras, area, off


class BrainBaseline:
    name = "baseline"

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        ep = _Episode(session, budget)
        try:
            found = _locate_bright(ep, "FLAIR")
            if found is None:
                return EpisodeResult("No FLAIR abnormality found.\nANSWER: C", rounds=ep.rounds)
            ras, _, _ = found
            ep.call("jump", {"ras": ras, "view": "red", "size": 64})
            t1c = ep.call("select_volume", {"volume_name": "T1c", "view": "red", "size": 256})
            img = _no_overlays(_grey(t1c))
            c = img[96:160, 96:160]
            enhancing = c.max() > np.percentile(img[img > 10], 99.0) if np.any(img > 10) else False
            letter = "A" if enhancing else "B"
            return EpisodeResult(
                f"Baseline: bright FLAIR region, enhancing={bool(enhancing)}.\n{_evidence(ras)}ANSWER: {letter}",
                rounds=ep.rounds,
            )
        except _BudgetSpent:
            return EpisodeResult("Budget spent.\nANSWER: A", "budget_exhausted", ep.rounds)


class LongitudinalBaseline:
    name = "baseline"

    def _area(self, ep: _Episode, volume: str, window: tuple[float, float] | None) -> tuple[float, tuple[float, float]]:
        ep.call("select_volume", {"volume_name": volume, "view": "red", "size": 64})
        if window is None:
            out = ep.call("wl", {"auto": True, "view": "red", "size": 64}).result
            window = (out["window"], out["level"])
        else:
            ep.call("wl", {"window": window[0], "level": window[1], "view": "red", "size": 64})
        frames = _scan_axial(ep, 192, calls=2)
        return float(sum((_no_overlays(img) >= 235).sum() for _, img in frames)), window

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        ep = _Episode(session, budget)
        try:
            old, window = self._area(ep, "OLD_CT1", None)
            cur, _ = self._area(ep, "CURRENT_CT1", window)
        except _BudgetSpent:
            return EpisodeResult("ANSWER: B", "budget_exhausted", ep.rounds)
        ratio = cur / old if old > 0 else (2.0 if cur > 0 else 1.0)
        letter = "A" if ratio >= 1.25 else "D" if ratio <= 0.05 else "C" if ratio <= 0.5 else "B"
        fields = {
            "NON_MEASURABLE_LESION": "NO",
            "T2_PROGRESSION": "YES" if letter == "A" else "NO",
            "CURRENT_TARGET_LESION": "NO" if letter == "D" else "YES",
            "NEW_TARGET_LESION": "NO",
            "CURRENT_NON_TARGET_LESION": "NO",
            "NEW_NON_TARGET_LESION": "NO",
        }
        text = "\n".join(f"{k}: {v}" for k, v in fields.items())
        return EpisodeResult(f"Baseline: enhancing area ratio {ratio:.2f}.\n{text}\nANSWER: {letter}", rounds=ep.rounds)


def lobe_letter(r: float, a: float, s: float) -> str:
    """Lobe from a RAS position, with an oblique fissure running down and forward (S = -20 - A)."""
    lower = s < -20.0 - a
    if r >= 0:
        return "C" if lower else ("B" if s < 10.0 and a > -25.0 else "A")
    return "E" if lower else ("F" if s < 0.0 and a > -10.0 else "D")


class LungBaseline:
    name = "baseline"

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        ep = _Episode(session, budget)
        try:
            inventory = ep.call("get_viewer_state", {"include_fusion": False, "include_slice_positions": False})
            volumes = inventory.result["inventory"]
            pet = next((v["name"] for v in volumes if v["modality"] == "PT"), None)
            source = case.prompt.get("source_series", volumes[0]["name"])
            if pet is None:
                return EpisodeResult("1A2A3A4A5B", rounds=ep.rounds)
            ep.call("select_volume", {"volume_name": pet, "view": "red", "size": 64})
            peak = next(v["value_range"][1] for v in volumes if v["name"] == pet)
            ep.call("wl", {"window": 0.5 * peak, "level": 0.75 * peak, "view": "red", "size": 64})
            best = None
            for off, img in _scan_axial(ep, 256):
                img = _no_overlays(img)
                found = _largest_bright(img, 240.0)
                if found and (best is None or found[0] > best[1][0]):
                    best = (off, found)
            if best is None:
                return EpisodeResult("No hot lesion.\n1A2A3A4A5B", rounds=ep.rounds)
            off, (area, x, y) = best
            ep.call("select_volume", {"volume_name": source, "view": "red", "size": 64})
            placed = ep.call("set_slice_offset", {"view": "red", "offset": off, "size": 256})
            ras = ep.call(
                "image_coords_to_ras", {"view": "red", "point_1000": [x / 256 * 1000, y / 256 * 1000]}
            ).result["ras"]
            pixel_mm = max(placed.state["views"]["red"]["fov_mm"]) / 256
            diameter_cm = 2.0 * np.sqrt(area / np.pi) * pixel_mm / 10.0
        except _BudgetSpent:
            return EpisodeResult("1A2A3A4A5B", "budget_exhausted", ep.rounds)
        t = "A" if diameter_cm <= 3 else "B" if diameter_cm <= 5 else "C" if diameter_cm <= 7 else "D"
        compact = f"1{lobe_letter(*ras)}2{t}3A4A5B"
        return EpisodeResult(
            f"Baseline: hottest PET lesion, {diameter_cm:.1f} cm.\n{_evidence(ras)}{compact}", rounds=ep.rounds
        )


def _tissue_grid(
    rgb: np.ndarray, box: tuple[int, int, int, int] | None, cell: int = 32
) -> tuple[np.ndarray, np.ndarray]:
    """Per grid cell: tissue fraction and nuclear (dark purple) fraction of a screenshot."""
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    tissue = (rgb.max(axis=2) - rgb.min(axis=2) > 25) & (rgb.mean(axis=2) > 20)
    nuclei = tissue & (r < 150) & (b > g + 20)
    h, w = tissue.shape
    tissue[: int(0.06 * h)] = False  # magnification label band
    tissue[int(0.88 * h) :, : int(0.3 * w)] = False  # scale bar
    if box is not None:
        x0, y0, x1, y1 = box
        tissue[max(0, y0 - 4) : y1 + 4, max(0, x0 - 4) : x1 + 4] = False
    gh, gw = h // cell, w // cell
    t = tissue[: gh * cell, : gw * cell].reshape(gh, cell, gw, cell).mean(axis=(1, 3))
    n = nuclei[: gh * cell, : gw * cell].reshape(gh, cell, gw, cell).mean(axis=(1, 3))
    return t, n


class SlideBaseline:
    """Densest nuclear region: a slide label with one localization (`slide_label`, BRACS-style answers) or
    tumour presence and the largest metastasis (CAMELYON-style answers)."""

    name = "baseline"

    def __init__(self, slide_label: bool = False) -> None:
        self.slide_label = slide_label

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        ep = _Episode(session, budget)
        shot = ep.call("capture_viewer", {"label": "low power"})
        rgb = _rgb(shot)
        cell = 32
        box = shot.result.get("overview_box")
        tissue, nuclei = _tissue_grid(rgb, tuple(box) if box else None, cell)
        density = np.where(tissue > 0.8, nuclei / np.maximum(tissue, 1e-6), np.nan)
        h, w = rgb.shape[:2]
        if self.slide_label:
            if np.all(np.isnan(density)):
                return EpisodeResult('{"wsi_label": "N", "localizations": []}', rounds=ep.rounds)
            gy, gx = np.unravel_index(int(np.nanargmax(density)), density.shape)
            x, y = (gx + 0.5) * cell / w * 1000, (gy + 0.5) * cell / h * 1000
            ep.call("zoom", {"direction": "in", "amount": 4, "unit": "factor", "x": x, "y": y})
            pt = ep.call("viewer_point_to_wsi_coordinate", {"x": 500, "y": 500}).result
            return EpisodeResult(
                '{"selected_option": "G", "wsi_label": "IC", "confidence": 0.2, '
                '"brief_rationale": "densest nuclear region (baseline)", '
                f'"localizations": [{{"x": {pt["x"]}, "y": {pt["y"]}}}]}}',
                rounds=ep.rounds,
            )
        return self._lymph(ep, shot, rgb)

    @staticmethod
    def _lymph(ep: _Episode, shot: CallOutcome, rgb: np.ndarray, cell: int = 16) -> EpisodeResult:
        """A nest darker than the lymphoid background, but not as dark as a fold (an artefact)."""
        negative = '{"tumor_presence": "no_tumor", "largest_metastasis": "negative", "localizations": []}'
        h, w = rgb.shape[:2]
        gh, gw = h // cell, w // cell
        tissue = (rgb.max(axis=2) - rgb.min(axis=2)) > 25
        t = tissue[: gh * cell, : gw * cell].reshape(gh, cell, gw, cell).mean(axis=(1, 3))
        b = rgb.mean(axis=2)[: gh * cell, : gw * cell].reshape(gh, cell, gw, cell).mean(axis=(1, 3))
        inner = ndimage.binary_erosion(t > 0.95, iterations=1)
        if inner.sum() < 8:
            return EpisodeResult(negative, rounds=ep.rounds)
        med, sd = float(np.median(b[inner])), float(np.std(b[inner])) + 1e-6
        nest = inner & ((b - med) / sd < -2.5) & (b > 0.8 * med)
        labels, n = ndimage.label(nest)
        if n == 0:
            return EpisodeResult(negative, rounds=ep.rounds)
        sizes = ndimage.sum(nest, labels, range(1, n + 1))
        k = int(np.argmax(sizes)) + 1
        if sizes[k - 1] < 2:
            return EpisodeResult(negative, rounds=ep.rounds)
        ys, xs = np.nonzero(labels == k)
        x, y = (xs.mean() + 0.5) * cell / w * 1000, (ys.mean() + 0.5) * cell / h * 1000
        state = shot.state
        mpp = (state.get("mpp") or [1.0])[0]
        diameter_mm = 2 * np.sqrt(sizes[k - 1] / np.pi) * cell * state["downsample"] * mpp / 1000.0
        largest = "itc" if diameter_mm < 0.2 else "micro" if diameter_mm <= 2.0 else "macro"
        pt = ep.call("viewer_point_to_wsi_coordinate", {"x": x, "y": y}).result
        return EpisodeResult(
            '{"tumor_presence": "tumor_present", "largest_metastasis": "' + largest + '", '
            '"confidence": 0.2, "brief_rationale": "dark nest in lymphoid tissue (baseline)", '
            f'"localizations": [{{"x": {pt["x"]}, "y": {pt["y"]}}}]}}',
            rounds=ep.rounds,
        )


def no_baseline(module: str) -> str:
    """Why the baseline cannot run on a module's case whose descriptor offers none (one line)."""
    return f"the {module} module has no offline baseline; run the prior or a model"


class BaselinePolicy:
    """Dispatches to the baseline of the case's module (`baselines` maps a module to its baseline class)."""

    name = "baseline"

    def __init__(self, baselines: dict[str, Any]) -> None:
        self.baselines = baselines

    def run(self, session: Session, case: CasePack, budget: int) -> EpisodeResult:
        if case.module not in self.baselines:
            raise ValueError(f"no baseline for this study (module {case.module!r}); it needs a MedFlow case pack")
        baseline = self.baselines[case.module]()
        if baseline is None:  # a module may offer none (a plug-in's)
            raise ValueError(no_baseline(case.module))
        try:
            return baseline.run(session, case, budget)  # type: ignore[no-any-return]
        except Refused as refused:  # told why, it ends without a crash
            return refused.result()
