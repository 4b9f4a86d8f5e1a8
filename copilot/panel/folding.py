"""Text folded for matching identifiers: Unicode compatibility forms (full-width, ligatures) decomposed, case
folded, accents and other combining marks dropped, invisible format characters dropped and look-alike letters
of other scripts (Cyrillic, Greek) mapped to the Latin letter they look like — so 'Ｍüller', 'Mu\u0308ller' and
a Cyrillic 'Мuller' all read 'muller'. `fold_with_map` keeps, for each folded character, where it came from.
"""

from __future__ import annotations

import functools
import unicodedata

# Look-alikes of Latin letters (lower case; upper case is folded first) and letters NFKD leaves whole.
CONFUSABLES = {
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "ѕ": "s", "і": "i", "ї": "i", "ј": "j", "ԁ": "d", "ӏ": "l", "һ": "h", "ԛ": "q",
    "ԝ": "w", "ь": "b", "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "μ": "u", "ν": "v", "ο": "o",
    "ρ": "p", "τ": "t", "υ": "u", "χ": "x", "ζ": "z", "γ": "y", "ς": "c", "ø": "o", "æ": "ae", "œ": "oe", "đ": "d",
    "ð": "d", "ł": "l", "ı": "i", "ŀ": "l", "þ": "th", "ß": "ss", "ſ": "s",
}  # fmt: skip
# How German and Scandinavian names are written without their letters (Müller → Mueller).
TRANSLITERATIONS = {"ä": "ae", "ö": "oe", "ü": "ue", "å": "aa", "ø": "oe", "æ": "ae", "ß": "ss"}


@functools.lru_cache(maxsize=4096)
def fold_char(ch: str) -> str:
    """One character folded (possibly to nothing, or to several letters)."""
    if ch.isascii():
        return ch.lower()
    low = ch.casefold()
    if low in CONFUSABLES:
        return CONFUSABLES[low]
    out = []
    for c in unicodedata.normalize("NFKD", low):
        if unicodedata.combining(c) or unicodedata.category(c) == "Cf":
            continue
        c = c.casefold()
        out.append(CONFUSABLES.get(c, c))
    return "".join(out)


def fold(text: str) -> str:
    """A text folded for comparison (see the module docstring)."""
    if text.isascii():
        return text.lower()
    return "".join(fold_char(c) for c in text)


def fold_with_map(text: str) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index of the character of `text` it came from."""
    if text.isascii():
        return text.lower(), list(range(len(text)))
    out: list[str] = []
    where: list[int] = []
    for n, c in enumerate(text):
        f = fold_char(c)
        out.append(f)
        where.extend([n] * len(f))
    return "".join(out), where


def transliterations(value: str) -> set[str]:
    """The other ways a name is written: umlauts spelt out (ü → ue), and spelt-out umlauts read back (ue → u)."""
    low = unicodedata.normalize("NFC", value.casefold())
    spelt = "".join(TRANSLITERATIONS.get(c, c) for c in low)
    out = {spelt} if spelt != low else set()
    plain = fold(low)
    for pair, letter in (("ae", "a"), ("oe", "o"), ("ue", "u")):
        if pair in plain:
            out.add(plain.replace(pair, letter))
    return out
