"""The desktop's reading-room tools, bound to the Qt-free view-models: Edit → Undo (the last change, or the agent's
last action), the ruler toggle, and the prior study opened side by side after the clinician approves its rigid
registration; the hanging protocol applied when a study opens with several series."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QFileDialog, QInputDialog, QMessageBox, QToolBar

PRIOR_LAYOUT = "prior"  # the current view beside the same view of the prior
PRIOR_TITLE = "Side by side with the prior"


def install(window: Any) -> None:
    """The Edit menu, the File menu's prior entries and the ruler toggle of a main window."""
    edit = window.menuBar().addMenu("&Edit")
    undo = QAction("Undo", window)
    undo.setShortcut(QKeySequence.StandardKey.Undo)
    undo.triggered.connect(lambda: undo_last(window))
    edit.addAction(undo)
    undo_agent = QAction("Undo the agent's last action", window)
    undo_agent.triggered.connect(lambda: undo_last(window, "agent"))
    edit.addAction(undo_agent)
    file = window.menuBar().actions()[0].menu()
    first = file.actions()[3] if len(file.actions()) > 3 else None
    for text, slot in (("Open prior study for comparison (file or folder)…", lambda: _prior_dialog(window)),
                       ("Open prior study from PACS (DICOMweb URL)…", lambda: _prior_url_dialog(window))):  # fmt: skip
        action = QAction(text, window)
        action.triggered.connect(slot)
        file.insertAction(first, action) if first is not None else file.addAction(action)
    window.link_window_action = QAction("Link window/level with the prior", window)
    window.link_window_action.setCheckable(True)
    window.link_window_action.setChecked(True)
    window.link_window_action.setToolTip("a CT prior is windowed as the current study (MR keeps its own)")
    window.link_window_action.toggled.connect(lambda on: _link_window(window, on))
    edit.addAction(window.link_window_action)
    window.ruler_action = QAction("Ruler", window)
    window.ruler_action.setCheckable(True)
    window.ruler_action.setToolTip("left-drag on a slice view measures a distance, listed as your evidence")
    window.shape_actions = {}
    tools = QActionGroup(window)  # one drawing tool at a time, or none
    tools.setExclusionPolicy(QActionGroup.ExclusionPolicy.ExclusiveOptional)
    tools.addAction(window.ruler_action)
    for shape, text, tip in (
        ("bidirectional", "Bidirectional", "drag the long axis, then across it: the short axis, perpendicular"),
        ("ellipse", "Ellipse ROI", "drag across an ellipse's box: its area and statistics, listed as your evidence"),
    ):
        action = window.shape_actions[shape] = QAction(text, window)
        action.setCheckable(True)
        action.setToolTip(tip)
        tools.addAction(action)
    bar = window.findChild(QToolBar, "view_toolbar")
    if bar is not None:
        bar.addAction(window.ruler_action)
        for action in window.shape_actions.values():
            bar.addAction(action)


def undo_last(window: Any, actor: str | None = None) -> None:
    """Undo from the menu: the reason it cannot shows in the status bar."""
    if window.model is None:
        return
    try:
        step = window.model.undo(actor)
    except (IndexError, RuntimeError) as exc:
        window.statusBar().showMessage(str(exc), 5000)
        return
    window.statusBar().showMessage(f"undone: {step.title()}", 5000)


def _link_window(window: Any, on: bool) -> None:
    """The clinician's toggle: the prior's window/level follows the current's (at once when turned on)."""
    prior = getattr(window, "prior", None)
    if prior is not None:
        prior.link_window = on
        if on:
            prior.follow_window()


def _prior_dialog(window: Any) -> None:
    path = QFileDialog.getExistingDirectory(window, "Prior study: a DICOM folder") or \
        QFileDialog.getOpenFileName(window, "Prior study: a volume file")[0]  # fmt: skip
    if path:
        open_prior(window, path)


def _prior_url_dialog(window: Any) -> None:
    url, ok = QInputDialog.getText(window, "Prior from PACS", "DICOMweb study or series URL of the prior:")
    if ok and url.strip():
        open_prior(window, url.strip())


def _other_patient_dialog(window: Any) -> Any:
    """The clinician's answer to a prior of another patient: both patients shown side by side, No by default."""

    def ask(found: Any) -> bool:
        answer = QMessageBox.warning(window, "Another patient?", found.side_by_side("prior"),
                                     QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                                     QMessageBox.StandardButton.No)  # fmt: skip
        return bool(answer == QMessageBox.StandardButton.Yes)

    return ask


