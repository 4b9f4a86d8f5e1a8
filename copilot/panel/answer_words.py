"""A benchmark answer in words (Qt-free): the option codes of a final answer decoded through the module's
answer vocabularies (`copilot.cases.answers`), so the clinician reads "Glioblastoma", not "ANSWER: A". Each
module declares its own reading (`BenchModule.answer_words`).

An answer that does not parse gives the reason instead: the panel never guesses what a malformed answer meant.
"""

from __future__ import annotations

from copilot.bench.scoring import parsers as P


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
    from copilot.medflow.registry import find  # the module declarations load with the first answer, not at start-up

    m = find(module)
    return m.answer_words(text) if m is not None and m.answer_words is not None else []
