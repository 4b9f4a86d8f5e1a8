"""`medcopilot gui`: the desktop workstation (PySide6): slice, slide and 3D views that fill the window,
any study (case pack, DICOM folder, NIfTI/NRRD/MHA, slide, drag and drop, recent studies), the copilot
panel, evidence drawn on the images, and trace replay with a timeline.

Views paint the engine's own pixels at device resolution (the same pixels the agent gets, and the same
point↔RAS conversions). The scene changes only through audited handler calls; after each, whoever
made it, the panes are rendered in the calling thread and handed to the GUI thread, which only paints
and never waits for the session lock.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCursor, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFileDialog,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSpinBox,
    QToolBar,
    QWidget,
)

from copilot.engine.volume.display import PRESET_NAMES
from copilot.gui import reading, startup
from copilot.gui.pacs_arriving import retrieve_showing
from copilot.gui.panel import PanelWidget, default_policies
from copilot.gui.patient_bar import PatientBar
from copilot.gui.startup import display_problem
from copilot.gui.store_dialog import store_results
from copilot.gui.views import PaneWidget, SlicePane, SlidePane, View3DPane
from copilot.kinds import viewer_kind
from copilot.pacs import is_dicomweb_url
from copilot.pacs.fetch import local_study
from copilot.panel import pet_window as pet
from copilot.panel.banner import place_label, study_banner
from copilot.panel.derived import Derived, study_derived
from copilot.panel.layout import LAYOUT_TITLES, arrange, default_layout, longitudinal_pair, panes
from copilot.panel.model import PanelModel
from copilot.panel.pointer import PointerReadout
from copilot.panel.screen import Busy, Frame, Screen
from copilot.panel.selectors import CUSTOM, OWN, Selectors, selectors
from copilot.panel.studies import (
    RecentStudies,
    Series,
    StudyError,
    case_packs,
    classify,
    dicom_series,
    read_headers,
    select_series_list,
    study_at,
)
from copilot.privatefs import make_private

SLICE_LAYOUTS = ("one_up", "three_up", "four_up", "side_by_side")
PANE_WIDGETS: dict[str, type[PaneWidget]] = {"slices": SlicePane, "slide": SlidePane}  # by the kind's display
Picked = Series | list[Series]  # what the series picker or --series chose


def wl_choices() -> list[tuple[str, str]]:
    """(name, title) of the window/level choices: the viewer's presets and automatic."""
    titles = {"ct_lung": "CT lung", "ct_mediastinal": "CT mediastinum", "ct_bone": "CT bone", "ct_brain": "CT brain",
              "mr_auto": "MR auto", "mr_t2_flair": "MR T2/FLAIR", "pet_auto": "PET auto"}  # fmt: skip
    return [("auto", "Auto")] + [(n, titles.get(n, n)) for n in PRESET_NAMES]


ONE_UP_VIEWS = {"Axial": "red", "Sagittal": "yellow", "Coronal": "green"}


class _Bridge(QObject):
    frames = Signal(object)  # (batch number, {pane: Frame}), rendered by the thread that changed the scene
    text = Signal()  # the model's text grew (streamed from the worker's thread)


class ViewArea(QWidget):
    """The central area: the layout's panes placed to fill it; a resize re-renders them at the new size."""

    def __init__(self, window: MainWindow) -> None:
        super().__init__()
        self.win = window
        self.setAcceptDrops(True)
        self.setStyleSheet("background: #101014")

    def resizeEvent(self, event: Any) -> None:
        self.win.place_panes()
        super().resizeEvent(event)


