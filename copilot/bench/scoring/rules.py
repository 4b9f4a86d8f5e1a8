"""Scoring rules where the paper can be read more than one way, as explicit options (the paper's reading by
default). Each rule is named, documented and recorded with the scores it produced (`details["rules"]`).

- `breast_normal_localizations`: BRACS N slides. Table 4: "localizations must be empty or are not required,
  depending on the protocol". `empty` (default, the structured-answer protocol: an N answer with a point
  fails Strict) or `not_required` (points on an N slide are ignored).
- `brain_no_tumour_loc`: UCSF-PDGM cases without a tumour mask. Loc is "RAS point lies inside the hidden
  tumor mask"; with no mask there is nothing to hit. `excluded` (default: outside Loc's denominator) or
  `zero` (counted as a miss).
- `key_slice_range`: "KEY_SLICE_* fall within the hidden tumor-mask RAS axis ranges". `voxel_centres`
  (default: the range of the mask voxel centres) or `voxel_extent` (widened by half a voxel on each side).
- `untraced_source_series`: the NSCLC source-series provenance check on an answer without a trace
  (Track C). `pass` (default: the paper scores runtime-agnostic answers by the same parsers; the tables mark
  such cells) or `fail`.
- `lung_task_denominator`: NSCLC Task. Table 4: "#correct/5". `five` (default: a question whose truth was not
  collected counts as not correct) or `scorable` (#correct / #questions with a collected truth).
- `budget_unit`: what the budget counts. Appendix H: "at most 20 tool-calling rounds"; Table 7 varies "the
  maximum number of explicit operation calls". `auto` (default: `rounds` at the paper's budget of 20, `calls`
  at any other budget, as the paper words each), `rounds` (a model turn with all its tool calls is one; a
  policy without model turns spends one round per call) or `calls` (every agent handler call is one).
- `checkpoint_na`: ACP-Bench's (seed 000) checkpoint status NA. `zero` (default: the seed's "NA = 0.0 and
  included in the denominator", SKIP alone excluded) or `skip` (NA left out of the denominator as SKIP is).

The rules that depart from the paper's reading are part of a run's result key (`rules_key`), so a run with
other rules never reuses, or is pooled with, the episodes of another.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

CHOICES: dict[str, tuple[str, ...]] = {
    "breast_normal_localizations": ("empty", "not_required"),
    "brain_no_tumour_loc": ("excluded", "zero"),
    "key_slice_range": ("voxel_centres", "voxel_extent"),
    "untraced_source_series": ("pass", "fail"),
    "lung_task_denominator": ("five", "scorable"),
    "budget_unit": ("auto", "rounds", "calls"),
    "checkpoint_na": ("zero", "skip"),
}
PAPER_BUDGET = 20  # Appendix H: 20 tool-calling rounds


@dataclass(frozen=True)
class ScoringRules:
    """One choice per ambiguous rule (the first choice of each is the paper's reading)."""

    breast_normal_localizations: str = "empty"
    brain_no_tumour_loc: str = "excluded"
    key_slice_range: str = "voxel_centres"
    untraced_source_series: str = "pass"
    lung_task_denominator: str = "five"
    budget_unit: str = "auto"
    checkpoint_na: str = "zero"

    def __post_init__(self) -> None:
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"rule {name} must be one of {', '.join(allowed)}")

    def changed(self) -> dict[str, Any]:
        """The rules that differ from the paper's reading."""
        return {k: v for k, v in dataclasses.asdict(self).items() if v != CHOICES[k][0]}

    def unit_for(self, budget: int) -> str:
        """The budget unit of a run at `budget`: the rule's choice, or under `auto` rounds at the paper's budget
        and calls at any other (the Table 7 study)."""
        if self.budget_unit != "auto":
            return self.budget_unit
        return "rounds" if budget == PAPER_BUDGET else "calls"


def rules_key(rules: ScoringRules | None, budget: int = PAPER_BUDGET) -> str:
    """The rules of a run as part of its result key: `name=value` of each departure from the paper's reading,
    sorted, comma-separated ("" for the paper's reading); a budget unit equal to its `auto` choice is none."""
    changed = dict((rules or DEFAULT_RULES).changed())
    if "budget_unit" in changed and changed["budget_unit"] == ScoringRules().unit_for(budget):
        del changed["budget_unit"]
    return ",".join(f"{k}={v}" for k, v in sorted(changed.items()))


DEFAULT_RULES = ScoringRules()


def unit_of(key: str, budget: int) -> str:
    """The budget unit a result ran under, from its rules key and budget ("rounds" or "calls")."""
    values = dict(item.partition("=")[::2] for item in key.split(",") if item)
    return ScoringRules(budget_unit=values.get("budget_unit", "auto")).unit_for(budget)


def without_unit(key: str) -> str:
    """A rules key less its budget unit (what two budget-study rows of one configuration share)."""
    return ",".join(item for item in key.split(",") if item and not item.startswith("budget_unit="))


def parse_rules(items: list[str] | None) -> ScoringRules:
    """`NAME=VALUE` items (command line `--rule`) → rules; an unknown name or value is a ValueError."""
    values: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in CHOICES:
            raise ValueError(f"unknown scoring rule {item!r}; rules: {', '.join(CHOICES)}")
        values[name.strip()] = value.strip()
    return ScoringRules(**values)
