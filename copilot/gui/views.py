"""Pane widgets: a slice view, the slide view and the 3D view. Each paints the raw pixels of a `Frame` at
device resolution (no PNG anywhere on the way) and the frame's markers over them; pointer positions
map back through the frame's own geometry. Changes of the scene go to the window's `act`."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPen
from PySide6.QtWidgets import QWidget

from copilot.gui.overlay_text import outlined_text
from copilot.panel.labels import Box, place_labels
from copilot.panel.layout import VIEW_TITLES
from copilot.panel.orientation import edge_letters, marker_axes
from copilot.panel.screen import Frame, split_pane

EVIDENCE_COLOUR = QColor(255, 220, 0)
SELECTED_COLOUR = QColor(0, 230, 255)
PANE_BORDER = {"red": QColor(190, 60, 60), "yellow": QColor(200, 180, 50), "green": QColor(80, 160, 70)}


LETTER_COLOUR = QColor(255, 235, 150)
AXIS_COLOURS = {"R": QColor(235, 80, 80), "A": QColor(90, 200, 90), "S": QColor(90, 140, 255)}


def to_qimage(pixels: np.ndarray, ratio: float) -> QImage:
    """An H×W×3 uint8 array as a 32-bit QImage (one conversion per frame: painting 24-bit pixels converts them on
    every repaint, several times slower than this copy)."""
    h, w = pixels.shape[:2]
    image = QImage(pixels.data, w, h, 3 * w, QImage.Format.Format_RGB888).convertToFormat(QImage.Format.Format_RGB32)
    image.setDevicePixelRatio(ratio)
    return image


class PaneWidget(QWidget):
    """Base pane: shows a frame; subclasses handle the pointer."""

    def __init__(self, window: Any, pane: str) -> None:  # window: the MainWindow (app.py imports this module)
        super().__init__()
        self.win, self.pane = window, pane
        self.frame: Frame | None = None
        self._image: QImage | None = None
        self.paints = 0
        self.setMouseTracking(True)
        self.setMinimumSize(120, 120)
        self.setAttribute(Qt.WidgetAttribute.WA_OpaquePaintEvent)
        self._press: tuple[float, float, Any, Any] | None = None
        self._labels: tuple[Any, list[Box | None]] | None = None  # the last label placement and what it depends on

    def device_size(self) -> tuple[int, int]:
        r = self.devicePixelRatioF()
        return max(16, round(self.width() * r)), max(16, round(self.height() * r))

    def set_frame(self, frame: Frame | None) -> None:
        self.frame = frame
        self._image = None if frame is None else to_qimage(frame.pixels, self.devicePixelRatioF())
        self.update()
        pointer = getattr(self.win, "pointer", None)
        line = pointer.shown(self.pane, frame) if pointer is not None else None
        if line is not None:  # the pointer rests here: its value follows the new picture
            self.win.readout.setText(line)

    def follow_pointer(self, event: Any) -> None:
        """The pointer moved over this pane: its value (or slide point) in the status bar."""
        pointer = getattr(self.win, "pointer", None)
        if self.frame is not None and pointer is not None:
            line = pointer.moved(self.pane, *self.device_pos(event), self.frame)
            if line:
                self.win.readout.setText(line)

    def leaveEvent(self, event: Any) -> None:
        pointer = getattr(self.win, "pointer", None)
        if pointer is not None:
            pointer.left(self.pane)

    def paintEvent(self, event: Any) -> None:
        p = QPainter(self)
        image = self._image
        if image is None or image.width() < self.width() * self.devicePixelRatioF() or \
                image.height() < self.height() * self.devicePixelRatioF():  # fmt: skip
            p.fillRect(self.rect(), QColor(0, 0, 0))  # black where no picture covers the pane
        if self._image is not None:
            p.drawImage(QPointF(0, 0), self._image)
            if self.frame is not None:
                self.paint_markers(p, self.frame, 1.0 / self.devicePixelRatioF())
        border = PANE_BORDER.get(split_pane(self.pane)[0])
        if border is not None:
            p.setPen(QPen(border, 2))
            p.drawRect(QRectF(1, 1, self.width() - 2, self.height() - 2))
        p.end()
        self.paints += 1

    def paint_markers(self, p: QPainter, frame: Frame, s: float) -> None:
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setFont(QFont("Sans", 9))
        selected = self.win.model.selected if self.win.model is not None else None
        fm = QFontMetricsF(p.font())
        pointed = [m for m in frame.markers if m.kind == "point"]  # labels placed clear of each other and the rings
        lines = [Box(p0.x(), p0.y() - fm.ascent(), fm.horizontalAdvance(m.label), fm.height())
                 for m in frame.markers if m.kind == "line" for p0 in (line_label_at(m, s),)]  # fmt: skip
        boxes = dict(zip(map(id, pointed), self._label_boxes(pointed, lines, s, fm), strict=True))
        ends: dict[tuple[int, str], list[Any]] = {}
        for m in pointed:  # a line's two ends (a distance; a bidirectional's or an angle's two), joined
            if m.index is not None and m.end:
                ends.setdefault((m.index, m.end[1:]), []).append(m)
        for pair in (e for e in ends.values() if len(e) == 2):
            p.setPen(QPen(EVIDENCE_COLOUR, 1.5))
            p.drawLine(QPointF(pair[0].coords[0] * s, pair[0].coords[1] * s),
                       QPointF(pair[1].coords[0] * s, pair[1].coords[1] * s))  # fmt: skip
        for m in frame.markers:
            colour = SELECTED_COLOUR if m.index is not None and m.index == selected else EVIDENCE_COLOUR
            if m.kind == "cross":
                x, y = m.coords[0] * s, m.coords[1] * s
                p.setPen(QPen(QColor(255, 220, 0), 1))
                p.drawLine(QPointF(x - 14, y), QPointF(x - 4, y))
                p.drawLine(QPointF(x + 4, y), QPointF(x + 14, y))
                p.drawLine(QPointF(x, y - 14), QPointF(x, y - 4))
                p.drawLine(QPointF(x, y + 4), QPointF(x, y + 14))
            elif m.kind in ("point", "overview_point"):
                x, y = m.coords[0] * s, m.coords[1] * s
                r = 3.0 if m.kind == "overview_point" else 9.0
                pen = QPen(colour, 2 if m.solid else 1, Qt.PenStyle.SolidLine if m.solid else Qt.PenStyle.DashLine)
                p.setPen(pen)
                p.drawEllipse(QPointF(x, y), r, r)
                if m.kind == "point":
                    p.drawLine(QPointF(x - r - 5, y), QPointF(x - r + 2, y))
                    p.drawLine(QPointF(x + r - 2, y), QPointF(x + r + 5, y))
                    box = boxes.get(id(m))
                    if box is not None:
                        outlined_text(p, QPointF(box.x, box.y + fm.ascent()), m.label, colour)
            elif m.kind == "line":
                x0, y0, x1, y1 = (c * s for c in m.coords)
                p.setPen(QPen(colour, 1, Qt.PenStyle.DashLine))
                p.drawLine(QPointF(x0, y0), QPointF(x1, y1))
                outlined_text(p, line_label_at(m, s), m.label, colour)
            elif m.kind == "box":
                x0, y0, x1, y1 = (c * s for c in m.coords)
                p.setPen(QPen(QColor(80, 200, 255), 1, Qt.PenStyle.DashLine))
                p.drawRect(QRectF(x0, y0, x1 - x0, y1 - y0))

    def _label_boxes(self, pointed: list[Any], lines: list[Box], s: float, fm: QFontMetricsF) -> list[Box | None]:
        """Where the points' labels go, placed again only when the points, their labels, the pane's size or the
        other labels' boxes changed (most repaints, a scroll of another view among them, change none)."""
        points = [(m.coords[0] * s, m.coords[1] * s) for m in pointed]
        texts = [m.label for m in pointed]
        key = (tuple(points), tuple(texts), self.width(), self.height(), tuple(lines), fm.height())
        if self._labels is None or self._labels[0] != key:
            measure = lambda t: (fm.horizontalAdvance(t), fm.height())  # noqa: E731
            self._labels = (key, place_labels(points, texts, self.width(), self.height(), measure, fixed=lines))
        return self._labels[1]

    def released(self, press: Any, dx: float, dy: float, event: Any) -> None:
        """A click or drag ended (subclasses act on it)."""

    def device_pos(self, event: Any) -> tuple[float, float]:
        r = self.devicePixelRatioF()
        return event.position().x() * r, event.position().y() * r

    def mousePressEvent(self, event: Any) -> None:
        x, y = self.device_pos(event)
        self._press = (x, y, event.button(), event.modifiers())
        self._last = (x, y)

    def mouseReleaseEvent(self, event: Any) -> None:
        press, self._press = self._press, None
        if press is not None:
            x, y = self.device_pos(event)
            self.released(press, x - press[0], y - press[1], event)