class MainWindow(QMainWindow):
    def __init__(self, policies: dict[str, Any] | None = None, recent: RecentStudies | None = None) -> None:
        super().__init__()
        self.model: PanelModel | None = None
        self.screen_path: Screen | None = None
        self.pointer: PointerReadout | None = None  # the value under a resting pointer follows each new frame
        self.timeline: Any = None  # a TraceTimeline in replay mode
        self.cases: list[Path] = []
        self.recent = recent or RecentStudies()
        self.policies = policies
        self.layout_name = "three_up"
        self.quiet = False  # no message boxes (screenshots, tests)
        self.no_dialogs = False  # no series picker either: the first series (screenshots)
        self.derived: list[Derived] = []  # the open folder's derived results (SEG, SR, …), listed apart
        self.focus = "red"
        self.pair: tuple[str, str] | None = None
        self.panes: dict[str, PaneWidget] = {}
        self._sizes: dict[str, tuple[int, int]] = {}
        self._scene3d: Any = None
        self._retry = QTimer(self, singleShot=True, interval=30)
        self._retry.timeout.connect(self.refresh)
        self._timer3d = QTimer(self, singleShot=True, interval=120)
        self._timer3d.timeout.connect(self._render_3d)
        self._interactive3d = False
        self._default_preset: str | None = None
        self._focused3d: int | None = None
        self._rendered = self._shown = 0
        self._batch_lock = threading.Lock()  # one batch rendered at a time, numbered in order
        self.bridge = _Bridge()
        self.bridge.frames.connect(self._show, Qt.ConnectionType.QueuedConnection)
        self._chat_timer = QTimer(self, singleShot=True, interval=40)  # streamed pieces shown at most 25 times a second
        self._chat_timer.timeout.connect(lambda: self.model is not None and self.panel.refresh_chat())
        self.bridge.text.connect(lambda: self._chat_timer.isActive() or self._chat_timer.start(),
                                 Qt.ConnectionType.QueuedConnection)  # fmt: skip (a running timer is left to fire)
        self.prior: Any = None  # a PriorComparison: the prior study beside the current one
        self.prior_screen: Screen | None = None
        self.tools: Any = None  # the clinician's ruler, zoom, pan, keys and window/level drag
        self.area = ViewArea(self)
        self.setCentralWidget(self.area)
        self.readout = QLabel(" ")
        self.statusBar().addWidget(self.readout, 1)
        self.busy_label = QLabel(self.area)
        self.busy_label.setStyleSheet("color: #f0f0f0; background: rgba(30, 30, 40, 220); padding: 14px; "
                                      "border-radius: 6px; font-size: 15px")  # fmt: skip
        self.busy_label.hide()
        self._opened: tuple[Path, Picked | None, str | Path | None] | None = None
        self._user_preset: str | None = None
        self.dock = QDockWidget("Copilot", self)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.dock)
        self.replay_dock: Any = None
        self._build_menus()
        self.ruler_action: QAction | None = None  # the ruler toggle (left-drag measures)
        reading.install(self)
        self.setAcceptDrops(True)
        self.setWindowTitle("MedCopilot")
        self.resize(1500, 900)

    # ----- menus and toolbar -----
    def _build_menus(self) -> None:
        file = self.menuBar().addMenu("&File")
        for text, slot, key in (
            ("Open study (file)…", self._open_file_dialog, QKeySequence.StandardKey.Open),
            ("Open DICOM or case folder…", self._open_folder_dialog, None),
            ("Open trace for replay…", self._open_trace_dialog, None),
            ("Open from PACS (DICOMweb URL)…", self._open_url_dialog, None),
            ("PACS browser", self.show_pacs_browser, None),
            ("Save screenshot…", self._save_screenshot, None),
            ("Export session report…", self._export_report, None),
            ("Store to PACS / Export…", lambda: store_results(self), None),
            ("Open stored report (SR)…", self._open_report_dialog, None),
            ("Open stored segmentation (SEG)…", self._open_seg_dialog, None),
            ("Measurements and lesions", self._show_measurements, None),
        ):
            action = QAction(text, self)
            action.triggered.connect(slot)
            if key is not None:
                action.setShortcut(key)
            file.addAction(action)
        self.recent_menu = file.addMenu("Recent studies")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        from copilot.gui import stored_menu  # the study's SEGs and reports, opened over it

        stored_menu.install(self, file)
        quit_action = QAction("Quit", self)
        quit_action.setShortcut(QKeySequence.StandardKey.Quit)
        quit_action.triggered.connect(self.close)
        file.addAction(quit_action)
        self.patient_bar = PatientBar()  # whose study is open, above everything else
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.patient_bar)
        self.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
        self._settle = QTimer(self, singleShot=True, interval=4000)
        self._settle.timeout.connect(self.patient_bar.settle)
        bar = QToolBar("View")
        bar.setObjectName("view_toolbar")
        self.addToolBar(bar)
        self.case_box = QComboBox()
        self.case_box.setMinimumWidth(200)
        self.case_box.activated.connect(self._open_case_index)
        bar.addWidget(QLabel(" Case "))
        bar.addWidget(self.case_box)
        self.layout_box = QComboBox()
        for name in SLICE_LAYOUTS:
            self.layout_box.addItem(LAYOUT_TITLES[name], name)
        self.layout_box.activated.connect(lambda i: self.set_layout(self.layout_box.itemData(i)))
        bar.addWidget(QLabel(" Layout "))
        bar.addWidget(self.layout_box)
        self.focus_box = QComboBox()
        self.focus_box.addItems(list(ONE_UP_VIEWS))
        self.focus_box.activated.connect(lambda i: self.set_focus(ONE_UP_VIEWS[self.focus_box.itemText(i)]))
        self.focus_action = bar.addWidget(self.focus_box)
        self.background_box = QComboBox()
        self.background_box.setMinimumWidth(140)
        self.background_box.setToolTip("background series: the volume every slice view shows")
        self.background_box.activated.connect(lambda _: self.set_background(self.background_box.currentData()))
        bar.addWidget(QLabel(" Background "))
        bar.addWidget(self.background_box)
        self.fusion_box = QComboBox()
        self.fusion_box.setMinimumWidth(120)
        self.fusion_box.setToolTip("foreground series shown over the background (e.g. PET over CT)")
        self.fusion_box.activated.connect(lambda _: self.set_fusion(self.fusion_box.currentData()))
        self.opacity = QSpinBox()
        self.opacity.setRange(0, 100)
        self.opacity.setSingleStep(10)
        self.opacity.setValue(40)
        self.opacity.setSuffix(" %")
        self.opacity.valueChanged.connect(lambda _: self.set_fusion(self.fusion_box.currentData()))
        bar.addWidget(QLabel(" Foreground "))
        bar.addWidget(self.fusion_box)
        bar.addWidget(self.opacity)
        self.wl_box = QComboBox()
        self.wl_box.setToolTip("window/level preset of the background series")
        for name, title in wl_choices():
            self.wl_box.addItem(title, name)
        self.wl_box.activated.connect(lambda _: self.set_wl_preset(self.wl_box.currentData()))
        bar.addWidget(QLabel(" W/L "))
        bar.addWidget(self.wl_box)
        self.pet_box = QComboBox()  # the PET's window in SUV: a preset, or a range typed and Enter
        self.pet_box.setEditable(True)
        self.pet_box.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.pet_box.setMinimumWidth(120)  # "SUV 2.5–13.6" in full
        self.pet_box.setToolTip("window of the PET in SUVbw: a preset, or type a range such as 2-8 and press Enter")
        for lo, hi in pet.SUV_PRESETS:
            self.pet_box.addItem(pet.range_words(lo, hi))
        self.pet_box.textActivated.connect(self.set_pet_window)
        typed = self.pet_box.lineEdit()
        if typed is not None:  # a typed range applies on Enter (shown already: no second call)
            typed.returnPressed.connect(lambda: self.set_pet_window(self.pet_box.currentText()))
        self.pet_actions = [bar.addWidget(QLabel(" PET ")), bar.addWidget(self.pet_box)]
        self.pet_bar: Any = None  # the PET layer's colour bar in SUV, painted by the slice panes
        self.frame_label = QLabel(" Frame ")
        self.frame_box = QSpinBox()
        self.frame_box.setToolTip("frame of a 4D image (time point, diffusion or perfusion volume)")
        self.frame_box.setKeyboardTracking(False)
        self.frame_box.valueChanged.connect(self.set_frame)
        self.frame_actions = [bar.addWidget(self.frame_label), bar.addWidget(self.frame_box)]
        self.preset_box = QComboBox()
        from copilot.gui.presets3d import PRESETS  # names only: VTK loads when a 3D view first shows

        self.preset_box.addItem("auto (fits the series)", None)
        for preset in PRESETS:
            self.preset_box.addItem(preset, preset)
        self.preset_box.activated.connect(lambda i: self.set_preset(self.preset_box.itemData(i)))
        bar.addWidget(QLabel(" 3D "))
        bar.addWidget(self.preset_box)

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent.items():
            action = QAction(str(path), self)
            action.triggered.connect(lambda _=False, p=path: self.open_path(p))
            self.recent_menu.addAction(action)
        if not self.recent_menu.actions():
            self.recent_menu.addAction("(none yet)").setEnabled(False)

    def _open_file_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open a volume or a slide", "",
            "Images (*.nii *.nii.gz *.nrrd *.nhdr *.mha *.mhd *.dcm *.svs *.tif *.tiff *.ndpi *.scn *.mrxs *.vms "
            "*.bif);;All files (*)",
        )  # fmt: skip
        if path:
            self.open_path(path)

    def _open_folder_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a DICOM folder, a case pack or a folder of case packs")
        if path:
            self.open_path(path)

    def _open_url_dialog(self) -> None:
        prompt = "DICOMweb study or series URL (…/studies/UID[/series/UID]):"
        url, ok = QInputDialog.getText(self, "Open from PACS", prompt)
        if ok and url.strip():
            self.open_path(url.strip())

    def _show_measurements(self) -> None:
        from copilot.gui.measurements_dock import show_measurements

        show_measurements(self)

    def _open_seg_dialog(self) -> None:
        from copilot.gui.seg_dock import open_seg_dialog

        open_seg_dialog(self)

    def _open_report_dialog(self) -> None:
        from copilot.gui.report_dock import open_report_dialog

        open_report_dialog(self)

    def show_pacs_browser(self) -> Any:
        """The PACS browser dock (made on first use): search a DICOMweb server, double-click to open."""
        from copilot.gui.pacs_dock import PacsDock

        dock = getattr(self, "pacs_dock", None)
        if dock is None:
            dock = self.pacs_dock = PacsDock(self, self.open_path)
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        dock.show()
        return dock

    def _open_trace_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Open a trace folder")
        if path:
            self.open_path(path)

    def _save_screenshot(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Screenshot", "medcopilot.png", "PNG (*.png)")
        if path:
            self.grab().save(path)
            make_private(path)  # the patient banner is in the picture

    def _export_report(self) -> None:
        """The session's audit page (the copilot panel's export)."""
        if self.model is not None:
            self.panel.export_dialog()

    def dragEnterEvent(self, event: Any) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: Any) -> None:
        urls = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            event.acceptProposedAction()
            self.open_path(urls[0])

    # ----- opening studies -----
    def pick_series(self, found: list[Series]) -> Picked | None:
        """The series picker: one series, or several shown together."""
        from copilot.gui.series_dialog import SeriesDialog

        dialog = SeriesDialog(found, self, self.derived)
        if dialog.exec() != SeriesDialog.DialogCode.Accepted or not dialog.chosen():
            return None
        return dialog.chosen()

    def open_path(
        self, path: str | Path, series: Picked | None = None, trace_dir: str | Path | None = None,
        series_spec: str | None = None, frame: int | None = None,
    ) -> bool:  # fmt: skip
        """Open whatever a path holds (a DICOM folder's series as `series_spec` names it: number, UID end or
        description); errors are shown, never raised."""
        pick: Callable[[list[Series]], Picked | None] | None = None
        if series_spec is not None:
            spec = series_spec
            pick = lambda found: select_series_list(found, spec)  # noqa: E731
        elif self.no_dialogs:
            pick = self._first_series
        try:
            opened = self.open_study_path(path, series, trace_dir, pick=pick, frame=frame)
        except Exception as exc:  # shown to the clinician, never a crash
            named = path if is_dicomweb_url(path) else place_label(path)  # a PACS cache folder by its study
            self.readout.setText(f"cannot open {named}: {exc}")
            print(f"medcopilot gui: cannot open {named}: {exc}", file=sys.stderr)
            if not self.quiet:
                QMessageBox.warning(self, "Cannot open", f"{place_label(path)}: {exc}")
            return False
        if opened:
            self.recent.add(path)
        return opened

    def open_study_path(
        self,
        path: str | Path,
        series: Picked | None = None,
        trace_dir: str | Path | None = None,
        cases: list[Path] | None = None,
        pick: Callable[[list[Series]], Picked | None] | None = None,
        frame: int | None = None,
    ) -> bool:
        """Open a trace, a folder of case packs, a case pack, a DICOM folder (`pick` chooses among several series;
        default: the series picker), a volume file or a slide, or a DICOMweb study or series URL (retrieved into the
        PACS cache first, its slices shown as they arrive). Errors are raised; False when no series was chosen."""
        path = retrieve_showing(self, str(path)) if is_dicomweb_url(path) else local_study(path).path
        what = classify(path)
        if what == "trace":
            self.open_trace(path)
            return True
        if what == "case_folder":
            self.cases = case_packs(path)
            self.load_study(self.cases[0], trace_dir=trace_dir)
            return True
        if what == "dicom" and Path(path).is_dir() and series is None:
            self.progress(f"Reading the DICOM headers of {place_label(path)}…")
            headers = read_headers(path)  # read once for the series and the derived results
            found = dicom_series(path, headers)
            if not found:
                raise StudyError(f"{place_label(path)}: no image series")
            self.derived = study_derived(path, headers)  # listed apart in the picker, never as series
            series = found[0] if len(found) == 1 and pick is None else (pick or self.pick_series)(found)
            if series is None:
                return False
            if not self._same_patient(series):
                return False
        if cases is not None:
            self.cases = list(cases)
        elif what != "case_pack" or Path(path).resolve() not in self.cases:
            self.cases = [Path(path).resolve()] if what == "case_pack" else []
        self.load_study(Path(path), series, trace_dir, frame)
        check = getattr(self, "_patient_check", None)
        self._patient_check: dict[str, Any] | None = None
        if check is not None and self.model is not None:
            self.model.session.note("patient_check", check)
        return True

    def _same_patient(self, series: Picked) -> bool:
        """Series of different patients open together only after the clinician, shown both, says Yes; False (and
        a line in the status bar) otherwise. The answer is traced (`patient_check`) once the study is open."""
        from copilot.panel.same_patient import series_mismatch

        found = series_mismatch(series)
        if found is None:
            return True
        accepted = False
        if not getattr(self, "no_dialogs", False):
            buttons = QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No
            accepted = QMessageBox.warning(self, "Another patient?", found.side_by_side("second series"), buttons,
                                           QMessageBox.StandardButton.No) == QMessageBox.StandardButton.Yes  # fmt: skip
        record = {"with": "second series", "same_patient": False, "differs": list(found.differs),
                  "decision": "accepted by the clinician" if accepted else "refused"}  # fmt: skip
        if accepted:
            self._patient_check = record  # traced in the session the study opens in
        else:
            self.statusBar().showMessage(f"not opened: the series are of different patients "
                                         f"({', '.join(found.differs)} differ)", 8000)  # fmt: skip
        return accepted

    def _first_series(self, found: list[Series]) -> Series:
        """No dialog (screenshots, scripts): the first series, and a line saying how to choose another."""
        if len(found) == 1:
            return found[0]
        others = "; ".join(s.title for s in found[1:])
        print(f"medcopilot gui: {len(found)} series; opened {found[0].title}; choose with --series "
              f"(number, description or UID end): {others}", file=sys.stderr)  # fmt: skip
        return found[0]

    def progress(self, message: str) -> None:
        """A start-up message over the view area while a study opens (the window stays painted)."""
        startup.log("progress", message)
        self.statusBar().showMessage(message)
        self.busy_label.setText(message)
        self.busy_label.adjustSize()
        self.busy_label.move(max(0, (self.area.width() - self.busy_label.width()) // 2),
                             max(0, (self.area.height() - self.busy_label.height()) // 2))  # fmt: skip
        self.busy_label.show()
        self.busy_label.raise_()
        app = QApplication.instance()
        if app is not None:
            app.processEvents()

    def load_study(
        self, path: Path, series: Picked | None = None, trace_dir: str | Path | None = None, frame: int | None = None
    ) -> None:
        """Open a study with its session traced (by default in the per-user sessions folder)."""
        from copilot.panel.studies import open_study
        from copilot.study.sessions import new_session_dir

        study = study_at(path, series, frame)  # a PACS study (a URL or its cached folder): its origin traced
        chosen = [series] if isinstance(series, Series) else list(series or [])
        label = " + ".join(s.label for s in chosen) or place_label(path)
        self.progress(f"Opening {label}…")
        try:
            trace = trace_dir if trace_dir is not None else new_session_dir(study.kind)
            session = startup.in_worker(lambda: open_study(study, trace), lambda s: self._loading(label, s))
            self.set_session(session, study)
        finally:
            self.busy_label.hide()
            self.statusBar().clearMessage()
        self._opened = (Path(path), series, trace_dir)

    def _loading(self, label: str, seconds: float) -> None:
        """The start-up message with the seconds spent, once a study takes more than one."""
        if seconds >= 1.0:
            self.busy_label.setText(f"Opening {label}… {seconds:.0f} s")
            self.busy_label.adjustSize()

    def _open_case_index(self, index: int) -> None:
        if 0 <= index < len(self.cases):
            self.load_study(self.cases[index])

    def open_trace(self, trace_dir: str | Path) -> None:
        """Replay mode: the trace's calls re-executed; the timeline scrubs through the scenes they left."""
        from copilot.gui.timeline import ReplayDock
        from copilot.panel.answer_evidence import answer_evidence
        from copilot.panel.timeline import TraceTimeline

        timeline = TraceTimeline(trace_dir)
        self.set_session(timeline.session, timeline.study)
        self.timeline = timeline
        assert self.model is not None
        response = str(timeline.final.get("response") or "")
        if response:
            self.model.messages.append(("agent", response))
            self.model.answer_items = answer_evidence(response, timeline.study.kind)
        self.model.status = "replay " + ("verified" if timeline.verified else "DIFFERS from the trace")
        self.panel.run_button.setEnabled(False)
        self.replay_dock = ReplayDock(self, timeline)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.replay_dock)
        self.replay_dock.seek(len(timeline.steps) - 1)

    def set_session(self, session: Any, case: Any) -> None:
        """Show a session (its panes in the case's default layout) with a fresh copilot panel."""
        if self.model is not None:
            self.model.stop()
            self.model.listeners.clear()
            self.model.session.close({"status": "closed"})
        reading.close_prior(self)
        if self.replay_dock is not None:
            self.removeDockWidget(self.replay_dock)
            self.replay_dock.deleteLater()
            self.replay_dock, self.timeline = None, None
        self.screen_path = Screen(session)  # first: it follows the scene before the panel's listeners run
        self.pointer = PointerReadout(self.screen_path)
        self.model = PanelModel(session, case)
        policies = dict(self.policies) if self.policies is not None else default_policies(self)
        self.panel = PanelWidget(self.model, policies)
        self.dock.setWidget(self.panel)
        self.model.listeners.append(self._changed)
        from copilot.panel.clinician_tools import ClinicianTools

        self.tools = ClinicianTools(self.model)
        self.case_box.clear()
        banner = study_banner(case)  # for the clinician only: never in a request to the model
        self.case_box.addItems([c.name for c in self.cases] or [banner.label])
        root = Path(case.root).resolve()
        if root in self.cases:
            self.case_box.setCurrentIndex(self.cases.index(root))
        self.setWindowTitle(banner.title)
        from copilot.panel.same_patient import caption

        self.study_caption = caption(banner.facts) if banner.facts is not None else ""  # each pane: date, study
        if self.patient_bar.show_banner(banner):
            line = f"Now open: {banner.line}"  # shown once the opening's own messages are cleared
            QTimer.singleShot(0, lambda: self.statusBar().showMessage(line, 8000))
            self._settle.start()
        names = [n for _, n in self.screen_path.volumes()]
        self._scene_reset()
        from copilot.medflow.registry import find as find_module  # loaded with the first case, not at start-up

        self._default_preset = m.preset if (m := find_module(case.module)) is not None else None
        self._user_preset = None
        layout = reading.hang_study(self, session, case) or default_layout(self.screen_path.kind, case.module, names)
        self.pair = self._pair_ids(names)
        self.layout_box.setEnabled(self.screen_path.slice_views)
        self.preset_box.setEnabled(self.screen_path.slice_views)
        self._fill_fusion()
        self.sync_toolbar()
        self.set_layout(layout)

    def _pair_ids(self, names: list[str]) -> tuple[str, str] | None:
        assert self.screen_path is not None
        state = self.screen_path.state() if self.screen_path.slice_views else {}
        active = state.get("active_volume_name") or ""
        pair = longitudinal_pair(sorted(names, key=lambda n: n.split("_", 1)[-1] != active.split("_", 1)[-1]))
        if pair is None:
            return None
        ids = {n: vid for vid, n in self.screen_path.volumes()}
        return ids[pair[0]], ids[pair[1]]

    # ----- layout -----
    def set_layout(self, name: str) -> None:
        """Show a layout's panes; a kind shown other than in slice views keeps its own layout."""
        if self.screen_path is not None and not self.screen_path.slice_views:
            name = viewer_kind(self.screen_path.kind).layout
        if name == "side_by_side" and self.pair is None:
            vols = [vid for vid, _ in self.screen_path.volumes()] if self.screen_path else []
            if len(vols) < 2:
                name = "three_up"
            else:
                self.pair = (vols[0], vols[1])
        self.layout_name = name
        if self.pointer is not None:
            self.pointer.left()  # the panes are rebuilt: the pane under a resting pointer is found again below
        for widget in self.panes.values():
            widget.setParent(None)
            widget.deleteLater()
        self.panes = {}
        names = [self.focus, f"prior:{self.focus}"] if name == reading.PRIOR_LAYOUT else \
            panes(name, self.focus, self.pair, self.screen_path.views if self.screen_path else ())  # fmt: skip
        display = self.screen_path.display if self.screen_path is not None else "slices"
        for pane in names:  # a kind neither in slice views nor a slide: plain pictures
            cls = View3DPane if pane == "3d" else PANE_WIDGETS.get(display, PaneWidget)
            widget = cls(self, pane)
            widget.setParent(self.area)
            widget.show()
            self.panes[pane] = widget
        self.layout_box.setCurrentIndex(self.layout_box.findData(name))  # blank for a kind's own layout
        self.focus_action.setVisible(name in ("one_up", "side_by_side", reading.PRIOR_LAYOUT))
        self.place_panes()
        self._rest_pointer()

    def _rest_pointer(self) -> None:
        """The pane now under a pointer that has not moved (after a layout change): its next frame reads there."""
        if self.pointer is None:
            return
        for widget in self.panes.values():
            local = widget.mapFromGlobal(QCursor.pos())
            if widget.rect().contains(local):
                r = widget.devicePixelRatioF()
                self.pointer.moved(widget.pane, local.x() * r, local.y() * r, None)

    def set_fusion(self, foreground: str | None) -> None:
        """Show a volume over the active one at the opacity chosen (an audited clinician call)."""
        if self.screen_path is None or self.model is None or not self.screen_path.slice_views:
            return
        background = self.screen_path.state()["background_volume"]
        if foreground == background:
            foreground = None
        args = {"background_volume_ref": background, "foreground_volume_ref": foreground,
                "foreground_opacity": self.opacity.value() / 100.0, "view": "red", "size": 64}  # fmt: skip
        self.model.act("fusion", args)

    def set_background(self, vid: str | None) -> None:
        """Show another loaded series in every slice view (an audited clinician call)."""
        if vid is None or self.model is None or self.screen_path is None or not self.screen_path.slice_views:
            return
        self.model.act("select_volume", {"volume_id": vid, "size": 64})

    def set_wl_preset(self, name: str | None) -> None:
        """Window/level of the background series: a preset, or automatic (an audited clinician call)."""
        if name is None or self.model is None or self.screen_path is None or not self.screen_path.slice_views:
            return
        if name in (CUSTOM, OWN):  # what is shown already: a window no preset names
            return
        if name == "auto":
            self.model.act("wl", {"auto": True, "view": "red", "size": 64})
        else:
            self.model.act("window_preset", {"preset": name, "view": "red", "size": 64})

    def set_frame(self, frame: int) -> None:
        """Open another frame of a 4D image: the study reopened at it, the slice positions kept."""
        if self.screen_path is None or self._opened is None:
            return
        now = self.screen_path.frames()
        if now is None or now[0] == frame:
            return
        offsets = {n: self.screen_path.view(n).offset for n in ("red", "yellow", "green")}
        path, series, trace_dir = self._opened
        if not self.open_path(path, series, trace_dir, frame=frame):
            return
        assert self.model is not None
        for view, offset in offsets.items():
            self.model.act("set_slice_offset", {"view": view, "offset": round(offset, 6), "size": 64})

    def sync_toolbar(self) -> None:
        """The selectors show the scene as it is (after any call, the agent's included)."""
        if self.screen_path is None:
            return
        radiology = self.screen_path.slice_views
        state = self.screen_path.state() if radiology else {}
        for box, key in ((self.background_box, "background_volume"), (self.fusion_box, "foreground_volume")):
            i = box.findData(state.get(key))
            if i >= 0 and box.currentIndex() != i:
                box.setCurrentIndex(i)
        try:
            shown = selectors(state, self.screen_path.file_window())
            self._show_pet(state)
        except Busy:  # a call is running: its end syncs again
            shown = None
        if shown is not None:
            self._show_wl(shown)
            if self.opacity.value() != shown.opacity_percent:
                self.opacity.blockSignals(True)  # showing the scene's opacity is no clinician's change
                self.opacity.setValue(shown.opacity_percent)
                self.opacity.blockSignals(False)
        frames = self.screen_path.frames() if radiology else None
        for action in self.frame_actions:
            action.setVisible(frames is not None)
        if frames is not None:
            self.frame_box.blockSignals(True)
            self.frame_box.setRange(0, frames[1] - 1)
            self.frame_box.setValue(frames[0])
            self.frame_box.setSuffix(f"  (0–{frames[1] - 1})")
            self.frame_box.blockSignals(False)

    def _pet_layer(self, state: dict[str, Any]) -> tuple[str, Any, dict[str, Any]] | None:
        """The PET layer shown (the foreground's first, else the background's): its id, volume and display;
        `Busy` while a call runs."""
        if self.screen_path is None or not self.screen_path.slice_views or not self.screen_path.has_image():
            return None
        data = self.screen_path.session.scene_data(blocking=False)
        if data is None:
            raise Busy
        names = {v["id"]: v["name"] for v in state.get("volumes", [])}
        for vid, volume in ((state.get("foreground_volume"), data.get("foreground")),
                            (state.get("background_volume"), data.get("volume"))):  # fmt: skip
            if vid and volume is not None and volume.name == names.get(vid) and volume.modality == "PT":
                return str(vid), volume, (state.get("display") or {}).get(vid) or {}
        return None

    def _show_pet(self, state: dict[str, Any]) -> None:
        """The PET box on the PET's window in SUV and the colour bar of the PET layer (hidden without a PET)."""
        layer = self._pet_layer(state)
        bar = None
        if layer is not None and layer[2]:
            _, volume, display = layer
            bar = pet.colour_bar(volume, display, str(volume.name))
            factor = pet.suv_factor(volume)
            edit = self.pet_box.lineEdit()
            if factor is not None and not (edit is not None and edit.hasFocus()):
                text = pet.range_words(*pet.suv_range(factor, float(display["window"]), float(display["level"])))
                if self.pet_box.currentText() != text:
                    self.pet_box.setEditText(text)
            self.pet_box.setEnabled(factor is not None)
            self.pet_box.setToolTip(self.pet_box.toolTip() if factor is not None else
                                    f"no SUV: {pet.no_suv_reason(volume)}")  # fmt: skip
        for action in self.pet_actions:
            action.setVisible(layer is not None)
        if bar != self.pet_bar:
            self.pet_bar = bar
            for widget in self.panes.values():
                widget.update()

    def set_pet_window(self, text: str) -> None:
        """The PET windowed to an SUV range (a preset or typed): an audited clinician `wl` call on the PET's
        stored values; a range that cannot be read, or a PET without SUV, is said in the status bar."""
        if self.screen_path is None or self.model is None:
            return
        try:
            layer = self._pet_layer(self.screen_path.state())
            lo, hi = pet.parse_range(text)
        except (Busy, ValueError) as exc:
            self.statusBar().showMessage(str(exc) or "a call is running", 6000)
            return
        if layer is None:
            return
        vid, volume, display = layer
        factor = pet.suv_factor(volume)
        if factor is None:
            self.statusBar().showMessage(f"this PET has no SUV ({pet.no_suv_reason(volume)})", 6000)
            return
        window, level = pet.suv_window(factor, lo, hi)
        if display and abs(float(display["window"]) - window) < 1e-6 and abs(float(display["level"]) - level) < 1e-6:
            return  # shown already
        self.model.act("wl", {"window": window, "level": level, "volume_id": vid, "view": "red", "size": 64})

    def _show_wl(self, shown: Selectors) -> None:
        """The W/L box on the background's window: its preset, Auto, or one entry naming a window no preset names
        (the file's own, a custom one), added while it is shown."""
        extra = self.wl_box.findData(CUSTOM)
        if shown.wl in (CUSTOM, OWN):
            if extra < 0:
                self.wl_box.addItem(shown.wl_title, CUSTOM)
                extra = self.wl_box.count() - 1
            self.wl_box.setItemText(extra, shown.wl_title)
            i = extra
        else:
            if extra >= 0:
                self.wl_box.removeItem(extra)
            i = self.wl_box.findData(shown.wl)
        if self.wl_box.currentIndex() != i:
            self.wl_box.setCurrentIndex(i)
        self.wl_box.setEnabled(self.screen_path is not None and self.screen_path.slice_views and shown.wl is not None)

    def _fill_fusion(self) -> None:
        assert self.screen_path is not None
        self.fusion_box.clear()
        self.fusion_box.addItem("none", None)
        self.background_box.clear()
        for vid, name in self.screen_path.volumes():
            self.fusion_box.addItem(name, vid)
            self.background_box.addItem(name, vid)
        radiology = self.screen_path.slice_views
        for widget in (self.fusion_box, self.opacity, self.background_box):
            widget.setEnabled(radiology)

    def set_focus(self, view: str) -> None:
        self.focus = view
        self.set_layout(self.layout_name)

    def place_panes(self) -> None:
        """Fill the area with the layout's panes and re-render them at their new device sizes."""
        rects = arrange(self.layout_name, self.area.width(), self.area.height(), len(self.panes))
        for widget, r in zip(self.panes.values(), rects, strict=False):
            widget.setGeometry(r.x, r.y, r.w, r.h)
        self._sizes = {name: w.device_size() for name, w in self.panes.items()}
        if self.model is not None:
            self.refresh()

    # ----- rendering -----
    def _changed(self, what: str = "") -> None:
        """After a call: render in the thread that made it (the GUI thread never waits for the lock)."""
        if self.screen_path is None:
            return
        if what == "stream":  # only the chat changed: the GUI thread shows the new text
            self.bridge.text.emit()
            return
        if what == "undo":  # the scene was rewound (no call): the screen reads it again
            self.screen_path.sync()
        gui_thread = threading.current_thread() is threading.main_thread()
        if not self._batch_lock.acquire(blocking=not gui_thread):
            self._retry.start()
            return
        try:
            self._rendered += 1  # batches are numbered in scene order: a late one never overwrites a newer one
            batch = (self._rendered, self._render_frames(blocking=not gui_thread))
        except Busy:
            self._retry.start()
            return
        finally:
            self._batch_lock.release()
        if gui_thread:
            self._show(batch)
        else:
            self.bridge.frames.emit(batch)

    def _render_frames(self, blocking: bool) -> dict[str, Frame | None]:
        assert self.screen_path is not None and self.model is not None
        evidence, cross, sel = self.model.evidence, self.model.crosshair, self.model.selected
        return {
            name: self.screen_path.frame(name, size, evidence, cross, sel, blocking)
            for name, size in dict(self._sizes).items()
            if name != "3d" and not name.startswith("prior:")
        } | reading.prior_frames(self.prior_screen, self._sizes, blocking)

    def _show(self, batch: tuple[int, dict[str, Frame | None]]) -> None:
        number, frames = batch
        if number < self._shown:
            frames = {}
        self._shown = max(self._shown, number)
        for name, frame in frames.items():
            widget = self.panes.get(name)
            old = widget.frame if widget is not None else None
            if old is not None and frame is not None and old.pixels is frame.pixels and old.markers == frame.markers:
                continue  # unchanged: no repaint
            if widget is not None and (frame is None or frame.size == widget.device_size()):
                widget.set_frame(frame)
            elif widget is not None:
                self._retry.start()  # rendered for a size the pane no longer has
        if "3d" in self.panes:
            self.schedule_3d()
        if self.model is not None:
            self.panel.refresh()
            self.sync_toolbar()
        if self.replay_dock is not None:
            self.replay_dock.refresh()

    def refresh(self, *_: Any) -> None:
        """Re-render and repaint now (GUI thread)."""
        self._changed("refresh")

    # ----- 3D -----
    @property
    def scene3d(self) -> Any:
        if self._scene3d is None:
            from copilot.gui.scene3d import Scene3D

            self._scene3d = Scene3D()
        return self._scene3d

    def _scene_reset(self) -> None:
        if self._scene3d is not None:
            self._scene3d.close()
            self._scene3d = None

    def set_preset(self, preset: str | None) -> None:
        """A 3D preset chosen by the clinician; None: the one that fits the series shown."""
        self._user_preset = preset
        if preset is not None:
            self.scene3d.set_preset(preset)
        self.schedule_3d()

    def schedule_3d(self, interactive: bool = False) -> None:
        """Render the 3D pane soon: at a third of its size while the pointer drags it, in full after."""
        self._interactive3d = interactive
        self._timer3d.start(10 if interactive else 120)

    def render_3d_now(self) -> None:
        """Render the 3D pane at once (screenshots)."""
        self._timer3d.stop()
        self._render_3d()

    def _render_3d(self) -> None:
        widget = self.panes.get("3d")
        if widget is None or self.screen_path is None or self.model is None:
            return
        try:
            inputs = self.screen_path.scene3d_inputs(blocking=False)
        except Busy:
            self._timer3d.start(60)
            return
        evidence = self.model.evidence
        if inputs is None:
            return
        scene = self.scene3d
        scene.set_segments(inputs["segments"])
        preset = self._user_preset or self._fitting_preset(inputs["volume"])
        if preset != scene.preset:
            scene.set_preset(preset)
        scene.set_volume(inputs["volume"], inputs["window"], inputs["level"], preset)
        from copilot.panel.screen import evidence_points_ras

        points = evidence_points_ras(evidence, self.model.selected)
        scene.set_points(points)
        chosen = next((ras for ras, on in points if on), None)
        if chosen is not None and self.model.selected != self._focused3d:  # a newly selected item: turn about it
            scene.look_at(chosen)
        self._focused3d = self.model.selected
        scene.set_planes(inputs["planes"])
        i = self.preset_box.findData(self._user_preset)
        if i >= 0 and self.preset_box.currentIndex() != i:
            self.preset_box.setCurrentIndex(i)
        w, h = widget.device_size()
        div = 3 if self._interactive3d else 1
        pixels = scene.render((max(16, w // div), max(16, h // div)))
        if div > 1:
            import numpy as np

            pixels = np.ascontiguousarray(np.repeat(np.repeat(pixels, div, axis=0), div, axis=1)[:h, :w])
            self._timer3d.start(250)  # then the full-resolution picture
            self._interactive3d = False
        widget.set_frame(Frame("3d", pixels))

    def place_cursor(self, ras: list[float]) -> None:
        """The linked cursor at a RAS point (every slice view through it) and its values in the status bar, as
        when the pointer rests there; on a slide, a level-0 point (x, y) in pixels and µm."""
        if self.model is None or self.screen_path is None:
            return
        if not self.screen_path.slice_views:
            if len(ras) == 2:
                self.readout.setText(self.screen_path.slide_readout(float(ras[0]), float(ras[1])))
            return
        self.model.jump(list(ras))
        self.readout.setText(self.screen_path.readout(list(ras)))

    def _fitting_preset(self, volume: Any) -> str:
        """The 3D preset for the series shown: the case's own (lung CT), else by modality, description and
        window preset."""
        from copilot.gui.scene3d import volume_preset

        assert self.screen_path is not None
        state = self.screen_path.state()
        wl = ((state.get("display") or {}).get(state.get("background_volume")) or {}).get("preset")
        if self._default_preset and volume.modality == "CT":
            return self._default_preset
        return volume_preset(volume, wl)

    # ----- facts the panes ask for -----
    def slide_norm1000(self, level0: tuple[float, float]) -> tuple[float, float] | None:
        assert self.screen_path is not None
        return self.screen_path.slide_norm1000(level0)

    def slide_dimensions(self) -> tuple[int, int]:
        assert self.screen_path is not None
        return self.screen_path.slide_dimensions()

    def closeEvent(self, event: Any) -> None:
        reading.close_prior(self)
        if self.model is not None:
            self.model.stop()
            self.model.session.close({"status": "closed"})
        self._scene_reset()
        super().closeEvent(event)


def build_window(path: str | Path, trace_dir: str | Path | None = None, cases: list[Path] | None = None) -> MainWindow:
    """A window showing a study (or a folder of case packs, or a trace); errors are raised. A DICOM folder with
    several series opens its first."""
    window = MainWindow()
    window.open_study_path(path, trace_dir=trace_dir, cases=cases, pick=lambda found: found[0])
    return window


def _announce(model: PanelModel, line: str) -> None:
    model.messages.append(("system", line))
    print(f"medcopilot gui: {line}", file=sys.stderr)


def _run_problem(spec: str, target: str | Path) -> str | None:
    """Why a policy cannot run on the study at a path (None when it can, or for a trace): a study that is no
    case pack has no benchmark module, whatever its series."""
    from copilot.cases.pack import load_case
    from copilot.study.policies import policy_problem

    try:
        what = classify(target)
        if what == "trace":
            return None
        case = load_case(case_packs(target)[0] if what == "case_folder" else target) if "case" in what else None
    except (StudyError, OSError, ValueError):
        return None
    return policy_problem(spec, case)


def main(
    path: str | None,
    screenshot: str | None = None,
    run: str | None = None,
    layout: str | None = None,
    fusion: str | None = None,
    asks: list[str] | None = None,
    policy: str = "openai",
    base_url: str | None = None,
    trace_dir: str | None = None,
    series: str | None = None,
    frame: int | None = None,
    cursor: list[float] | None = None,
    prior: str | None = None,
) -> int:
    """Open a study (or the last one; a DICOM folder's series as `series` names it, a 4D file at `frame`) and the
    `prior` study beside it (as File → Open prior study does; with `screenshot` its alignment approved); with
    `screenshot`, optionally run an offline policy or ask the model (then show the `fusion` volume over the active
    one and put the linked cursor at the RAS point `cursor`, its values in the status bar), save a picture of the
    window and exit: 1 when the run failed, 2 when it could not start (the reason on one line)."""
    problem = display_problem()
    if problem is not None:
        print(f"medcopilot gui: {problem}", file=sys.stderr)
        return 2
    app = QApplication.instance() or QApplication(sys.argv)
    startup.watch_first_frame()
    window = MainWindow()
    window.quiet = window.no_dialogs = screenshot is not None
    target = path or next(iter(window.recent.items()), None)
    if target is not None and not is_dicomweb_url(target) and not Path(target).exists():
        print(f"medcopilot gui: {target} does not exist", file=sys.stderr)
        return 2
    if run and target is not None and screenshot is not None:  # refused before the study is even opened
        problem = _run_problem(run, target)
        if problem:
            print(f"medcopilot gui: {problem}", file=sys.stderr)
            return 2
    window.show()  # first: the start-up message shows while the study opens
    startup.close_splash(keep_image=True)  # the study's first image stays until the viewer has painted it
    if target is not None and series is not None and not is_dicomweb_url(target) and classify(target) != "dicom":
        print("medcopilot gui: --series applies to a DICOM folder", file=sys.stderr)
        return 2
    opened = target is not None and window.open_path(target, trace_dir=trace_dir, series_spec=series, frame=frame)
    QTimer.singleShot(0 if not opened else 1500, startup.close_splash)  # at the latest: a study without panes
    if target is not None and not opened:
        return 2 if screenshot else int(app.exec())  # an unreadable study is bad input: exit code 2, as everywhere
    if layout:
        window.set_layout(layout)
    if prior is not None and screenshot is None:  # once the window shows: the clinician answers its questions
        QTimer.singleShot(0, lambda: reading.open_prior(window, prior))
    elif prior is not None and not reading.open_prior(window, prior, approve=True, other_patient=False):
        return 2  # the reason is on stderr
    if screenshot is None:
        return int(app.exec())
    from copilot.study.policies import PolicyUnavailable, study_policy  # here: a start without a run skips it

    failed = False
    turns = [(run, "")] if run else [(policy, q) for q in asks or []]
    conversation = None
    for spec, question in turns if window.model is not None else []:
        assert window.model is not None
        try:
            if conversation is None:
                conversation = study_policy(spec, window.model.case, window.model.session.kind, question,
                                            base_url=base_url)  # fmt: skip
                if hasattr(conversation, "announce"):  # the remote-service notice, in the chat and on stderr
                    conversation.announce = functools.partial(_announce, window.model)
        except PolicyUnavailable as exc:
            print(f"medcopilot gui: {exc}", file=sys.stderr)
            return 2
        window.model.run_episode(conversation, question)
        while not window.model.wait(0.05):
            app.processEvents()
        if window.model.status in ("error", "stopped"):
            reason = window.model.messages[-1][1] if window.model.messages else window.model.status
            print(f"medcopilot gui: the run failed: {reason}", file=sys.stderr)
            failed = True
            break
    if fusion and window.screen_path is not None:
        ids = {name: vid for vid, name in window.screen_path.volumes()}
        if fusion not in ids:
            print(f"medcopilot gui: no volume {fusion!r}; volumes: {sorted(ids)}", file=sys.stderr)
            return 2
        window.fusion_box.setCurrentIndex(window.fusion_box.findData(ids[fusion]))
        window.set_fusion(ids[fusion])
    if cursor is not None:
        window.place_cursor(cursor)
    for _ in range(30):
        app.processEvents()
        time.sleep(0.02)
    if "3d" in window.panes:
        window.render_3d_now()
        app.processEvents()
    jpeg = screenshot.lower().endswith((".jpg", ".jpeg"))
    window.grab().save(screenshot, None, 90 if jpeg else 0)  # PNG at the strongest compression
    make_private(screenshot)  # the patient banner is in the picture
    print(screenshot)
    window.close()  # the session's trace gets its end
    return 1 if failed else 0
