"""Tables 1, 3, 5, 6 and Pass@k grouped and labelled as the paper groups them (hand-made rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import copilot.medflow  # noqa: F401  (registers the benchmark modules the tables look up)
from copilot.bench.tables.model_table import ModelInfo, model_info
from copilot.bench.tables.paper import table1, table3
from copilot.bench.tables.paper_studies import passk_table, table5, table6


def row(model: str, module: str, v: float, policy: str = "", **key: Any) -> dict[str, Any]:
    base = {"track": "A", "ops": "", "protocol": "harness", "budget": 20, "backend": "embedded", "seed": 0,
            "repeat": 0, "case_id": f"{module}_1"}  # fmt: skip
    return {**base, **key, "module": module, "model": model, "policy": policy or f"openai:{model}",
            "status": "done", "task": v, "strict": v, "loc": v, "details": {}}  # fmt: skip


def test_model_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's models by pattern; an unknown model by its provider; a run's own table read first."""
    assert model_info("GPT-5.5") == ModelInfo("closed", "general")
    assert model_info("medgemma-27b-it") == ModelInfo("open", "medical")
    assert model_info("Qwen3.5-35B-A3B") == ModelInfo("open", "general")
    assert model_info("RadFM") == ModelInfo("open", "native3d")
    assert model_info("house-model", "anthropic:house-model") == ModelInfo("closed", "general")
    assert model_info("house-model", "local:house-model") == ModelInfo("open", "general")
    table = tmp_path / "models.tsv"
    table.write_text("# ours\nhouse-model\topen\tmedical\n")
    monkeypatch.setenv("MEDCOPILOT_MODEL_TABLE", str(table))
    assert model_info("house-model", "anthropic:house-model") == ModelInfo("open", "medical")
    table.write_text("house-model\tshared\tmedical\n")
    with pytest.raises(ValueError, match=r"models\.tsv:1"):
        model_info("x")


def test_table5_by_access_type_and_table6_with_native_3d() -> None:
    """Table 5 groups gpt-x (closed) apart from qwen-y and medgemma-z (open); Table 6 puts gpt-x's Track C row
    with the general-purpose 2D montage backbones, medgemma-z's with the medical-domain ones and m3d's under
    native 3D VLMs."""
    rows = [row(m, "brain_mri", 1.0) for m in ("gpt-x", "qwen-y", "medgemma-z")]
    rows += [row(m, "brain_mri", 0.5, track="C") for m in ("gpt-x", "medgemma-z", "m3d")]
    assert [g for _, g in table5(rows).groups] == ["Closed-source models", "Open-weight / open-source models"]
    t6 = table6(rows)
    assert [g for _, g in t6.groups] == ["2D slice-montage: general-purpose backbones",
                                         "2D slice-montage: medical-domain backbones", "Native 3D VLM (Alt. only)"]
    assert [r[0].text() for r in t6.rows] == ["gpt-x vs A b20", "medgemma-z vs A b20", "m3d (Alt. only)"]


def test_table3_columns_as_the_paper() -> None:
    """Segmentation on Longitudinal, Brain and Lung; Registration on Longitudinal only (a lung registration run
    has no column); VISTA3D on Lung; a pathology run with every operation is in no column."""
    rows = [row("m", mod, 1.0, track="B", ops="segmentation") for mod in ("longitudinal_mri", "brain_mri",
                                                                          "lung_petct")]  # fmt: skip
    rows += [row("m", mod, 1.0, track="B", ops="registration") for mod in ("longitudinal_mri", "lung_petct")]
    rows += [row("m", "lung_petct", 1.0, track="B", ops="vista3d"), row("m", "breast_wsi", 1.0, track="B",
                                                                        ops="all")]  # fmt: skip
    t3 = table3(rows)
    assert t3.header[0][2:] == [("Segmentation", 3), ("Registration", 1), ("3D VISTA (MONAI)", 1)]
    assert [h for h, _ in t3.header[1][2:]] == ["Longitudinal MRI", "Brain MRI", "Lung PET/CT", "Longitudinal MRI",
                                                "Lung PET/CT"]  # fmt: skip


def test_scored_track_a_answers_are_track_a_model_rows() -> None:
    """`bench score --track A` rows (policy `answers`) are their model's Track A rows, marked, in the model's
    group; two answer files of two models are two rows, not one pooled "answers" row."""
    rows = [row("m1", mod, 1.0, policy="answers") for mod in ("longitudinal_mri", "brain_mri", "lung_petct")]
    rows += [row("m2", mod, 0.0, policy="answers") for mod in ("longitudinal_mri", "brain_mri", "lung_petct")]
    t1 = table1(rows)
    assert [g for _, g in t1.groups] == ["General-purpose models"]
    assert [r[0].text() for r in t1.rows] == ["m1 (scored answers)", "m2 (scored answers)", "Mean over reported"]


def test_passk_rows_name_their_track() -> None:
    """The same model with three repeats on Track A and on Track B (segmentation): two rows, two labels."""
    rows = [row("m", "brain_mri", 1.0, repeat=n) for n in range(3)]
    rows += [row("m", "brain_mri", 0.0, repeat=n, track="B", ops="segmentation") for n in range(3)]
    labels = [r[0].text() for r in passk_table(rows).rows]
    assert labels == ["m (Track A)", "m (Track B, segmentation)"]
