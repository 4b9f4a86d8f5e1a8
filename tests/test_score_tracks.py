"""Scored Track B answers fill Table 3 (they name their operation set), the offline floors sit apart from the
backbones there, and the flat formats never lose a row's model."""

from __future__ import annotations

from typing import Any

import pytest

from copilot.bench.scoring.scorers import CaseScore
from copilot.bench.tables.paper import table3
from copilot.bench.tables.render import to_csv
from copilot.medflow.score_cli import AnswerFile, result_rows, track_ops


def test_track_b_answers_name_their_operation_set() -> None:
    assert track_ops("B", "segmentation") == "segmentation" and track_ops("C", None) == ""
    with pytest.raises(ValueError, match="Track B answers need --ops, one of"):
        track_ops("B", None)
    with pytest.raises(ValueError, match="--ops is for Track B answers; these are Track C"):
        track_ops("C", "segmentation")


def _scored(model: str, track: str, ops: str, strict: float) -> list[dict[str, Any]]:
    s = CaseScore("b1", "brain_mri", 1.0, strict, strict, details={"fields": {}})
    return result_rows([s], AnswerFile({"b1": "x"}), model, track, ops=ops)


def test_table3_from_scored_answers_with_floors_apart() -> None:
    """m1 on Track A (Strict 0.5) and Track B segmentation (Strict 1): Table 3's Strict cell 1.00 (↑ 0.50);
    `prior` on Track B is listed after the backbones under the floors' heading; each of the three metric rows
    keeps its model in the CSV ("m1 Strict", "prior Loc.")."""
    rows = _scored("m1", "A", "", 0.5) + _scored("m1", "B", "segmentation", 1.0)
    prior = _scored("prior", "B", "segmentation", 0.0)
    for r in prior:
        r["policy"] = "prior"
    t = table3(rows + prior)
    assert [r[0].text() for r in t.rows][::3] == ["m1 (scored answers)", "prior"]
    assert t.groups == [(3, "Reference policies (floors)")]
    strict = t.rows[1]
    assert strict[1].text() == "Strict" and strict[2].text() == "1.00 (↑ 0.50)"
    csv_text = to_csv([t])
    assert "table3,,m1 (scored answers) Strict,Segmentation / Brain MRI,1.000000,0.500000" in csv_text
    assert "table3,Reference policies (floors),prior Loc.," in csv_text


def test_report_written_elsewhere_keeps_its_links(tmp_path: Any) -> None:
    """A report written to another folder reaches the run's files through the relative way there: an episode
    link 'episodes/x/page.html' from OUT/sub/ to RUN becomes '../../run/episodes/x/page.html'; anchors stay."""
    from copilot.bench.report.run_report import relink

    run, out = tmp_path / "run", tmp_path / "out" / "sub"
    run.mkdir()
    out.mkdir(parents=True)
    page = '<a href="#table1">T1</a><a href="episodes/x/page.html">e</a><a href="https://x.org/">w</a>'
    assert relink(page, run, out) == ('<a href="#table1">T1</a><a href="../../run/episodes/x/page.html">e</a>'
                                      '<a href="https://x.org/">w</a>')  # fmt: skip
    assert relink(page, run, run) == page
