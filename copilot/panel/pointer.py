"""The value under a resting pointer (Qt-free): the status-bar line follows the picture, not only the mouse.

The pointer's pane and device position are kept; every frame that pane is shown afterwards — after a wheel
scroll, a key, an agent's call, a layout or series change, a slide zoom or pan — maps that same position
through the new frame's geometry again, so the RAS point and value (or a slide's pixels and µm) always belong
to what is on the screen under the pointer.
"""

from __future__ import annotations

from typing import Any

from copilot.panel.screen import Frame, split_pane


class PointerReadout:
    """Where the pointer rests (pane, device x/y) and the status-bar line for it."""

    def __init__(self, screen: Any) -> None:
        self.screen = screen
        self.pane: str | None = None
        self.at: tuple[float, float] | None = None
        self.text = ""

    def moved(self, pane: str, x: float, y: float, frame: Frame | None) -> str:
        """The pointer moved over a pane showing `frame` (None: not yet rendered): the line for that spot."""
        self.pane, self.at = pane, (x, y)
        self.text = self._line(frame)
        return self.text

    def left(self, pane: str | None = None) -> None:
        """The pointer left a pane (or every pane, as when the layout is rebuilt): nothing follows it."""
        if pane is None or pane == self.pane:
            self.pane, self.at = None, None

    def shown(self, pane: str, frame: Frame | None) -> str | None:
        """A pane was shown a new frame: the fresh line when the pointer rests on it, else None."""
        if pane != self.pane or self.at is None:
            return None
        self.text = self._line(frame)
        return self.text

    def _line(self, frame: Frame | None) -> str:
        if frame is None or self.at is None or self.pane is None:
            return ""
        if frame.viewport is not None:
            point = frame.to_level0(*self.at)
            return "" if point is None else str(self.screen.slide_readout(*point))
        ras = frame.to_ras(*self.at)
        return "" if ras is None else str(self.screen.readout(ras, split_pane(self.pane)[1]))
