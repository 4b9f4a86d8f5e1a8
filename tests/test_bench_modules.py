"""Benchmark modules are descriptors: the five of the paper are registered once, and a new module needs only
its own declaration to be generated, scored, answered by the prior policy, reported in the tables, measured for
coverage and opened in its layout on the desktop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import SimpleITK as sitk

from copilot.bench.measures.coverage import episode_coverage
from copilot.bench.report.run_report import render_report
from copilot.bench.scoring.module_facts import facts_of
from copilot.bench.scoring.parsers import ParseError, cited_evidence, parse_answer_letter
from copilot.bench.scoring.scorers import CaseScore, Truth
from copilot.bench.tables.paper import paper_tables, table1, table3, table4
from copilot.cases.pack import load_case, write_pack
from copilot.medflow import BenchModule, Generate, make_cases, modules, register, score_case
from copilot.medflow.policies import prior_policy
from copilot.medflow.registry import report_columns, unregister
from copilot.panel.answer_words import answer_in_words
from copilot.panel.layout import default_layout
from copilot.replay import read_events
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
            results_table=1,  # a column group of Table 1, beside the paper's radiology modules
            operations=("segmentation", "all"),
            answer_words=lambda text: [f"Cube on the {'left' if parse_answer_letter(text, 'LR') == 'L' else 'right'}"],
            layout="four_up",
            preset="ct_bone",
        )
    )
    yield module
    unregister("toy_side")
    assert facts_of("toy_side") is None


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


def test_a_sixth_module_in_the_tables_coverage_and_layout(toy: BenchModule, tmp_path: Path) -> None:
    """The toy module's declaration alone puts it in Tables 1, 3 and 4, its coverage, its answer in words and
    its desktop layout; the five paper modules keep their places."""
    case = load_case(make_cases("toy_side", 1, 0, tmp_path / "cases")[0])
    base = {"case_id": case.case_id, "module": "toy_side", "policy": "m", "model": "m", "status": "done",
            "loc": None, "parse_error": None, "trace_dir": "t", "budget": 20, "details": {"fields": {
                "label": {"truth": "R", "given": "R"}}}}  # fmt: skip
    rows = [{**base, "track": "A", "task": 1.0, "strict": 1.0}, {**base, "track": "B", "ops": "segmentation",
                                                                  "task": 0.0, "strict": 0.0}]  # fmt: skip
    t1 = table1(rows)
    assert [h for h, _ in t1.header[0]] == ["Model", "Longitudinal MRI", "Brain MRI", "Lung PET/CT", "Toy side",
                                            "Model Avg."]  # fmt: skip
    assert dict(t1.header[0])["Toy side"] == 2  # no Loc. column: the module has no Loc score
    t3 = table3(rows)
    assert "Toy side" in [h for h, _ in t3.header[1]]
    t4 = table4(rows)
    assert [c.value for c in t4.rows[0][:4]] == ["Toy side", "Slicer", "1", "—"]
    assert any("Toy side" in str(h) for t in paper_tables(rows) for row in t.header for h, _ in row)

    session = open_session(case, trace_dir=tmp_path / "t")
    session.call("observe", {"view": "all", "size": 64}, actor="system")
    session.close({"status": "done", "response": "ANSWER: R", "error": None})
    coverage = episode_coverage(read_events(tmp_path / "t")[0], case)
    assert coverage["kind"] == "radiology" and coverage["planes"] >= 3  # its viewer kind's coverage measure
    assert cited_evidence("ANSWER: R", "toy_side") == {}  # no EVIDENCE block cited

    assert default_layout("radiology", "toy_side", ["cube"]) == "four_up"
    assert default_layout("radiology", "brain_mri", ["t1"]) == "three_up"
    assert default_layout("pathology", "breast_wsi", []) == "slide"
    assert answer_in_words("ANSWER: L", "toy_side") == ["Cube on the left"]


def test_a_module_name_is_declared_once(toy: BenchModule) -> None:
    twin = BenchModule(**{**toy.__dict__, "title": "another"})
    with pytest.raises(ValueError, match="declared twice"):
        register(twin)


def test_unknown_modules_are_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown benchmark module 'nope'"):
        make_cases("nope", 1, 0, tmp_path)
