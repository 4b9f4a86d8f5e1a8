"""Reviewers' reliability by seed 000's definitions: weighted Cohen κ (linear weights) and interval Krippendorff
α over the ordinal core FAIL 0, PARTIAL 0.5, PASS 1 (NA and SKIP missing), on a three-reviewer example; the
ledger written from a run and read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from copilot.bench.measures.review import interval_alpha, read_review, reliability, review_ledger, weighted_kappa

REVIEWS = {  # item → (r1, r2, r3)
    "i1": ("PASS", "PASS", "PASS"),
    "i2": ("FAIL", "FAIL", "PARTIAL"),
    "i3": ("PASS", "PARTIAL", "PASS"),
    "i4": ("NA", "FAIL", "FAIL"),
}


def test_weighted_kappa_by_hand() -> None:
    """r1 / r2 on the items both judged on the ordinal core (i1–i3; r1's NA on i4 is missing): a = [1, 0, 1],
    b = [1, 0, 0.5]. Observed disagreement (0 + 0 + 0.5) / 3 = 1/6. Marginals a {1: 2, 0: 1}, b {1, 0, 0.5: 1
    each}: expected Σ |x − y| m_a(x) m_b(y) / 9 = (2·1 + 2·0.5 + 1·1 + 1·0.5) / 9 = 4.5 / 9 = 0.5.
    κ_w = 1 − (1/6) / 0.5 = 2/3."""
    assert weighted_kappa([1.0, 0.0, 1.0], [1.0, 0.0, 0.5]) == pytest.approx(2 / 3)
    assert weighted_kappa([1.0, 1.0], [1.0, 1.0]) is None  # no expected disagreement: undefined


def test_interval_alpha_by_hand() -> None:
    """Units [1, 1, 1], [0, 0, 0.5], [1, 0.5, 1], [0, 0] (i4 without r1's NA); n = 11 values.
    D_o: u2 ordered pairs (0, 0.5) ×4 → 4·0.25 = 1, / (3 − 1) = 0.5; u3 likewise 0.5; u1, u4 0 → D_o = 1/11.
    D_e over the 11 values (five 1, two 0.5, four 0): ordered pairs 2·(5·4·1 + 5·2·0.25 + 2·4·0.25) = 49,
    / (11·10) = 49/110. α = 1 − (1/11) / (49/110) = 1 − 10/49 = 39/49 = 0.796."""
    units = [[1.0, 1.0, 1.0], [0.0, 0.0, 0.5], [1.0, 0.5, 1.0], [0.0, 0.0]]
    assert interval_alpha(units) == pytest.approx(39 / 49)
    stats = reliability({f"r{n + 1}": {i: v[n] for i, v in REVIEWS.items()} for n in range(3)})
    assert stats["interval_alpha"] == pytest.approx(39 / 49)
    assert stats["weighted_kappa"]["r1 / r2"] == {"items": 3, "weighted_kappa": pytest.approx(2 / 3)}
    assert stats["exact_agreement"] == 0.25 and stats["covered"] == 4  # i1 alone agrees in all five statuses
    assert stats["nominal_alpha"] is not None


def test_review_file_errors_name_the_line() -> None:
    assert read_review(['{"item": "a", "status": "pass"}', "", '{"item": "b", "status": null}'], "r1") == {"a": "PASS"}
    with pytest.raises(ValueError, match=r"r1:1: status 'MAYBE' is not one of PASS, PARTIAL, FAIL, NA, SKIP"):
        read_review(['{"item": "a", "status": "MAYBE"}'], "r1")


def test_ledger_round_trip(tmp_path: Path) -> None:
    """A row with two checkpoints gives two blind items (status blank) with their evidence; three returned files
    give the reliability through `bench review`."""
    row = {"case_id": "c1", "module": "brain_mri", "model": "m", "policy": "prior", "track": "A", "budget": 20,
           "trace_dir": "episodes/x", "response": "ANSWER: A",
           "process": {"checkpoints": {"items": [{"id": "A1", "title": "valid calls", "critical": True,
                                                  "status": "PASS"},
                                                 {"id": "D1", "title": "structure", "critical": True,
                                                  "status": "PASS"}]}}}  # fmt: skip
    calls = [{"type": "handler_call", "actor": "agent", "seq": 3, "handler": "ping", "ok": True}]
    ledger = review_ledger([row], lambda r: calls)
    assert [i["item"] for i in ledger] == ["episodes/x#A1", "episodes/x#D1"]
    assert ledger[0]["status"] is None and ledger[0]["evidence"]["calls"][0]["seq"] == 3
    assert ledger[1]["evidence"]["answer"] == "ANSWER: A" and "PASS" not in json.dumps(ledger)
    files = []
    for n, statuses in enumerate((("PASS", "PASS"), ("PASS", "FAIL"), ("PARTIAL", "PASS"))):
        path = tmp_path / f"reviewer{n + 1}.jsonl"
        path.write_text("".join(json.dumps({**i, "status": s}) + "\n" for i, s in zip(ledger, statuses, strict=True)))
        files.append(str(path))
    out = subprocess.run([sys.executable, "-m", "copilot.cli", "bench", "review", str(tmp_path), "--reviews", *files,
                          "--json"], capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["reviewers"] == ["reviewer1", "reviewer2", "reviewer3"]
