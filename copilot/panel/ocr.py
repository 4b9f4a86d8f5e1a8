"""Text burnt into an image, read before the image leaves the machine: Tesseract (the `tesseract` program Debian's
`tesseract-ocr` installs, called as a subprocess) reads the words and their boxes; words that spell one of the
study's identifiers (alone or with up to three neighbours on their line, compared as the scrubber compares text)
are blanked (filled black) and the image re-encoded. An image Tesseract cannot read is withheld (sent black).
What was blanked is reported by count, never by its text. Each image is read once (cached by its bytes' hash).
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw

TESSERACT = os.environ.get("MEDCOPILOT_TESSERACT", "tesseract")
TIMEOUT_S = 30.0
MARGIN = 2  # pixels added around a word's box
WINDOW = 4  # words read together (a name and its given name, an ID split by spaces)
CACHE = 256


def available() -> bool:
    """Whether the OCR program is installed."""
    return shutil.which(TESSERACT) is not None


@dataclass(frozen=True)
class Word:
    text: str
    box: tuple[int, int, int, int]  # left, top, width, height
    line: tuple[str, ...]  # page, block, paragraph and line numbers


def read_words(image: bytes, timeout: float = TIMEOUT_S) -> list[Word]:
    """The words Tesseract reads in an encoded image (raises OSError or subprocess errors when it cannot)."""
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # one core per image: the views are read one after another
    done = subprocess.run([TESSERACT, "stdin", "stdout", "--psm", "11", "tsv"], input=image, capture_output=True,
                          timeout=timeout, check=True, env=env)  # fmt: skip
    words = []
    for row in done.stdout.decode("utf-8", "replace").splitlines()[1:]:
        cols = row.split("\t")
        if len(cols) >= 12 and cols[0] == "5" and cols[11].strip():
            left, top, width, height = (int(c) for c in cols[6:10])
            words.append(Word(cols[11].strip(), (left, top, width, height), tuple(cols[1:5])))
    return words


def identifying_words(words: list[Word], found_in: Callable[[str], list[str]]) -> list[Word]:
    """The words that spell an identifier, alone or with up to WINDOW - 1 following words of their line."""
    out: dict[int, Word] = {}
    for n, word in enumerate(words):
        for size in range(1, WINDOW + 1):
            span = words[n : n + size]
            if len(span) < size or any(w.line != word.line for w in span):
                break
            if found_in(" ".join(w.text for w in span)):
                out.update({n + k: w for k, w in enumerate(span)})
                break
    return [out[k] for k in sorted(out)]


def blank(image: Image.Image, boxes: list[tuple[int, int, int, int]]) -> Image.Image:
    """A copy of the image with the boxes filled black."""
    out = image.copy() if image.mode in ("L", "RGB", "RGBA") else image.convert("RGB")
    draw = ImageDraw.Draw(out)
    for left, top, width, height in boxes:
        draw.rectangle((left - MARGIN, top - MARGIN, left + width + MARGIN, top + height + MARGIN), fill=0)
    return out


class ImageGuard:
    """Reads every image of a request before it is sent; blanks the words that spell an identifier."""

    def __init__(self, found_in: Callable[[str], list[str]], on_event: Callable[[str, dict[str, Any]], None]
                 | None = None) -> None:  # fmt: skip
        self.found_in = found_in
        self.on_event = on_event  # (kind, payload): traced by the session once it is known
        self._seen: dict[str, str] = {}
        self.read = 0

    def data_url(self, url: str) -> str:
        """The image of a data URL as it may be sent (the same URL when it holds no identifier)."""
        key = hashlib.sha256(url.encode("ascii", "replace")).hexdigest()
        if key in self._seen:
            return self._seen[key]
        head, _, body = url.partition(",")
        try:
            raw = base64.b64decode(body)
            image = Image.open(io.BytesIO(raw))
            image.load()
        except (ValueError, OSError) as exc:  # not an image we can read: sent as a black pixel, never unchecked
            self._event("image_withheld", {"image_sha256": key[:16], "reason": type(exc).__name__})
            return self._encode(Image.new("L", (1, 1), 0), "data:image/png;base64", "PNG")
        fmt = image.format or "PNG"
        self.read += 1
        try:
            found = identifying_words(read_words(raw), self.found_in)
        except (OSError, subprocess.SubprocessError) as exc:  # unreadable: withheld rather than sent unchecked
            self._event("image_withheld", {"image_sha256": key[:16], "reason": type(exc).__name__})
            out = self._encode(blank(image, [(0, 0, image.width, image.height)]), head, fmt)
        else:
            if not found:
                out = url
            else:
                self._event("image_text_blanked", {"image_sha256": key[:16], "words": len(found)})
                out = self._encode(blank(image, [w.box for w in found]), head, fmt)
        if len(self._seen) >= CACHE:
            self._seen.pop(next(iter(self._seen)))
        self._seen[key] = out
        return out

    def _event(self, kind: str, payload: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(kind, payload)

    @staticmethod
    def _encode(image: Image.Image, head: str, fmt: str) -> str:
        buf = io.BytesIO()
        image.save(buf, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
        return f"{head},{base64.b64encode(buf.getvalue()).decode('ascii')}"
