"""Desktop start-up feedback: a small window with a progress message as soon as Qt is imported, then the study's
first image in it (its middle slice or a slide's lowest level, read with numpy alone) before the viewer's heavy
modules load; the messages follow the start-up, and the window goes once the viewer has painted the study.

With MEDCOPILOT_STARTUP_PROBE=1 every start-up event is also written to stderr as
"medcopilot gui: startup <event> <seconds since the process started> cpu <CPU seconds>: <message>"; the events
are terminal, message, progress, first-frame (the study's first image painted, in the start-up window or in the
viewer) and viewer (the viewer's panes painted with the study), and the app exits right after the viewer event
(benchmarks/desktop_start.py reads these lines).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

_state: dict[str, Any] = {"splash": None, "label": None, "image": None, "framed": False, "viewer": False}


def probing() -> bool:
    """Whether the start-up probe is on (timestamps on stderr, exit after the first frame)."""
    return os.environ.get("MEDCOPILOT_STARTUP_PROBE") == "1"


def since_start() -> float:
    """Seconds since this process started (Linux: its start time in /proc; else since this module loaded)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.perf_counter() - _LOADED


_LOADED = time.perf_counter()


def log(event: str, message: str = "") -> None:
    """One start-up event on stderr when probing."""
    if probing():
        cpu = time.process_time()
        print(f"medcopilot gui: startup {event} {since_start():.3f} cpu {cpu:.3f}: {message}", file=sys.stderr,
              flush=True)  # fmt: skip


def display_problem() -> str | None:
    """Why no window can open here (one line), or None."""
    platform = os.environ.get("QT_QPA_PLATFORM", "")
    if platform.startswith(("offscreen", "minimal", "vnc", "eglfs", "linuxfb")) or sys.platform != "linux":
        return None
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        return "no display: set DISPLAY (or run under xvfb-run), or use --screenshot with QT_QPA_PLATFORM=offscreen"
    if not os.environ.get("WAYLAND_DISPLAY"):
        import ctypes.util

        if ctypes.util.find_library("xcb-cursor") is None:
            return "the Qt runtime libraries are missing (libxcb-cursor0 and friends): run `make sysdeps`"
    return None


def show_splash(message: str = "Starting MedCopilot…") -> None:
    """A small frameless window with `message`, painted at once (Qt is the only module loaded for it); nothing
    where no window can open (the app then says why). From a terminal the message is first written there, before
    Qt loads: the first word reaches the clinician within a tenth of a second of the command."""
    if sys.stderr.isatty():
        print(f"medcopilot gui: {message}", file=sys.stderr, flush=True)
    log("terminal", message)
    if display_problem() is not None:
        return
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QLabel, QVBoxLayout, QWidget

    app = QApplication.instance() or QApplication(sys.argv[:1])
    window = QWidget()
    window.setWindowFlags(Qt.WindowType.SplashScreen | Qt.WindowType.FramelessWindowHint)
    window.setStyleSheet("color: #f0f0f0; background: #1c1c24; font-size: 15px;")
    window.setMinimumWidth(420)
    box = QVBoxLayout(window)
    box.setContentsMargins(22, 22, 22, 22)
    image = QLabel()
    image.setObjectName("first-image")
    image.setAlignment(Qt.AlignmentFlag.AlignCenter)
    image.hide()
    label = QLabel(message)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    box.addWidget(image)
    box.addWidget(label)
    window.show()
    _state["splash"], _state["label"], _state["image"] = window, label, image
    watch_first_frame()
    app.processEvents()
    log("message", message)


def show_first_image(path: str | None, side: int = 512) -> bool:
    """Paint the study's first image in the start-up window (numpy and the file's bytes only, no viewer module;
    a DICOMweb URL: its retrieval started here, its first slice awaited up to `PACS_WAIT_S`); False when there
    is no window or no such image (a compressed DICOM series, several series…)."""
    image = _state.get("image")
    if image is None or not path:
        return False
    if "://" in path:
        return _show_first_slice(path, side)
    from copilot.engine.first_image import first_image

    found = first_image(path)
    if found is None:
        return False
    _paint(found.pixels, found.pixel_aspect, found.caption, side)
    return True


PACS_WAIT_S = 1.5  # the longest the viewer's loading waits for a PACS study's first slice to show


