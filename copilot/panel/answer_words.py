"""A benchmark answer in words (Qt-free): the option codes of a final answer decoded through the module's
answer vocabularies (`copilot.cases.answers`), so the clinician reads "Glioblastoma", not "ANSWER: A".

An answer that does not parse gives the reason instead: the panel never guesses what a malformed answer meant.
"""

from __future__ import annotations

from copilot.bench import parsers as P
from copilot.cases.answers import (
    BRACS_NAMES,
    BRAIN_OPTIONS,
    CAMELYON_NAMES,
    LUNG_OPTION_NAMES,
    LUNG_QUESTIONS,
    RANO_NAMES,
    RANO_OPTIONS,
)


def answer_in_words(text: str, module: str) -> list[str]:
    """Lines saying what an answer of a benchmark module means; [] for a study outside the benchmark or no text."""
    if not text or not module:
        return []
    try:
        return _decode(text, module)
    except P.ParseError as exc:
        return [f"answer not readable: {exc}"]


def last_answer(messages: list[tuple[str, str]]) -> str:
    """The model's last message of a conversation ((who, text) pairs), '' before it answers."""
    return next((text for who, text in reversed(messages) if who == "agent"), "")


def _decode(text: str, module: str) -> list[str]:
    if module == "brain_mri":
        letter = P.parse_answer_letter(text, "".join(BRAIN_OPTIONS))
        return [f"Diagnosis: {BRAIN_OPTIONS[letter]} ({letter})"]
    if module == "longitudinal_mri":
        rano = P.parse_rano(text)
        code = RANO_OPTIONS[rano.label]
        lines = [f"RANO response: {RANO_NAMES[code]} ({code}, option {rano.label})"]
        yes = [k.replace("_", " ").lower() for k, v in rano.fields.items() if v == "YES"]
        lines.append("Present: " + (", ".join(yes) if yes else "none of the six findings"))
        return lines
    if module == "lung_petct":
        answers = P.parse_compact(text)
        return [f"{LUNG_QUESTIONS[q]}: {LUNG_OPTION_NAMES[q][letter]} ({q}{letter})" for q, letter in answers.items()]
    if module == "breast_wsi":
        bracs = P.parse_bracs(text)
        return [f"Slide label: {BRACS_NAMES[bracs.label]} ({bracs.label})", _points(len(bracs.localizations))]
    if module == "lymph_node_wsi":
        cam = P.parse_camelyon(text)
        return [f"Tumour: {CAMELYON_NAMES[cam.presence]}", f"Largest metastasis: {CAMELYON_NAMES[cam.largest]}",
                _points(len(cam.localizations))]  # fmt: skip
    return []


def _points(n: int) -> str:
    return f"{n} location{'s' if n != 1 else ''} marked on the slide"
