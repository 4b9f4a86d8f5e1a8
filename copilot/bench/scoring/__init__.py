"""Scoring: answer parsers, the per-module scoring rules of Table 4 against the hidden truth, the scoring options
where the paper is ambiguous, the module facts the scoring side reads, and the bootstrap statistics of the cells."""
