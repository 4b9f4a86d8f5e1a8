"""`medcopilot gui`: a PySide6 window with the embedded viewer and the copilot panel.

Views show the engine's own renders (exact: the same pixels the agent gets, and the same point↔RAS
conversions), repainted after every call whoever made it. Mouse: wheel scrolls a slice view, moving
the pointer shows RAS (slice views) or level-0 pixels (slide view). Widgets only bind to `PanelModel`;
its notifications arrive from the agent's worker thread and are queued into the GUI thread by a signal.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPen, QPixmap
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QFileDialog,
    QFormLayout,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from copilot.kinds import viewer_kind
from copilot.panel.model import PanelModel
from copilot.session import Peek

VIEW_TITLES = {"red": "Red (axial)", "yellow": "Yellow (sagittal)", "green": "Green (coronal)", "viewer": "Slide"}


def to_pixmap(image: Any) -> QPixmap:
    rgb = image.convert("RGB")
    data = rgb.tobytes()
    qimg = QImage(data, rgb.width, rgb.height, 3 * rgb.width, QImage.Format.Format_RGB888)
    return QPixmap.fromImage(qimg.copy())


class _Bridge(QObject):
    changed = Signal(object)  # {view: PIL image}, rendered by the thread that changed the scene


class ViewWidget(QLabel):
    """One view of the session's viewer: the engine's render at the widget's size."""

    def __init__(self, model: PanelModel, view: str, readout: QLabel) -> None:
        super().__init__()
        self.model, self.view, self.readout = model, view, readout
        self.setMinimumSize(160, 160)
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setMouseTracking(True)
        self.setStyleSheet("background: black")
        self.side = 256

    def render_view(self, blocking: bool = True) -> tuple[bool, Any]:
        """(rendered, image) of this view at the widget's size, moving nothing; (False, None) when the session is
        busy and `blocking` is false."""
        views = () if self.view == "viewer" else (self.view,)
        images = self.model.session.peek(Peek(views, (self.side, self.side)), blocking=blocking)
        return (False, None) if images is None else (True, images.get(self.view))

    def show_image(self, image: Any) -> None:
        if image is None:
            return
        pix = to_pixmap(image).scaled(self.size(), Qt.AspectRatioMode.KeepAspectRatio)
        if self.view != "viewer" and self.model.crosshair is not None:
            pos = self.model.session.view_geometry(self.view).ras_to_norm1000(
                np.array(self.model.crosshair), (self.side, self.side)
            )
            painter = QPainter(pix)
            painter.setPen(QPen(QColor(255, 220, 0), 1))
            x, y = pos[0] / 1000 * pix.width(), pos[1] / 1000 * pix.height()
            painter.drawLine(int(x) - 12, int(y), int(x) + 12, int(y))
            painter.drawLine(int(x), int(y) - 12, int(x), int(y) + 12)
            painter.end()
        self.setPixmap(pix)

    def resizeEvent(self, event: Any) -> None:
        self.side = max(64, min(self.width(), self.height()))
        super().resizeEvent(event)

    def mousePressEvent(self, event: Any) -> None:
        self._press: tuple[Any, Any, Any] | None = (event.position().x(), event.position().y(), event.button())

    def mouseReleaseEvent(self, event: Any) -> None:
        press, self._press = getattr(self, "_press", None), None
        if press is None:
            return
        dx, dy = event.position().x() - press[0], event.position().y() - press[1]
        if self.view == "viewer":  # drag to pan the slide (the image follows the pointer)
            pix = self.pixmap()
            if press[2] == Qt.MouseButton.LeftButton and pix is not None and (abs(dx) > 2 or abs(dy) > 2):
                scale = self.model.session.view_geometry("viewer").width / max(1, pix.width())
                for direction, amount in (
                    ("left" if dx > 0 else "right", abs(dx)),
                    ("up" if dy > 0 else "down", abs(dy)),
                ):
                    if amount > 2:
                        self.model.session.call(
                            "pan",
                            {"direction": direction, "amount": amount * scale, "unit": "screen_pixels"},
                            actor="clinician",
                        )
            return
        if press[2] == Qt.MouseButton.RightButton and (abs(dx) > 2 or abs(dy) > 2):
            state = self.model.session.snapshot()
            d = state["display"][state["active_volume"]]
            window = max(1.0, d["window"] * (1.0 + dx / 200.0))
            self.model.window_level(window, d["level"] - dy / 200.0 * d["window"])
        elif press[2] == Qt.MouseButton.LeftButton:
            point = self._norm(event)
            if point is not None:
                r, a, s = self.model.session.view_geometry(self.view).norm1000_to_ras(point, (self.side, self.side))
                self.model.jump([float(r), float(a), float(s)])

    def _norm(self, event: Any) -> tuple[float, float] | None:
        pix = self.pixmap()
        if pix is None or pix.isNull():
            return None
        x0, y0 = (self.width() - pix.width()) / 2, (self.height() - pix.height()) / 2
        fx, fy = (event.position().x() - x0) / pix.width(), (event.position().y() - y0) / pix.height()
        return (fx * 1000, fy * 1000) if 0 <= fx < 1 and 0 <= fy < 1 else None

    def wheelEvent(self, event: Any) -> None:
        up = event.angleDelta().y() > 0
        if self.view != "viewer":
            self.model.scroll(self.view, 1 if up else -1)
            return
        point = self._norm(event)
        args = {"direction": "in" if up else "out", "amount": 1.25, "unit": "factor"}
        if point is not None:
            args.update(x=point[0], y=point[1])
        self.model.session.call("zoom", args, actor="clinician")

    def mouseMoveEvent(self, event: Any) -> None:
        point = self._norm(event)
        if point is None:
            return
        geometry = self.model.session.view_geometry(self.view)
        if self.view == "viewer":
            x, y = geometry.norm1000_to_level0(*point)
            self.readout.setText(f"x {x:.0f}  y {y:.0f} px (level 0)")
        else:
            r, a, s = geometry.norm1000_to_ras(point, (self.side, self.side))
            self.readout.setText(f"R {r:.1f}  A {a:.1f}  S {s:.1f} mm")


