"""Parsers for the MedFlow answer formats (Appendix H): ANSWER lines, the RANO field block, the EVIDENCE
block, the compact `1C2D3B4A5B` string and the pathology JSON.

Tolerant of form (code fences, letter case, spacing, bold markers, a trailing period), strict about
content: a missing, duplicated or out-of-range value is a `ParseError`, which the scorer turns into
a score of 0 with the reason reported.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from copilot.bench.scoring.module_facts import facts_of
from copilot.cases.answers import (
    BRACS_LABELS,
    CAMELYON_LARGEST,
    CAMELYON_PRESENCE,
    EVIDENCE_KEYS,
    LUNG_OPTIONS,
    RANO_FIELDS,
)

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"


class ParseError(ValueError):
    """The response does not contain a well-formed answer."""


def _clean(text: str) -> str:
    """Drop code fences, bold/italic markers and carriage returns."""
    text = text.replace("\r", "")
    text = re.sub(r"```[a-zA-Z]*", "", text)
    return text.replace("**", "").replace("__", "")


NUMBER = _NUM  # a decimal number as the answer formats write it
clean_answer = _clean  # an answer without code fences, emphasis markers and carriage returns


def parse_answer_letter(text: str, allowed: str) -> str:
    """The letter of the last `ANSWER: X` line (one of `allowed`)."""
    found = re.findall(r"(?im)^\s*(?:final\s+)?answer\s*[:=]\s*\(?([A-Za-z])\)?\s*[.)]?\s*$", _clean(text))
    if not found:
        raise ParseError("no 'ANSWER: <letter>' line")
    letter = found[-1].upper()
    if letter not in allowed:
        raise ParseError(f"answer {letter!r} is not one of {'/'.join(allowed)}")
    return letter


def _field_values(text: str, keys: tuple[str, ...] | list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key in keys:
        hits = re.findall(rf"(?im)^\s*[-*]?\s*{key}\s*[:=]\s*(.+?)\s*$", text)
        if not hits:
            raise ParseError(f"missing {key}")
        if len({h.strip().upper() for h in hits}) > 1:
            raise ParseError(f"{key} is given more than once with different values")
        out[key] = hits[-1].strip()
    return out


@dataclass(frozen=True)
class RanoAnswer:
    label: str
    fields: dict[str, str]


def parse_rano(text: str) -> RanoAnswer:
    """The six YES/NO CURRENT-study fields and the A–D RANO answer."""
    clean = _clean(text)
    raw = _field_values(clean, RANO_FIELDS)
    fields = {}
    for key, value in raw.items():
        v = value.strip().strip(".").upper()
        if v not in ("YES", "NO"):
            raise ParseError(f"{key} must be YES or NO, got {value!r}")
        fields[key] = v
    return RanoAnswer(parse_answer_letter(clean, "ABCD"), fields)


@dataclass(frozen=True)
class PartialRano:
    label: str
    fields: dict[str, str]  # the fields given well-formed (missing or malformed ones left out)
    problems: list[str]


def parse_rano_partial(text: str) -> PartialRano:
    """The A–D RANO answer (required) and whichever of the six fields are given well-formed (problems named)."""
    clean = _clean(text)
    label = parse_answer_letter(clean, "ABCD")
    fields: dict[str, str] = {}
    problems: list[str] = []
    for key in RANO_FIELDS:
        try:
            value = _field_values(clean, [key])[key].strip().strip(".").upper()
        except ParseError as exc:
            problems.append(str(exc))
            continue
        if value not in ("YES", "NO"):
            problems.append(f"{key} must be YES or NO, got {value!r}")
            continue
        fields[key] = value
    return PartialRano(label, fields, problems)


@dataclass(frozen=True)
class Evidence:
    key_slices: dict[str, float]  # axis letter (S, R, A) → mm
    ras: tuple[float, float, float]


def _finite(value: str, key: str) -> float:
    m = re.fullmatch(rf"\s*({_NUM})\s*(?:mm)?\s*", value, flags=re.I)
    if not m:
        raise ParseError(f"{key} is not a number: {value!r}")
    v = float(m.group(1))
    if not math.isfinite(v):
        raise ParseError(f"{key} is not finite")
    return v


def parse_evidence(text: str) -> Evidence:
    """The EVIDENCE block: three key-slice offsets (mm) and one RAS point."""
    clean = _clean(text)
    if len(re.findall(r"(?im)^\s*EVIDENCE\s*:", clean)) > 1:
        raise ParseError("more than one EVIDENCE block")
    raw = _field_values(clean, list(EVIDENCE_KEYS))
    slices = {EVIDENCE_KEYS[k]: _finite(v, k) for k, v in raw.items()}
    ras_hits = re.findall(
        rf"(?im)^\s*[-*]?\s*RAS\s*[:=]\s*\[?\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]?\s*$", clean
    )
    if not ras_hits:
        raise ParseError("missing RAS: [R, A, S]")
    r, a, s = (float(v) for v in ras_hits[-1])
    if not all(math.isfinite(v) for v in (r, a, s)):
        raise ParseError("RAS is not finite")
    return Evidence(slices, (r, a, s))


@dataclass(frozen=True)
class EvidenceFields:
    """The EVIDENCE block read field by field: each key slice and the RAS point parsed on its own, so a missing
    RAS line leaves the key slices (Strict) scorable and a missing key slice leaves the RAS point (Loc)."""

    key_slices: dict[str, float]  # the axes whose line parsed (S, R, A) → mm
    ras: tuple[float, float, float] | None
    problems: dict[str, str]  # field name (KEY_SLICE_…_MM, RAS) → why it did not parse

    def report(self) -> dict[str, dict[str, Any]]:
        """Per field: parsed or not, with the value or the problem (the `evidence_fields` of a score)."""
        out: dict[str, dict[str, Any]] = {}
        for key, axis in EVIDENCE_KEYS.items():
            out[key] = ({"parsed": True, "value": self.key_slices[axis]} if axis in self.key_slices
                        else {"parsed": False, "problem": self.problems.get(key, f"missing {key}")})  # fmt: skip
        missing = self.problems.get("RAS", "missing RAS: [R, A, S]")
        out["RAS"] = ({"parsed": True, "value": list(self.ras)} if self.ras is not None
                      else {"parsed": False, "problem": missing})  # fmt: skip
        return out


def _ras_value(clean: str) -> tuple[float, float, float]:
    hits = re.findall(rf"(?im)^\s*[-*]?\s*RAS\s*[:=]\s*\[?\s*({_NUM})\s*,\s*({_NUM})\s*,\s*({_NUM})\s*\]?\s*$", clean)
    if not hits:
        raise ParseError("missing RAS: [R, A, S]")
    if len({tuple(float(v) for v in h) for h in hits}) > 1:
        raise ParseError("RAS is given more than once with different values")
    r, a, s = (float(v) for v in hits[-1])
    if not all(math.isfinite(v) for v in (r, a, s)):
        raise ParseError("RAS is not finite")
    return r, a, s


def parse_evidence_fields(text: str) -> EvidenceFields:
    """Each EVIDENCE field on its own (Appendix C.1 scores key slices for Strict and the RAS point for Loc apart);
    more than one EVIDENCE block leaves every field unparsed, as the block is to be written once."""
    clean = _clean(text)
    names = [*EVIDENCE_KEYS, "RAS"]
    if len(re.findall(r"(?im)^\s*EVIDENCE\s*:", clean)) > 1:
        return EvidenceFields({}, None, {k: "more than one EVIDENCE block" for k in names})
    slices: dict[str, float] = {}
    problems: dict[str, str] = {}
    for key, axis in EVIDENCE_KEYS.items():
        try:
            slices[axis] = _finite(_field_values(clean, [key])[key], key)
        except ParseError as exc:
            problems[key] = str(exc)
    ras: tuple[float, float, float] | None = None
    try:
        ras = _ras_value(clean)
    except ParseError as exc:
        problems["RAS"] = str(exc)
    return EvidenceFields(slices, ras, problems)


@dataclass(frozen=True)
class CompactAnswer:
    """The five lung subtasks read one by one: each question's letter, or the problem that left it unanswered."""

    answers: dict[str, str]  # question → letter, for the questions whose letter is an option
    problems: dict[str, str]  # question → why it has no valid letter


