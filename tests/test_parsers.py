"""Answer parsers: tolerant of form, strict about content."""

from __future__ import annotations

import pytest

from copilot.bench.scoring import parsers as P


def test_answer_letter_forms() -> None:
    assert P.parse_answer_letter("blah\n**ANSWER: b**", "ABCDEF") == "B"
    assert P.parse_answer_letter("Answer = (C).", "ABCDEF") == "C"
    assert P.parse_answer_letter("ANSWER: A\nmore\nANSWER: D", "ABCDEF") == "D"  # the last one counts
    for bad in ("ANSWER: G", "the answer is A", ""):
        with pytest.raises(P.ParseError):
            P.parse_answer_letter(bad, "ABCDEF")


def test_evidence_block_forms() -> None:
    text = (
        "```\nEVIDENCE:\nkey_slice_axial_mm: 12.5 mm\n KEY_SLICE_SAGITTAL_MM : -3\n"
        "KEY_SLICE_CORONAL_MM: .5\nRAS: [1, -2.5, 3e1]\n```"
    )
    ev = P.parse_evidence(text)
    assert ev.key_slices == {"S": 12.5, "R": -3.0, "A": 0.5} and ev.ras == (1.0, -2.5, 30.0)
    with pytest.raises(P.ParseError, match="missing KEY_SLICE_CORONAL_MM"):
        P.parse_evidence("KEY_SLICE_AXIAL_MM: 1\nKEY_SLICE_SAGITTAL_MM: 2\nRAS: [1,2,3]")
    with pytest.raises(P.ParseError, match="not a number"):
        P.parse_evidence(text.replace("12.5 mm", "twelve"))
    with pytest.raises(P.ParseError, match="more than once"):
        P.parse_evidence(text + "\nKEY_SLICE_AXIAL_MM: 99")
    with pytest.raises(P.ParseError, match="RAS"):
        P.parse_evidence(text.replace("RAS: [1, -2.5, 3e1]", "RAS: [1, 2]"))


def test_compact_string() -> None:
    assert P.parse_compact("so: 1c 2D3b 4A5B") == {"1": "C", "2": "D", "3": "B", "4": "A", "5": "B"}
    with pytest.raises(P.ParseError):
        P.parse_compact("1H2D3B4A5B")
    with pytest.raises(P.ParseError):
        P.parse_compact("1C2D3B4A")


def test_rano_block() -> None:
    fields = "\n".join(f"{k}: {'yes' if n % 2 else 'No'}" for n, k in enumerate(P.RANO_FIELDS))
    ans = P.parse_rano(f"{fields}\nANSWER: c")
    assert ans.label == "C" and ans.fields["T2_PROGRESSION"] == "YES" and ans.fields["NON_MEASURABLE_LESION"] == "NO"
    with pytest.raises(P.ParseError, match="YES or NO"):
        P.parse_rano(fields.replace("yes", "UNKNOWN", 1) + "\nANSWER: C")


def test_pathology_json() -> None:
    ans = P.parse_bracs(
        '```json\n{"selected_option": "f", "wsi_label": "dcis", "localizations": [{"x": 1, "y": "2"}]}\n```'
    )
    assert ans.label == "DCIS" and ans.localizations == [(1.0, 2.0)]
    with pytest.raises(P.ParseError, match="contradicts"):
        P.parse_bracs('{"selected_option": "A", "wsi_label": "IC", "localizations": []}')
    with pytest.raises(P.ParseError, match="wsi_label"):
        P.parse_bracs('{"wsi_label": "cancer"}')
    with pytest.raises(P.ParseError, match="JSON"):
        P.parse_bracs("{not json}")
    cam = P.parse_camelyon('{"tumor_presence": "Tumor_Present", "largest_metastasis": "MACRO", "localizations": []}')
    assert (cam.presence, cam.largest) == ("tumor_present", "macro")
    with pytest.raises(P.ParseError, match="localization"):
        P.parse_camelyon(
            '{"tumor_presence": "no_tumor", "largest_metastasis": "negative", "localizations": [{"x": 1}]}'
        )