SLICE_KEYS = {Qt.Key.Key_Up: "up", Qt.Key.Key_Down: "down", Qt.Key.Key_PageUp: "page_up",
              Qt.Key.Key_PageDown: "page_down", Qt.Key.Key_Home: "home", Qt.Key.Key_End: "end"}  # fmt: skip


class SlicePane(PaneWidget):
    """A slice view: wheel scrolls (Ctrl+wheel zooms about the pointer), click places the linked cursor, the
    ruler's left-drag measures, middle- or Shift-drag pans, right-drag sets window/level, arrows, PageUp/PageDown
    and Home/End scroll. A prior's pane only scrolls: the current view moves and the prior follows it."""

    def __init__(self, window: Any, pane: str) -> None:
        super().__init__(window, pane)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.prior = pane.startswith("prior:")
        self._drag_end: tuple[float, float] | None = None
        self._letters: tuple[tuple[float, ...], dict[str, str]] | None = None  # the edge letters and the axes they face

    @property
    def view(self) -> str:
        """The slice view this pane shows (a prior's pane: the current's same view)."""
        return self.pane.split(":", 1)[1] if self.prior else split_pane(self.pane)[0]

    def enterEvent(self, event: Any) -> None:
        self.setFocus()  # the keys scroll the pane under the pointer

    def keyPressEvent(self, event: Any) -> None:
        key = SLICE_KEYS.get(event.key())
        if key is None or self.win.tools is None:
            super().keyPressEvent(event)
            return
        self.win.tools.key(self.view, key)

    def wheelEvent(self, event: Any) -> None:
        up = event.angleDelta().y() > 0
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier and self.frame is not None and not self.prior:
            x, y = event.position().x() * self.devicePixelRatioF(), event.position().y() * self.devicePixelRatioF()
            self.win.tools.zoom_at(self.view, self.frame, (x, y), 1.25 if up else 0.8)
            return
        self.win.model.scroll(self.view, 1 if up else -1)

    def _ruler_on(self) -> bool:
        action = getattr(self.win, "ruler_action", None)
        return bool(action is not None and action.isChecked())

    def _shape_on(self) -> str:
        """The shape tool checked in the toolbar ('' for none)."""
        actions = getattr(self.win, "shape_actions", None) or {}
        return next((shape for shape, action in actions.items() if action.isChecked()), "")

    def _shape(self, tool: str, start: tuple[float, float], end: tuple[float, float]) -> None:
        """A shape tool's drag, recorded as the clinician's evidence (a bidirectional's first drag waits)."""
        from copilot.panel.shape_drag import ShapeDrags

        drags = getattr(self.win, "shape_drags", None)
        if drags is None or drags.model is not self.win.model:
            drags = self.win.shape_drags = ShapeDrags(self.win.model)
        out = drags.drag(tool, self.view, self.frame, start, end)
        if out is None:
            self.win.statusBar().showMessage("long axis drawn: now drag across it for the short axis", 6000)
        elif not out.ok:
            self.win.statusBar().showMessage(f"not recorded: {(out.error or {}).get('message', '')}", 8000)

    def released(self, press: Any, dx: float, dy: float, event: Any) -> None:
        self._drag_end = None
        if self.frame is None or self.prior:
            return
        moved = abs(dx) > 2 or abs(dy) > 2
        button, mods = press[2], press[3]
        end = self.device_pos(event)
        if button == Qt.MouseButton.LeftButton and moved and self._shape_on():
            self._shape(self._shape_on(), (press[0], press[1]), end)
        elif button == Qt.MouseButton.LeftButton and moved and self._ruler_on():
            self.win.tools.ruler(self.view, self.frame, (press[0], press[1]), end)
        elif moved and (button == Qt.MouseButton.MiddleButton or (
                button == Qt.MouseButton.LeftButton and mods & Qt.KeyboardModifier.ShiftModifier)):  # fmt: skip
            self.win.tools.pan(self.view, self.frame, (press[0], press[1]), end)
        elif button == Qt.MouseButton.RightButton and moved:
            self.win.tools.window_level_drag(dx, dy)
        elif button == Qt.MouseButton.LeftButton and not moved:
            ras = self.frame.to_ras(*end)
            if ras is not None:
                self.win.model.jump(ras)
        self.update()

    def mouseMoveEvent(self, event: Any) -> None:
        self.follow_pointer(event)
        if self._press is not None and self._press[2] == Qt.MouseButton.LeftButton and self._ruler_on():
            self._drag_end = self.device_pos(event)
            self.update()

    def paint_markers(self, p: QPainter, frame: Frame, s: float) -> None:
        if not self.prior and getattr(self.win, "seg_shown", None) is not None:  # a stored SEG, under the marks
            from copilot.gui.seg_dock import paint_segments

            paint_segments(p, self, frame, s)
        super().paint_markers(p, frame, s)
        if frame.image_to_ras is not None:
            facing = tuple(frame.image_to_ras[:3, :2].ravel().tolist())  # the letters follow the picture's axes only
            if self._letters is None or self._letters[0] != facing:
                self._letters = (facing, edge_letters(frame.image_to_ras))
            paint_edge_letters(p, self._letters[1], self.width(), self.height())
        if self.prior:  # each side says which study it is: date, how much earlier, description
            outlined_text(p, QPointF(10, 62), getattr(self.win, "prior_caption", "") or "PRIOR",
                          QColor(150, 220, 255))  # fmt: skip
            outlined_text(p, QPointF(10, 80), "aligned, scrolls with the current", QColor(150, 220, 255))
        elif caption := str(getattr(self.win, "study_caption", None) or ""):  # every pane says which study it is
            current = "CURRENT " if getattr(self.win, "prior", None) is not None else ""
            outlined_text(p, QPointF(10, 62), f"{current}{caption}", QColor(255, 230, 150))
        bar = getattr(self.win, "pet_bar", None)
        if bar is not None and not self.prior:
            paint_colour_bar(p, bar, self.width(), self.height())
        if self._press is not None and self._drag_end is not None:  # the ruler while it is drawn, its length live
            a, b = frame.to_ras(self._press[0], self._press[1]), frame.to_ras(*self._drag_end)
            p.setPen(QPen(QColor(120, 255, 120), 2))
            p.drawLine(QPointF(self._press[0] * s, self._press[1] * s), QPointF(self._drag_end[0] * s,
                                                                                 self._drag_end[1] * s))  # fmt: skip
            if a is not None and b is not None:
                length = float(np.linalg.norm(np.asarray(a) - np.asarray(b)))
                outlined_text(p, QPointF(self._drag_end[0] * s + 8, self._drag_end[1] * s), f"{length:.1f} mm",
                              QColor(120, 255, 120))  # fmt: skip