def _show_first_slice(url: str, side: int) -> bool:
    """Start retrieving a DICOMweb URL now (the viewer takes the same retrieval over: `pacs_study`) and paint its
    first slice in the start-up window once it lands, waiting at most `PACS_WAIT_S`."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from copilot.pacs.progressive import ProgressiveStudy
    from copilot.pacs.urls import is_dicomweb_url

    if not is_dicomweb_url(url):
        return False
    study = ProgressiveStudy(url).start()
    _state["pacs"] = (url, study)
    app = QApplication.instance()
    deadline = time.perf_counter() + PACS_WAIT_S
    while time.perf_counter() < deadline and not study.finished(0.01):
        if study.stack is not None and study.first_slice_s is not None:
            break
        if app is not None:
            app.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
    pixels = study.stack.image() if study.stack is not None else None
    if pixels is None:
        return False
    assert study.stack is not None
    _paint(pixels, study.stack.aspect, "the first slice to arrive from the PACS", side)
    return True


def pacs_study(url: str) -> Any:
    """The retrieval of `url` the start-up began (handed over once: the caller now shows it), or None."""
    started = _state.get("pacs")
    if started is None or started[0] != url:
        return None
    _state["pacs"] = None
    return started[1]


def _paint(pixels: Any, pixel_aspect: float, caption: str, side: int) -> None:
    """An 8-bit grey (rows × columns) or RGB image shown in the start-up window, `side` pixels across."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QImage, QPixmap
    from PySide6.QtWidgets import QApplication

    image = _state["image"]
    rows, cols = pixels.shape[:2]
    fmt = QImage.Format.Format_RGB888 if pixels.ndim == 3 else QImage.Format.Format_Grayscale8
    qimage = QImage(pixels.data, cols, rows, pixels.strides[0], fmt).copy()  # owns its bytes
    height = max(1, round(rows * pixel_aspect))
    scale = side / max(cols, height)
    pixmap = QPixmap.fromImage(qimage).scaled(max(1, round(cols * scale)), max(1, round(height * scale)),
                                              Qt.AspectRatioMode.IgnoreAspectRatio,
                                              Qt.TransformationMode.SmoothTransformation)  # fmt: skip
    image.setPixmap(pixmap)
    image.setToolTip(caption)
    image.show()
    window = _state["splash"]
    window.adjustSize()
    screen = window.screen().availableGeometry() if window.screen() is not None else None
    if screen is not None:
        window.move(screen.center() - window.rect().center())
    app = QApplication.instance()
    if app is not None:
        app.processEvents()


def progress(message: str) -> None:
    """Show a new start-up message on the splash (when there is one) and log it."""
    label = _state.get("label")
    if label is not None:
        from PySide6.QtWidgets import QApplication

        label.setText(message)
        app = QApplication.instance()
        if app is not None:
            app.processEvents()
    log("progress", message)


def close_splash(keep_image: bool = False) -> None:
    """The main window is up: the start-up window goes (with `keep_image`, not while it shows the study's first
    image: it then stays over the viewer until the study is open there)."""
    window = _state.get("splash")
    image = _state.get("image")
    if window is None or (keep_image and image is not None and not image.isHidden()):
        return
    _state["splash"] = _state["label"] = _state["image"] = None
    window.close()
    window.deleteLater()


def watch_first_frame() -> None:
    """Log the first paint of the study's image (in the start-up window or a view pane) and the first paint of a
    view pane that holds an image (when probing, exit right after that)."""
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None or _state.get("watcher") is not None:
        return

    class _FirstFrame(QObject):
        def eventFilter(self, obj: Any, event: Any) -> bool:
            if _state["viewer"] or event.type() != QEvent.Type.Paint:
                return False
            views = sys.modules.get("copilot.gui.views")  # the panes' module: loaded with the viewer, not here
            pane = views is not None and isinstance(obj, views.PaneWidget) and getattr(obj, "_image", None) is not None
            shown: Any = _state.get("image")
            preview = shown is not None and obj is shown and not shown.isHidden()
            if (pane or preview) and not _state["framed"]:
                _state["framed"] = True
                log("first-frame", "the study's first frame is painted")
            if pane:
                _state["viewer"] = True
                QTimer.singleShot(0, _painted)
            return False

    def _painted() -> None:
        log("viewer", "the viewer shows the study")
        app.removeEventFilter(watcher)
        close_splash()
        if probing():
            sys.stderr.flush()
            os._exit(0)  # a probe: nothing else to measure

    watcher = _FirstFrame(app)
    app.installEventFilter(watcher)
    _state["watcher"] = watcher


def in_worker(work: Callable[[], T], tick: Callable[[float], None] | None = None, interval: float = 0.05) -> T:
    """Run `work` on a worker thread while the GUI thread keeps painting (its events, not the user's input,
    are processed every `interval` s; `tick` gets the seconds elapsed); its result, or its exception raised
    here. A caller waits as before, but the window never freezes while a study loads."""
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance()
    if app is None:
        return work()
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = work()
        except BaseException as exc:  # handed to the caller's thread
            done["error"] = exc

    worker = threading.Thread(target=run, name="study-loader", daemon=True)
    started = time.perf_counter()
    worker.start()
    while worker.is_alive():
        app.processEvents(QEventLoop.ProcessEventsFlag.ExcludeUserInputEvents)
        if tick is not None:
            tick(time.perf_counter() - started)
        worker.join(interval)
    if "error" in done:
        raise done["error"]
    return cast(T, done["result"])
