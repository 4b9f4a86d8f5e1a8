"""Outlined overlay text (labels, orientation letters) drawn from cached sprites: stroking a glyph outline with
round joins is the dearest thing a pane paints, and the same few texts come back on every repaint.

A sprite is the text's outline stroked and filled once into a transparent image at the sub-pixel offset it is
drawn at, then blitted at whole device pixels: the path is translated by whole pixels only, so its coverage is the
one the direct drawing gives (the composite differs by at most a grey level where stroke and fill overlap).
"""

from __future__ import annotations

import math
from collections import OrderedDict

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPen

SPRITES_KEPT = 512  # sprites kept (least recently used dropped): a few panes' labels and letters at a few offsets
_MARGIN = 2  # device pixels around the stroked outline
_SPRITES: OrderedDict[tuple[object, ...], tuple[QImage, int, int]] = OrderedDict()


def outlined_text(p: QPainter, pos: QPointF, text: str, colour: QColor, width: float = 3.0) -> None:
    """Text with a dark outline at `pos` (the baseline's start, logical pixels): readable on black background,
    white bone and bright slide glass alike."""
    if not text:
        return
    device = p.device()
    ratio = device.devicePixelRatioF() if device is not None else 1.0
    if not p.worldTransform().isIdentity():  # a transformed painter: drawn directly
        _stroke_and_fill(p, _path(pos, p.font(), text), colour, width)
        return
    dx, dy = pos.x() * ratio, pos.y() * ratio
    ix, iy = math.floor(dx), math.floor(dy)
    key = (text, p.font().key(), colour.rgba(), width, ratio, dx - ix, dy - iy)
    sprite = _SPRITES.get(key)
    if sprite is None:
        sprite = _SPRITES[key] = _sprite(QPointF((dx - ix) / ratio, (dy - iy) / ratio), p, text, colour, width, ratio)
        if len(_SPRITES) > SPRITES_KEPT:
            _SPRITES.popitem(last=False)
    else:
        _SPRITES.move_to_end(key)
    image, ox, oy = sprite
    p.drawImage(QPointF((ix + ox) / ratio, (iy + oy) / ratio), image)


def _path(pos: QPointF, font: QFont, text: str) -> QPainterPath:
    path = QPainterPath()
    path.addText(pos, font, text)
    return path


def _stroke_and_fill(p: QPainter, path: QPainterPath, colour: QColor, width: float) -> None:
    p.save()
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.strokePath(path, QPen(QColor(0, 0, 0, 220), width, Qt.PenStyle.SolidLine, Qt.PenCapStyle.RoundCap,
                            Qt.PenJoinStyle.RoundJoin))  # fmt: skip
    p.fillPath(path, colour)
    p.restore()


def _sprite(at: QPointF, p: QPainter, text: str, colour: QColor, width: float, ratio: float) -> tuple[QImage, int, int]:
    """The outlined text drawn at `at` (within one device pixel of the origin) into a transparent image, and the
    device offset of the image's corner from the origin's pixel."""
    path = _path(at, p.font(), text)
    r = path.boundingRect()
    pad = width / 2 * ratio + _MARGIN
    ox, oy = math.floor(r.left() * ratio - pad), math.floor(r.top() * ratio - pad)
    w, h = math.ceil(r.right() * ratio + pad) - ox, math.ceil(r.bottom() * ratio + pad) - oy
    image = QImage(max(1, w), max(1, h), QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(ratio)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.translate(-ox / ratio, -oy / ratio)
    _stroke_and_fill(painter, path, colour, width)
    painter.end()
    return image, ox, oy