def paint_colour_bar(p: QPainter, bar: Any, w: float, h: float) -> None:
    """The PET layer's colour bar in the lower right corner, in SUV: its colours bottom to top, the range's ends and
    middle beside it and its window ("PET AC SUV 0–6") under it."""
    height = max(40.0, min(140.0, h * 0.3))
    x, top, width = w - 46.0, h - height - 30.0, 10.0  # in the lower right corner, clear of the edge letter
    n = len(bar.colours)
    for i, (r, g, b) in enumerate(bar.colours):  # bottom (low) to top (high)
        y = top + height * (1.0 - (i + 1) / n)
        p.fillRect(QRectF(x, y, width, height / n + 0.5), QColor(r, g, b))
    p.setPen(QPen(QColor(220, 220, 220), 1))
    p.drawRect(QRectF(x, top, width, height))
    p.setFont(QFont("Sans", 8))
    fm = QFontMetricsF(p.font())
    for frac, text in bar.labels:
        y = top + height * (1.0 - frac) + fm.ascent() / 2.0
        outlined_text(p, QPointF(x - 4.0 - fm.horizontalAdvance(text), y), text, QColor(255, 255, 255))
    title_w = fm.horizontalAdvance(bar.title)
    outlined_text(p, QPointF(max(4.0, w - 8.0 - title_w), top + height + 4.0 + fm.ascent()), bar.title,
                  QColor(255, 220, 120))  # fmt: skip


