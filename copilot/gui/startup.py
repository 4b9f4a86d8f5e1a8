"""Desktop start-up feedback: a small window with a progress message as soon as Qt is imported, before the
viewer's heavy modules load; the messages follow the start-up until the main window shows.

With MEDCOPILOT_STARTUP_PROBE=1 every start-up event is also written to stderr as
"medcopilot gui: startup <event> <seconds since the process started>: <message>", and the app exits as soon
as the first frame of a study is painted (benchmarks/desktop_start.py reads these lines).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

T = TypeVar("T")

_state: dict[str, Any] = {"splash": None, "label": None, "framed": False}


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
        print(f"medcopilot gui: startup {event} {since_start():.3f}: {message}", file=sys.stderr, flush=True)


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
    from PySide6.QtWidgets import QApplication, QLabel

    app = QApplication.instance() or QApplication(sys.argv[:1])
    label = QLabel(message)
    label.setWindowFlags(Qt.WindowType.SplashScreen | Qt.WindowType.FramelessWindowHint)
    label.setAlignment(Qt.AlignmentFlag.AlignCenter)
    label.setStyleSheet("color: #f0f0f0; background: #1c1c24; padding: 22px; font-size: 15px;")
    label.setMinimumWidth(420)
    label.show()
    _state["splash"], _state["label"] = label, label
    app.processEvents()
    log("message", message)


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


def close_splash() -> None:
    """The main window is up: the splash goes."""
    label = _state.get("splash")
    _state["splash"] = _state["label"] = None
    if label is not None:
        label.close()
        label.deleteLater()


def watch_first_frame() -> None:
    """Log the first paint of a view pane that holds an image (and, when probing, exit right after it)."""
    from PySide6.QtCore import QEvent, QObject, QTimer
    from PySide6.QtWidgets import QApplication

    from copilot.gui.views import PaneWidget

    app = QApplication.instance()
    if app is None:
        return

    class _FirstFrame(QObject):
        def eventFilter(self, obj: Any, event: Any) -> bool:
            if (
                not _state["framed"]
                and event.type() == QEvent.Type.Paint
                and isinstance(obj, PaneWidget)
                and getattr(obj, "_image", None) is not None
            ):
                _state["framed"] = True
                QTimer.singleShot(0, _painted)
            return False

    def _painted() -> None:
        log("first-frame", "the study's first frame is painted")
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
