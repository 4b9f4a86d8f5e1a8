"""The `toy_count` benchmark module: how many bright squares (1 to 4) a picture shows; its task prompt is the
`prompt.txt` beside this file."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from PIL import Image

from copilot.bench.scoring.parsers import ParseError
from copilot.bench.scoring.scorers import CaseScore, Truth
from copilot.cases.pack import write_pack
from copilot.medflow.registry import BenchModule, Generate, register

ANSWER = re.compile(r"^\s*ANSWER:\s*([1-4])\s*$", re.MULTILINE)


def write_picture_case(out: Path, case_id: str, squares: int, picture: np.ndarray, module: str = "toy_count") -> Path:
    """A case pack around one picture: `images/picture.png`, the count kept hidden."""
    case = Path(out) / case_id
    (case / "images").mkdir(parents=True, exist_ok=True)
    Image.fromarray(picture).save(case / "images" / "picture.png")
    return write_pack(case, module, {"picture": "images/picture.png"}, {}, {"label": squares}, kind="toy")


def squares_picture(squares: int) -> np.ndarray:
    """A 64×64 dark picture with `squares` bright 8-pixel squares along its diagonal."""
    pixels = np.zeros((64, 64), np.uint8)
    for i in range(squares):
        pixels[4 + 15 * i : 12 + 15 * i, 4 + 15 * i : 12 + 15 * i] = 255
    return pixels


def generate(out: Path, case_id: str, seed: int, options: Generate) -> Path:
    """A case whose square count follows from its seed (1 to 4)."""
    squares = 1 + seed % 4
    return write_picture_case(out, case_id, squares, squares_picture(squares))


def parse(text: str) -> int:
    """The count on the response's ANSWER line."""
    found = ANSWER.findall(text)
    if not found:
        raise ParseError("no 'ANSWER: <1-4>' line")
    return int(found[-1])


def score(truth: Truth, text: str) -> CaseScore:
    """Task and Strict: the count is right (no evidence asked, no Loc)."""
    try:
        count = parse(text)
    except ParseError as exc:
        return CaseScore(truth.case.case_id, "toy_count", 0.0, 0.0, None, str(exc))
    right = float(count == int(truth.data["label"]))
    return CaseScore(truth.case.case_id, "toy_count", right, right, None)


MODULE = register(
    BenchModule(
        name="toy_count",
        kind="toy",
        title="Toy squares",
        has_loc=False,
        generate=generate,
        parse=parse,
        score=score,
        prior="Prior answer (no image reading).\n{evidence}ANSWER: 2",
        baseline=lambda: None,
        order=50,
        prompt=Path(__file__).with_name("prompt.txt"),
    )
)