def parse_compact_partial(text: str) -> CompactAnswer:
    """The last `1X2X3X4X5X` string with any letters; a letter that is not one of its question's options fails
    that question alone (the other four keep their credit, Task = #correct / 5)."""
    clean = _clean(text).upper()
    hits = re.findall(r"1\s*([A-Z])\s*2\s*([A-Z])\s*3\s*([A-Z])\s*4\s*([A-Z])\s*5\s*([A-Z])", clean)
    if not hits:
        raise ParseError("no compact answer string like 1C2D3B4A5B")
    answers: dict[str, str] = {}
    problems: dict[str, str] = {}
    for q, letter in zip("12345", hits[-1], strict=True):
        if letter in LUNG_OPTIONS[q]:
            answers[q] = letter
        else:
            problems[q] = f"question {q}: {letter} is not an option"
    return CompactAnswer(answers, problems)


def parse_compact(text: str) -> dict[str, str]:
    """The last `1X2X3X4X5X` string (case and spacing tolerated), letters checked per question."""
    clean = _clean(text).upper()
    hits = re.findall(r"1\s*([A-G])\s*2\s*([A-F])\s*3\s*([A-E])\s*4\s*([A-E])\s*5\s*([A-F])", clean)
    if not hits:
        raise ParseError("no compact answer string like 1C2D3B4A5B")
    answers = dict(zip("12345", hits[-1], strict=True))
    for q, letter in answers.items():
        if letter not in LUNG_OPTIONS[q]:
            raise ParseError(f"question {q}: {letter} is not an option")
    return answers


