"""What the MCP server shows of the handlers: tools with their annotations, and call results within clients' limits.

A tool result is the call's JSON envelope as text, then each rendered view as image content, as long as the images
stay within the limits MCP clients put on what they pass to a model:

- the whole result at most `MAX_RESULT_CHARS` = 1,048,576 characters (text plus base64): Claude Desktop refuses a
  larger tool result ("result exceeds maximum length of 1048576"; PrefectHQ/fastmcp#1036, CursorTouch/Windows-MCP#155);
- one image's base64 at most `MAX_IMAGE_BASE64` = 5,242,880 bytes, Anthropic's API limit ("image exceeds 5 MB
  maximum", anthropics/claude-code#14887), which matters when a larger result budget is chosen;
- each side at most `MAX_IMAGE_SIDE` = 2000 px, the API's limit once a conversation holds more than 20 images
  (docs.claude.com "Vision": 8000 px otherwise), which an agent's conversation soon does.

An image beyond them is left out, never resized (the trace holds its hash and a resized copy would not match): a
text item names it, its size, its SHA-256 and what to ask instead. Views come in the order the handler gave them.
"""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import mcp.types as types

from copilot.tools.registry import HandlerSpec
from copilot.tools.study_text import for_the_agent
from copilot.trace.outcome import CallOutcome, EncodedImage

MAX_RESULT_CHARS = 1_048_576
MAX_IMAGE_BASE64 = 5 * 1024 * 1024
MAX_IMAGE_SIDE = 2000
_ITEM_CHARS = 64  # JSON around one content item (type, mimeType, keys), counted against the result's budget
_NOTES_SHOWN = 5  # images named one by one in the note on what was left out (kept within _NOTE_CHARS)
_NOTE_CHARS = 2048


def tool(spec: HandlerSpec) -> types.Tool:
    """The MCP tool of one handler: name, description, argument schema and annotations."""
    return types.Tool(
        name=spec.name,
        title=str(spec.annotations()["title"]),
        description=spec.description,
        input_schema=spec.parameters_schema(),
        annotations=types.ToolAnnotations.model_validate(spec.annotations()),
    )


def png_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG's IHDR chunk (an animated PNG's too), None for anything else."""
    if len(data) < 24 or data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


def _refusal(image: EncodedImage, encoded: int, used: int, max_chars: int) -> str | None:
    """Why an image cannot go into the result (None when it can)."""
    size = png_size(image.data) if image.mime == "image/png" else None
    if size is not None and max(size) > MAX_IMAGE_SIDE:
        return (
            f"{size[0]}×{size[1]} px is over the {MAX_IMAGE_SIDE} px side models accept once a conversation holds "
            f"more than 20 images: ask for size ≤ {MAX_IMAGE_SIDE}"
        )
    if encoded > MAX_IMAGE_BASE64:
        return f"its base64 ({encoded} bytes) is over the {MAX_IMAGE_BASE64} bytes a model accepts for one image"
    if used + encoded + _ITEM_CHARS > max_chars:
        return (
            f"it would take the result past {max_chars} characters (the largest tool result clients accept): "
            "ask for one view, fewer keyframes or a smaller size"
        )
    return None


def content(outcome: CallOutcome, max_chars: int = MAX_RESULT_CHARS) -> list[Any]:
    """The result's content items: the envelope (image metadata and hashes, no pixels; no UID nor path of this
    machine: a study is named by its pseudonymous reference), then the images that fit."""
    text = json.dumps(for_the_agent(outcome.envelope(with_images=False)))
    items: list[Any] = [types.TextContent(type="text", text=text)]
    used = len(text) + 2 * _ITEM_CHARS + _NOTE_CHARS
    notes: list[str] = []
    for n, image in enumerate(outcome.images):
        encoded = 4 * ((len(image.data) + 2) // 3)
        why = _refusal(image, encoded, used, max_chars)
        if why is None:
            data = base64.b64encode(image.data).decode("ascii")
            items.append(types.ImageContent(type="image", data=data, mime_type=image.mime))
            used += encoded + _ITEM_CHARS
        else:
            label = f", {image.label}" if image.label else ""
            notes.append(f"image {n} ({image.view}{label}; sha256 {image.sha256}) left out: {why}")
    if len(notes) > _NOTES_SHOWN:
        notes[_NOTES_SHOWN:] = [f"and {len(notes) - _NOTES_SHOWN} more images left out for the same reasons"]
    if notes:
        items.append(types.TextContent(type="text", text="\n".join(notes)[:_NOTE_CHARS]))
    return items