class PanelWidget(QWidget):
    """The copilot panel: chat, timeline, evidence, budget, approve mode, stop, report."""

    def __init__(self, model: PanelModel, policies: dict[str, Any]) -> None:
        super().__init__()
        self.model, self.policies = model, policies
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.policy = QComboBox()
        self.policy.addItems(list(policies))
        self.run_button = QPushButton("Run")
        self.stop_button = QPushButton("Stop")
        row.addWidget(self.policy)
        row.addWidget(self.run_button)
        row.addWidget(self.stop_button)
        layout.addLayout(row)
        self.approve_mode = QCheckBox("Approve each action")
        approve_row = QHBoxLayout()
        self.approve_button, self.reject_button = QPushButton("Approve"), QPushButton("Reject")
        approve_row.addWidget(self.approve_mode)
        approve_row.addWidget(self.approve_button)
        approve_row.addWidget(self.reject_button)
        layout.addLayout(approve_row)
        self.budget = QProgressBar()
        self.budget.setMaximum(model.budget)
        self.budget.setFormat("%v / %m rounds")
        layout.addWidget(self.budget)
        layout.addWidget(QLabel("Actions"))
        self.timeline = QListWidget()
        layout.addWidget(self.timeline, 3)
        layout.addWidget(QLabel("Evidence (click to go there)"))
        self.evidence = QListWidget()
        layout.addWidget(self.evidence, 1)
        self.chat = QTextBrowser()
        layout.addWidget(self.chat, 2)
        self.instruction = QLineEdit()
        self.instruction.setPlaceholderText("Instruction for the model (sent with the task when you press Run)")
        layout.addWidget(self.instruction)
        self.export_button = QPushButton("Export evidence report…")
        layout.addWidget(self.export_button)
        self.status = QLabel("idle")
        layout.addWidget(self.status)
        self.run_button.clicked.connect(self._run)
        self.stop_button.clicked.connect(model.stop)
        self.approve_mode.toggled.connect(model.set_approve_mode)
        self.approve_button.clicked.connect(model.approve)
        self.reject_button.clicked.connect(model.reject)
        self.evidence.itemClicked.connect(lambda item: model.jump_to_evidence(self.evidence.row(item)))
        self.export_button.clicked.connect(self._export)

    def _run(self) -> None:
        try:
            policy = self.policies[self.policy.currentText()]()
        except RuntimeError as exc:
            self.status.setText(str(exc))
            return
        self.model.run_episode(policy, self.instruction.text().strip())
        self.instruction.clear()

    def _export(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Evidence report", "evidence_report.html", "HTML (*.html)")
        if path:
            self.model.export_report(path)

    def refresh(self) -> None:
        m = self.model
        while self.timeline.count() > len(m.timeline):
            self.timeline.takeItem(self.timeline.count() - 1)
        for n, entry in enumerate(m.timeline):
            text = f"{n + 1}. [{entry.actor}] {entry.handler} — {entry.status}"
            text += f": {entry.error}" if entry.error else ""
            args = json.dumps(entry.args, separators=(",", ":"))
            tip = f"{entry.handler}({args[:300]})"
            if n < self.timeline.count():
                item = self.timeline.item(n)
                item.setToolTip(tip)
                if item.text() != text:
                    item.setText(text)
            else:
                item = QListWidgetItem(text)
                item.setToolTip(tip)
                if entry.thumbnail:
                    pix = QPixmap()
                    pix.loadFromData(entry.thumbnail)
                    item.setIcon(QIcon(pix.scaled(48, 48, Qt.AspectRatioMode.KeepAspectRatio)))
                self.timeline.addItem(item)
        labels = [
            f"{e.get('kind')}: {e.get('label') or ''} {e.get('ras') or e.get('offset_mm') or e.get('point') or ''}"
            for e in m.evidence
        ]
        if [self.evidence.item(i).text() for i in range(self.evidence.count())] != labels:
            self.evidence.clear()
            self.evidence.addItems(labels)
        self.budget.setValue(min(m.rounds_used, m.budget))
        self.chat.setPlainText("\n\n".join(f"{who}: {text}" for who, text in m.messages))
        self.status.setText(f"{m.status}" + (f" — waiting for approval: {m.pending.handler}" if m.pending else ""))
        self.approve_button.setEnabled(m.pending is not None)
        self.reject_button.setEnabled(m.pending is not None)


class MainWindow(QMainWindow):
    def __init__(self, model: PanelModel, policies: dict[str, Any], cases: list[Path] | None = None) -> None:
        super().__init__()
        self.model = model
        self.cases = cases or [model.case.root]
        self.setWindowTitle(f"MedCopilot — {model.case.case_id}")
        central = QWidget()
        grid = QGridLayout(central)
        self.case_box = QComboBox()
        self.case_box.addItems([c.name for c in self.cases])
        self.case_box.setCurrentIndex(self.cases.index(model.case.root) if model.case.root in self.cases else 0)
        self.case_box.currentIndexChanged.connect(self._open_case)
        grid.addWidget(QLabel("Case"), 3, 0)
        grid.addWidget(self.case_box, 3, 1, 1, 2)
        self.readout = QLabel(" ")
        names = viewer_kind(model.session.kind).view_names
        self.views = {n: ViewWidget(model, n, self.readout) for n in names}
        for i, (name, widget) in enumerate(self.views.items()):
            grid.addWidget(QLabel(VIEW_TITLES[name]), 0, i)
            grid.addWidget(widget, 1, i)
        grid.addWidget(self.readout, 2, 0, 1, len(names))
        self.setCentralWidget(central)
        self.panel = PanelWidget(model, policies)
        dock = QDockWidget("Copilot", self)
        dock.setWidget(self.panel)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        self.bridge = _Bridge()
        self.bridge.changed.connect(self._show, Qt.ConnectionType.QueuedConnection)
        model.listeners.append(self._changed)
        self.resize(1400, 720)

    def _changed(self, what: str = "") -> None:
        """Render the views in the thread that changed the scene (usually the agent's worker), then hand the
        images to the GUI thread, which only paints: it never waits for the session lock."""
        gui_thread = threading.current_thread() is threading.main_thread()
        images = {}
        for name, view in self.views.items():
            rendered, image = view.render_view(blocking=not gui_thread)
            if not rendered:  # the GUI thread never waits: the end of the running call repaints
                self.bridge.changed.emit({})
                return
            images[name] = image
        self.bridge.changed.emit(images)

    def _show(self, images: dict[str, Any]) -> None:
        for name, image in images.items():
            self.views[name].show_image(image)
        self.panel.refresh()

    def _open_case(self, index: int) -> None:
        """Case browser: open another case of the folder in a new window."""
        window = build_window(self.cases[index], cases=self.cases)
        window.show()
        self.model.stop()
        self.close()
        self._next = window

    def refresh(self, *_: Any) -> None:
        """Re-render and repaint now (GUI thread, when nothing else runs)."""
        self._show({name: view.render_view()[1] for name, view in self.views.items()})


class SettingsDialog(QDialog):
    """OpenAI-compatible service settings (base URL, model, key, temperature) for the model policy."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        from copilot.agent.settings import AgentSettings

        self.setWindowTitle("Model service")
        current = AgentSettings.from_env()
        form = QFormLayout(self)
        self.base_url = QLineEdit(current.base_url or "")
        self.model = QLineEdit(current.model)
        self.api_key = QLineEdit(current.api_key)
        self.api_key.setEchoMode(QLineEdit.EchoMode.Password)
        self.temperature = QLineEdit(str(current.temperature))
        for label, widget in (
            ("Base URL", self.base_url),
            ("Model", self.model),
            ("API key", self.api_key),
            ("Temperature", self.temperature),
        ):
            form.addRow(label, widget)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def settings(self) -> Any:
        from copilot.agent.settings import AgentSettings

        return AgentSettings.from_env(
            base_url=self.base_url.text() or None,
            model=self.model.text() or None,
            api_key=self.api_key.text() or None,
            temperature=float(self.temperature.text() or 0),
        )


def default_policies(parent: QWidget | None = None) -> dict[str, Any]:
    from copilot.agent.loop import ChatAgent
    from copilot.medflow.policies import baseline_policy, prior_policy

    def openai_agent() -> Any:
        dialog = SettingsDialog(parent)
        if dialog.exec() != QDialog.DialogCode.Accepted:
            raise RuntimeError("model settings were cancelled")
        return ChatAgent(dialog.settings())

    return {
        "baseline (offline)": baseline_policy,
        "prior (offline)": prior_policy,
        "OpenAI-compatible model…": openai_agent,
    }


def build_window(
    case_dir: str | Path, trace_dir: str | Path | None = None, cases: list[Path] | None = None
) -> MainWindow:
    from copilot.runtime import open_session

    session = open_session(case_dir, trace_dir=trace_dir)
    window = MainWindow(PanelModel(session), {}, cases)
    window.panel.policies.update(default_policies(window))
    window.panel.policy.addItems(list(window.panel.policies))
    window.refresh()
    return window


def main(case_dir: str, screenshot: str | None = None, run: str | None = None) -> int:
    """Open the first case of a folder (the case box switches); with `screenshot`, optionally run an offline
    policy, save a picture of the window and exit."""
    from copilot.cases.pack import find_cases
    from copilot.medflow.policies import make_policy

    app = QApplication.instance() or QApplication(sys.argv)
    cases = [c.root for c in find_cases(case_dir)]
    if not cases:
        raise SystemExit(f"no case packs under {case_dir}")
    window = build_window(cases[0], cases=cases)
    window.show()
    if screenshot is None:
        return int(app.exec())
    if run:
        window.model.run_episode(make_policy(run))
        while not window.model.wait(0.05):
            app.processEvents()
    for _ in range(20):
        app.processEvents()
        time.sleep(0.02)
    window.grab().save(screenshot)
    print(screenshot)
    return 0