def line_label_at(m: Any, s: float) -> QPointF:
    """Where a key-slice line's label is written: at the left end of a flat line, near the top of a steep one."""
    x0, y0, x1, y1 = (c * s for c in m.coords)
    return QPointF(6, y0 - 4) if abs(x1 - x0) >= abs(y1 - y0) else QPointF(x0 + 4, 30)


def paint_edge_letters(p: QPainter, letters: dict[str, str], w: float, h: float) -> None:
    """The orientation letters at the middle of each edge of a slice pane."""
    font = QFont("Sans", 13)
    font.setBold(True)
    p.setFont(font)
    fm = QFontMetricsF(font)
    pad = 6.0
    for edge, text in letters.items():
        tw, asc = fm.horizontalAdvance(text), fm.ascent()
        x = {"left": pad, "right": w - pad - tw}.get(edge, (w - tw) / 2)
        y = {"top": pad + asc, "bottom": h - pad - fm.descent()}.get(edge, (h + asc) / 2 - fm.descent())
        outlined_text(p, QPointF(x, y), text, LETTER_COLOUR)


class SlidePane(PaneWidget):
    """The slide: wheel zooms about the pointer, drag pans, the pointer shows level-0 pixels."""

    def wheelEvent(self, event: Any) -> None:
        if self.frame is None:
            return
        up = event.angleDelta().y() > 0
        args: dict[str, Any] = {"direction": "in" if up else "out", "amount": 1.25, "unit": "factor"}
        point = self.frame.to_level0(*self.device_pos(event))
        norm = self.win.slide_norm1000(point) if point is not None else None
        if norm is not None and 0 <= norm[0] <= 999 and 0 <= norm[1] <= 999:
            args.update(x=norm[0], y=norm[1])
        self.win.model.act("zoom", args)

    def released(self, press: Any, dx: float, dy: float, event: Any) -> None:
        if self.frame is None or self.frame.viewport is None:
            return
        if press[2] == Qt.MouseButton.LeftButton and abs(dx) <= 2 and abs(dy) <= 2:  # a click on the overview: go
            target = self.win.screen_path.overview_target(self.frame.viewport, press[0], press[1])
            if target is not None:
                self.win.model.act("center_on_wsi_coordinate", {"x": target[0], "y": target[1]})
        elif press[2] == Qt.MouseButton.LeftButton:
            vp = self.frame.viewport  # the image follows the pointer
            w, h = self.win.slide_dimensions()
            x = min(max(vp.cx - dx * vp.downsample, 0.0), float(w))
            y = min(max(vp.cy - dy * vp.downsample, 0.0), float(h))
            self.win.model.act("center_on_wsi_coordinate", {"x": x, "y": y})

    def mouseMoveEvent(self, event: Any) -> None:
        self.follow_pointer(event)


