"""Benchmark modules are descriptors: the five of the paper are registered once, and a new module needs only
its own declaration to be generated, scored, answered by the prior policy and reported."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.bench.parsers import ParseError, parse_answer_letter
from copilot.bench.report import render_report
from copilot.bench.scoring import CaseScore, Truth
from copilot.cases.pack import load_case, write_pack
from copilot.medflow import BenchModule, Generate, make_cases, modules, register, score_case
from copilot.medflow.policies import prior_policy
from copilot.medflow.registry import _MODULES, report_columns
from copilot.runtime import open_session


def test_the_paper_modules_in_table_order() -> None:
    assert list(modules()) == ["longitudinal_mri", "brain_mri", "lung_petct", "breast_wsi", "lymph_node_wsi"]
    assert {m.kind for m in modules().values()} == {"radiology", "pathology"}


def _toy_case(out: Path, case_id: str, seed: int, options: Generate) -> Path:
    """A 16³ volume with one bright cube; the label says whether the cube is on the left or the right."""
    side = "L" if seed % 2 else "R"
    data = np.zeros((16, 16, 16), np.float32)
    data[6:10, 6:10, (10 if side == "L" else 2) : (14 if side == "L" else 6)] = 100.0
    image = sitk.GetImageFromArray(data)
    image.SetSpacing([options.spacing or 2.0] * 3)
    case = out / case_id
    (case / "images").mkdir(parents=True)
    sitk.WriteImage(image, str(case / "images" / "cube.nii.gz"))
    return write_pack(case, "toy_side", {"volumes": ["images/cube.nii.gz"]}, {"template": "toy_side"}, {"label": side})


def _score_toy(truth: Truth, text: str) -> CaseScore:
    try:
        letter = parse_answer_letter(text, "LR")
    except ParseError as exc:
        return CaseScore(truth.case.case_id, "toy_side", 0.0, 0.0, None, str(exc))
    task = float(letter == truth.data["label"])
    return CaseScore(truth.case.case_id, "toy_side", task, task, None)


@pytest.fixture
def toy() -> BenchModule:
    module = register(
        BenchModule(
            name="toy_side",
            kind="radiology",
            title="Toy side",
            has_loc=False,
            generate=_toy_case,
            parse=lambda text: parse_answer_letter(text, "LR"),
            score=_score_toy,
            prior="Prior answer.\n{evidence}ANSWER: R",
            baseline=lambda: None,
            order=9,
        )
    )
    yield module
    _MODULES.pop("toy_side")


def test_a_sixth_module_through_its_descriptor_alone(toy: BenchModule, tmp_path: Path) -> None:
    made = make_cases("toy_side", 2, 0, tmp_path)
    assert [p.name for p in made] == ["toy_side_000_0000", "toy_side_000_0001"]
    labels = [load_case(p).module for p in made]
    assert labels == ["toy_side", "toy_side"]
    assert score_case(made[0], "ANSWER: R").task == 1.0  # seed 0: the cube is on the right
    assert score_case(made[1], "ANSWER: R").task == 0.0
    assert score_case(made[1], "ANSWER: L").strict == 1.0
    assert score_case(made[1], "no answer").parse_error

    session = open_session(made[0])  # a radiology case of the new module opens in the radiology viewer
    result = prior_policy().run(session, load_case(made[0]), budget=3)
    assert result.response.endswith("ANSWER: R")
    assert score_case(made[0], result.response).strict == 1.0

    row = {"case_id": made[0].name, "module": "toy_side", "policy": "prior", "track": "A", "status": "done"}
    rows = [{**row, "task": 1.0, "strict": 1.0, "loc": None, "parse_error": None, "trace_dir": "t"}]
    page = render_report(rows, report_columns())
    assert "Toy side" in page


def test_a_module_name_is_declared_once(toy: BenchModule) -> None:
    twin = BenchModule(**{**toy.__dict__, "title": "another"})
    with pytest.raises(ValueError, match="declared twice"):
        register(twin)


def test_unknown_modules_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown benchmark module 'nope'"):
        make_cases("nope", 1, 0, tmp_path)