def _json_object(text: str) -> dict[str, Any]:
    clean = _clean(text).strip()
    start, end = clean.find("{"), clean.rfind("}")
    if start < 0 or end <= start:
        raise ParseError("no JSON object")
    try:
        obj = json.loads(clean[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ParseError(f"invalid JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise ParseError("the JSON answer is not an object")
    return obj


def _localizations(obj: dict[str, Any]) -> list[tuple[float, float]]:
    locs = obj.get("localizations", [])
    if not isinstance(locs, list):
        raise ParseError("localizations must be a list")
    out = []
    for loc in locs:
        try:
            x, y = float(loc["x"]), float(loc["y"])
        except (KeyError, TypeError, ValueError):
            raise ParseError(f"bad localization {loc!r}") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ParseError("localizations must be finite")
        out.append((x, y))
    return out


def parse_localizations(text: str) -> list[tuple[float, float]]:
    """The level-0 (x, y) localizations of a pathology JSON answer, whatever its task."""
    return _localizations(_json_object(text))


@dataclass(frozen=True)
class BracsAnswer:
    label: str
    localizations: list[tuple[float, float]]


def parse_bracs(text: str) -> BracsAnswer:
    obj = _json_object(text)
    label = str(obj.get("wsi_label", "")).strip().upper()
    if label not in BRACS_LABELS:
        raise ParseError(f"wsi_label must be one of {BRACS_LABELS}")
    option = str(obj.get("selected_option", "")).strip().upper()
    if option and option != "ABCDEFG"[BRACS_LABELS.index(label)]:
        raise ParseError(f"selected_option {option} contradicts wsi_label {label}")
    return BracsAnswer(label, _localizations(obj))


@dataclass(frozen=True)
class CamelyonAnswer:
    presence: str
    largest: str
    localizations: list[tuple[float, float]]


def parse_camelyon(text: str) -> CamelyonAnswer:
    obj = _json_object(text)
    presence = str(obj.get("tumor_presence", "")).strip().lower()
    largest = str(obj.get("largest_metastasis", "")).strip().lower()
    if presence not in CAMELYON_PRESENCE:
        raise ParseError(f"tumor_presence must be one of {CAMELYON_PRESENCE}")
    if largest not in CAMELYON_LARGEST:
        raise ParseError(f"largest_metastasis must be one of {CAMELYON_LARGEST}")
    for key, values, value in (("tumor_presence_option", CAMELYON_PRESENCE, presence),
                               ("largest_metastasis_option", CAMELYON_LARGEST, largest)):  # fmt: skip
        opt = str(obj.get(key, "")).strip().upper()
        if opt and opt != "ABCD"[values.index(value)]:
            raise ParseError(f"{key} {opt} contradicts {value}")
    return CamelyonAnswer(presence, largest, _localizations(obj))


def cited_evidence(response: str, module: str) -> dict[str, Any]:
    """The evidence an answer cites: the key slices and RAS point of its EVIDENCE block that parse, each field
    on its own (`ras` None without one; {} when no field parses), or WSI points (pathology)."""
    facts = facts_of(module)
    try:
        if facts is not None and facts.cited is not None:
            return facts.cited(response)
    except ParseError:
        return {}
    ev = parse_evidence_fields(response)
    if not ev.key_slices and ev.ras is None:
        return {}
    return {"key_slices": ev.key_slices, "ras": list(ev.ras) if ev.ras is not None else None}