def open_prior(
    window: Any, path: str | Path, approve: bool | None = None, other_patient: bool | None = None
) -> bool:
    """Open a prior study beside the current one: checked to be of the same patient (another patient's only after
    the clinician accepts both shown side by side; `other_patient` answers for them in scripts), its own session
    and trace, a rigid registration proposed and shown in words, and the two scrolled together once the
    clinician approves (`approve` answers for them in scripts and screenshots). False when it could not open,
    was of another patient and not accepted, or the registration was rejected."""
    from copilot.gui import startup
    from copilot.pacs.fetch import local_study
    from copilot.pacs.patient import study_facts
    from copilot.panel.prior import PriorComparison
    from copilot.panel.same_patient import caption, check_patient
    from copilot.panel.screen import Screen
    from copilot.panel.studies import dicom_series, open_study, study_at
    from copilot.study.sessions import new_session_dir

    if window.model is None or window.screen_path is None or not window.screen_path.slice_views:
        return False
    close_prior(window)
    try:
        local = local_study(path).path
        found = dicom_series(local) if Path(local).is_dir() else []
        study = study_at(local, found[0] if len(found) > 1 else None)
        case = window.model.case
        current = study_facts(case.root, dict(case.inputs or {}))
        other = study_facts(study.root, dict(study.inputs or {}))
        accept = _other_patient_dialog(window) if other_patient is None else (lambda _found: other_patient)
        check_patient(window.model.session, current, other, "prior", accept)
        window.prior_caption = caption(other, "prior", current)
        window.study_caption = caption(current)
        window.progress("Opening the prior study…")
        prior = startup.in_worker(lambda: open_study(study, new_session_dir(study.kind)), lambda *_: None)
        comparison = PriorComparison(window.model.session, prior)
        window.progress("Registering the prior to the current study (rigid)…")
        proposal = startup.in_worker(comparison.propose, lambda *_: None)
    except Exception as exc:  # shown, never a crash
        window.readout.setText(f"cannot open the prior {path}: {exc}")
        print(f"medcopilot gui: cannot open the prior: {exc}", file=sys.stderr)
        return False
    finally:
        window.busy_label.hide()
        window.statusBar().clearMessage()
    if approve is None:
        answer = QMessageBox.question(window, "Align the prior?",
                                      f"Align the prior to the current study and scroll them together?\n\n"
                                      f"{proposal.words()}")  # fmt: skip
        approve = answer == QMessageBox.StandardButton.Yes
    if not approve:
        comparison.reject("declined in the dialog")
        comparison.close()
        return False
    window.prior, window.prior_screen = comparison, Screen(prior)
    comparison.link_window = window.link_window_action.isChecked() if hasattr(window, "link_window_action") else True
    comparison.approve()
    window.layout_box.addItem(PRIOR_TITLE, PRIOR_LAYOUT)
    window.set_layout(PRIOR_LAYOUT)
    window.statusBar().showMessage(f"prior aligned: {proposal.words()}", 8000)
    return True


def close_prior(window: Any) -> None:
    """End a prior comparison (its session's trace gets its end)."""
    if getattr(window, "prior", None) is None:
        return
    window.prior.close()
    window.prior = window.prior_screen = None
    i = window.layout_box.findData(PRIOR_LAYOUT)
    if i >= 0:
        window.layout_box.removeItem(i)


def prior_frames(screen: Any, sizes: dict[str, tuple[int, int]], blocking: bool) -> dict[str, Any]:
    """The prior's panes ("prior:red" …) rendered by the prior's screen at their sizes."""
    if screen is None:
        return {}
    return {name: screen.frame(name.split(":", 1)[1], size, [], None, None, blocking)
            for name, size in dict(sizes).items() if name.startswith("prior:")}  # fmt: skip


def hang_study(window: Any, session: Any, case: Any) -> str | None:
    """A clinician's study opened with several series gets the hanging protocol of its modalities (benchmark cases
    keep their module's layout): the desktop layout it asks for, or None."""
    from copilot.medflow.registry import find as find_module
    from copilot.panel.hanging import hang

    if find_module(getattr(case, "module", "") or "") is not None or len(window.screen_path.volumes()) < 2:
        return None
    rule = hang(session)
    if rule is None or rule.layout is None:
        return None
    if rule.layout.startswith("one_up_"):
        window.focus = rule.layout.removeprefix("one_up_")
        return "one_up"
    return rule.layout