class View3DPane(PaneWidget):
    """The 3D view: left-drag rotates, right-drag or wheel zooms, middle- or shift-drag pans."""

    def wheelEvent(self, event: Any) -> None:
        self.win.scene3d.zoom(1.15 if event.angleDelta().y() > 0 else 1 / 1.15)
        self.win.schedule_3d(interactive=True)

    def mouseMoveEvent(self, event: Any) -> None:
        if self._press is None:
            return
        x, y = self.device_pos(event)
        dx, dy = x - self._last[0], y - self._last[1]
        self._last = (x, y)
        button, mods = self._press[2], self._press[3]
        scene = self.win.scene3d
        if button == Qt.MouseButton.MiddleButton or (
            button == Qt.MouseButton.LeftButton and mods & Qt.KeyboardModifier.ShiftModifier
        ):
            mm = scene.screen_mm(self.device_size())
            scene.pan(-dx * mm, dy * mm)
        elif button == Qt.MouseButton.LeftButton:
            scene.rotate(-dx * 0.4, dy * 0.4)
        elif button == Qt.MouseButton.RightButton:
            scene.zoom(1.0 + dy * 0.005)
        self.win.schedule_3d(interactive=True)

    def released(self, press: Any, dx: float, dy: float, event: Any) -> None:
        self.win.schedule_3d()

    def paint_markers(self, p: QPainter, frame: Frame, s: float) -> None:
        p.setFont(QFont("Sans", 9))
        preset = self.win.scene3d.preset or ""
        outlined_text(p, QPointF(8, 18), f"3D  {preset}", QColor(230, 230, 230))
        direction, up = self.win.scene3d.view_vectors()
        paint_axes_marker(p, marker_axes(direction, up), QPointF(48, self.height() - 48), 34.0)


def paint_axes_marker(p: QPainter, axes: list[tuple[str, float, float, float]], centre: QPointF, length: float) -> None:
    """The 3D orientation marker: R, A and S axes as the camera sees them (far ones first), each labelled."""
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    font = QFont("Sans", 10)
    font.setBold(True)
    p.setFont(font)
    for letter, x, y, depth in axes:
        colour = AXIS_COLOURS[letter]
        end = QPointF(centre.x() + x * length, centre.y() + y * length)
        p.setPen(QPen(QColor(0, 0, 0, 200), 5, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap))
        p.drawLine(centre, end)
        p.setPen(QPen(colour if depth >= -0.2 else colour.darker(150), 3, Qt.PenStyle.SolidLine,
                      Qt.PenCapStyle.RoundCap))  # fmt: skip
        p.drawLine(centre, end)
        outlined_text(p, QPointF(end.x() + x * 8 - 4, end.y() + y * 8 + 5), letter, colour)
    p.restore()


def pane_title(pane: str, volumes: dict[str, str]) -> str:
    view, vid = split_pane(pane)
    title = VIEW_TITLES.get(view, view)
    return f"{title} — {volumes.get(vid, vid)}" if vid else title
