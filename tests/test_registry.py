"""Handler declarations: one per handler, Table 9 names and arguments, loud failures on bad declarations."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import Field

from copilot.tools import RADIOLOGY, RegistryError
from copilot.tools.registry import HandlerOutput, Registry

# Table 9 of the MedFlow paper: tool → arguments
TABLE_9 = {
    "ping": set(),
    "open_case": {"dicom_dir", "spacing", "slice_planes", "view_layout", "size"},
    "select_volume": {"volume_id", "volume_name", "view", "size"},
    "observe": {"view", "size", "include_metadata"},
    "scroll": {"view", "direction", "num_slices", "step", "output", "size"},
    "zoom": {"view", "factor", "center_1000", "size"},
    "fit": {"view", "size"},
    "set_slice_offset": {"view", "offset", "size"},
    "get_slice_offset_range": {"view"},
    "recover_standard_views": {"volume_id", "volume_name", "size"},
    "image_coords_to_ras": {"view", "point_1000", "bbox_1000", "volume_id", "volume_name"},
    "get_viewer_state": {"include_volumes", "include_fusion", "include_slice_positions"},
    "wl": {"view", "window", "level", "auto", "volume_id", "volume_name", "size"},
    "window_preset": {"preset", "view", "volume_id", "volume_name", "size"},
    "jump": {"ras", "view", "size"},
    "set_layout": {"layout", "size"},
    "fusion": {"background_volume_ref", "foreground_volume_ref", "foreground_opacity", "mode", "view", "size"},
}
EVIDENCE = {"bookmark_view", "record_key_slice", "record_point", "measure_distance", "record_measurement",
            "measure_bidirectional", "measure_angle", "measure_ellipse"}
MEASUREMENTS = {"probe_value", "region_stats"}  # the harness's own reads of values (not in Table 9)


def test_table_9_names_and_arguments() -> None:
    for name, args in TABLE_9.items():
        spec = RADIOLOGY.get(name)
        assert set(spec.parameters_schema().get("properties", {})) == args, name
        assert spec.role == "viewer_control"
    for name in EVIDENCE:
        assert RADIOLOGY.get(name).role == "evidence_capture"
    operators = {s.name for s in RADIOLOGY.specs() if s.role == "analysis_operator"}
    assert set(RADIOLOGY.names()) == set(TABLE_9) | EVIDENCE | MEASUREMENTS | operators
    assert all(RADIOLOGY.get(n).tracks == ("B",) for n in operators)
    assert {s.name for s in RADIOLOGY.specs("A")} == set(TABLE_9) | EVIDENCE | MEASUREMENTS


def test_schemas_are_closed_and_documented() -> None:
    for spec in RADIOLOGY.specs():
        schema = spec.parameters_schema()
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        for prop in schema.get("properties", {}).values():
            assert prop.get("description"), spec.name
        assert "title" not in schema


def test_window_preset_schema_lists_the_presets() -> None:
    enum = RADIOLOGY.get("window_preset").parameters_schema()["properties"]["preset"]["enum"]
    assert {"ct_lung", "ct_mediastinal", "ct_bone", "pet_auto", "mr_auto"} <= set(enum)


def test_duplicate_name_fails() -> None:
    reg = Registry("radiology")

    @reg.handler(role="viewer_control")
    def thing(ctx) -> HandlerOutput:
        """Do a thing."""
        return HandlerOutput()

    with pytest.raises(RegistryError, match="duplicate"):

        @reg.handler(role="viewer_control", name="thing")
        def other(ctx) -> HandlerOutput:
            """Another."""
            return HandlerOutput()


def test_missing_descriptions_fail() -> None:
    reg = Registry("radiology")
    with pytest.raises(RegistryError, match="description"):

        @reg.handler(role="viewer_control")
        def undocumented(ctx) -> HandlerOutput:
            return HandlerOutput()

    with pytest.raises(RegistryError, match="no description"):

        @reg.handler(role="viewer_control")
        def bare_argument(ctx, value: int = 3) -> HandlerOutput:
            """Has an undocumented argument."""
            return HandlerOutput()


def test_role_must_fit_tracks() -> None:
    reg = Registry("radiology")
    with pytest.raises(RegistryError, match="not allowed"):

        @reg.handler(role="analysis_operator", tracks=("A",))
        def segment(ctx, x: Annotated[int, Field(description="x")] = 1) -> HandlerOutput:
            """Analysis operators are Track B only."""
            return HandlerOutput()
