"""The neutral table form (`Table` of `Cell`s) and its HTML, Markdown and CSV renderings, which carry the same
information: value, change, n, 95 % CI (and the change's), errors, bold and marks; plus the glossary and, for an
empty table, the command that fills it."""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass, field
from typing import Any

from copilot.bench.scoring.stats import BOOTSTRAP, BOOTSTRAP_SEED

EPS = 0.005  # a change below half the last printed digit is "no change"
GLOSSARY = {
    "Task": "final task accuracy (Table 4): the answer alone; Lung PET/CT: #correct / 5 of its five questions "
    "(rule lung_task_denominator=scorable: / #scorable)",
    "Strict": "answer plus evidence: credited only when the answer is correct and the required evidence passes "
    "the module's deterministic checks (Appendix C.1)",
    "Loc.": "localization: the RAS point (radiology) or a WSI coordinate (pathology) hits the hidden lesion; "
    "scored apart from the answer line",
    "n": "cases behind a cell (the bootstrap's unit); with repeats, the scored runs follow apart (runs r); "
    "errored episodes are shown as error k/n",
    "95% CI": f"percentile bootstrap over cases, {BOOTSTRAP} resamples, seed {BOOTSTRAP_SEED}",
    "Δ (↑ ↓ ↔)": "change against the matched run; ↔: below 0.005; its interval is a paired bootstrap over the "
    "cases both runs hold (resampled jointly)",
    "Model Avg. / Mean over reported": "means of cells, with the episodes behind them (n) and an interval from "
    "the cells' resampled means",
    "NML": "non-measurable lesion (LUMIERE evidence field)",
    "T2 Prog.": "T2/FLAIR progression", "Cur. TL": "current target lesion", "New TL": "new target lesion",
    "Cur. NTL": "current non-target lesion", "New NTL": "new non-target lesion",
    "Tumor Loc., T Stage, Path. N, Hist., Grade": "the five NSCLC questions (location, pathological T and N "
    "stage, histology, histopathological grade)",
    "Max ops.": "the operation budget of Table 7: the most agent handler calls an episode may make (Table 7 "
    "holds call-budget runs only; the main budget of 20 tool-calling rounds is Table 1's)",
    "Track A / B / C": "viewer-native / advanced operations / runtime-agnostic (answers without the runtime)",
    "Protocol": "harness: the product's tool surface with workflow guards; paper: exactly the paper's tools "
    "(Tables 9, 10, Appendix B), no guards",
    "Pass@k / pass^k": "per case with n runs and c successes, 1 − C(n−c, k)/C(n, k) (unbiased estimator) and "
    "C(c, k)/C(n, k) (all k succeed, τ-bench), averaged over cases; refused with fewer than k runs",
    "†": "the lung source-series check could not be made (no trace) and was passed by rule "
    "untraced_source_series=pass",
    "Floor": "reference policies (prior: fixed answer without reading; baseline: offline heuristic); not in means",
}  # fmt: skip
FILL = {  # the command that fills an empty table
    "table1": "medcopilot bench run --cases RADIOLOGY_CASES --policy openai:MODEL --out RUN",
    "table2": "medcopilot bench run --cases SLIDE_CASES --policy openai:MODEL --out RUN",
    "table3": "medcopilot bench run --cases CASES --policy openai:MODEL --track B --ops segmentation --out RUN",
    "table4": "medcopilot bench run --cases CASES --policy POLICY --out RUN",
    "table5": "medcopilot bench run --cases RADIOLOGY_CASES --policy openai:MODEL --out RUN",
    "table6": "medcopilot bench trackc --cases RADIOLOGY_CASES --policy openai:MODEL --out RUN",
    "table7": "medcopilot bench run ... --budget 5 (and --budget 20 --rule budget_unit=calls) --out RUN",
    "passk": "medcopilot bench run ... --repeats 3 --out RUN",
    "protocols": "medcopilot bench run ... --protocol paper --out RUN (next to a harness run)",
}


def arrow(delta: float) -> str:
    return "↔" if abs(delta) < EPS else "↑" if delta > 0 else "↓"


@dataclass
class Cell:
    value: float | str | None
    kind: str = ""  # "" | strict | loc | field | label
    delta: float | None = None
    n: int | None = None
    ci: tuple[float, float] | None = None
    delta_ci: tuple[float, float] | None = None
    errors: int = 0
    total: int = 0
    bold: bool = False
    mark: str = ""  # "†": an evidence item passed unchecked
    boot: Any = field(default=None, repr=False, compare=False)  # resampled means, for a mean of cells
    cases: int = 0  # the cases behind the value, for a mean of cells
    runs: int = 0  # the scored runs behind n's cases (shown when repeats make them more)

    def text(self) -> str:
        if isinstance(self.value, str):
            return self.value
        if self.value is None and self.errors:
            return f"error {self.errors}/{self.total}"
        base = "—" if self.value is None else f"{self.value:.2f}"
        if self.delta is None or self.value is None:
            return base + self.mark
        return f"{base}{self.mark} ({arrow(self.delta)} {abs(self.delta):.2f})"

    def detail(self) -> str:
        """n, CI (and the change's CI) and errors, as one line (empty for labels and empty cells)."""
        parts = []
        if self.n:
            parts.append(f"n={self.n}" + (f" runs {self.runs}" if self.runs > self.n else ""))
        if self.ci is not None:
            parts.append(f"[{self.ci[0]:.2f}, {self.ci[1]:.2f}]")
        if self.delta_ci is not None:
            parts.append(f"Δ [{self.delta_ci[0]:+.2f}, {self.delta_ci[1]:+.2f}]")
        if self.errors and self.value is not None:
            parts.append(f"error {self.errors}/{self.total}")
        return " ".join(parts)

    def full_text(self) -> str:
        """Value, change and detail in one string (Markdown)."""
        main = self.text()
        if self.bold and main not in ("—", ""):
            main = f"**{main}**"
        extra = self.detail()
        return f"{main} {extra}".strip() if extra else main


@dataclass
class Table:
    key: str
    title: str
    caption: str
    header: list[list[tuple[str, int]]]
    rows: list[list[Cell]] = field(default_factory=list)
    groups: list[tuple[int, str]] = field(default_factory=list)  # (row index, group title) before that row
    label_cols: int = 1  # leading columns that name the row


def glossary_markdown() -> str:
    return "### Glossary\n\n" + "\n".join(f"- **{k}**: {v}" for k, v in GLOSSARY.items()) + "\n"


def glossary_html() -> str:
    items = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in GLOSSARY.items())
    return f'<h2 id="glossary">Glossary</h2><dl class="glossary">{items}</dl>'


# ----- rendering -----


def _delta_class(delta: float | None) -> str:
    if delta is None:
        return ""
    return " same" if abs(delta) < EPS else " up" if delta > 0 else " down"


def _empty_note(table: Table) -> str:
    command = FILL.get(table.key)
    return f"no runs of this kind; filled by: {command}" if command else "no runs of this kind"


def _html_cell(c: Cell) -> str:
    cls = ("l " if c.kind == "label" else "") + c.kind + _delta_class(c.delta)
    text = html.escape(c.text())
    if c.bold:
        text = f"<b>{text}</b>"
    extra = c.detail()
    if extra:
        text += f'<br><small class="ci">{html.escape(extra)}</small>'
    if c.value is None and c.errors:
        cls += " error"
    return f'<td class="{cls.strip()}">{text}</td>'


def to_html(table: Table) -> str:
    head = "".join(
        "<tr>" + "".join(f'<th colspan="{n}">{html.escape(text)}</th>' for text, n in level) + "</tr>"
        for level in table.header
    )
    width = sum(n for _, n in table.header[0])
    group_at = dict(table.groups)
    body = []
    for i, row in enumerate(table.rows):
        if i in group_at:
            body.append(f'<tr class="group"><td class="l" colspan="{width}">{html.escape(group_at[i])}</td></tr>')
        body.append("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>")
    empty = (
        "" if table.rows else f'<tr><td class="l muted" colspan="{width}">{html.escape(_empty_note(table))}</td></tr>'
    )
    return (
        f'<h2 id="{table.key}">{html.escape(table.title)}</h2><table class="paper" data-table="{table.key}">'
        f'{head}{"".join(body)}{empty}</table><p class="caption">{html.escape(table.caption)}</p>'
    )


def _flat_header(table: Table) -> list[str]:
    """One column name per column: the header levels joined with ' / '."""
    names: list[list[str]] = []
    for level in table.header:
        flat: list[str] = []
        for text, n in level:
            flat += [text] * n
        names.append(flat)
    width = len(names[0])
    return [" / ".join(dict.fromkeys(lv[i] for lv in names if i < len(lv) and lv[i])) for i in range(width)]


def to_markdown(table: Table) -> str:
    cols = _flat_header(table)
    group_at = dict(table.groups)
    lines = [f"### {table.title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for i, row in enumerate(table.rows):
        if i in group_at:
            lines.append(f"| **{group_at[i]}** |" + " |" * (len(cols) - 1))
        lines.append("| " + " | ".join(c.full_text() for c in row) + " |")
    if not table.rows:
        lines.append(f"| {_empty_note(table)} |" + " |" * (len(cols) - 1))
    return "\n".join([*lines, "", table.caption, ""])


def _num(v: float | None) -> str:
    return "" if v is None else f"{v:.6f}"


def row_label(row: list[Cell], label_cols: int, last: list[str]) -> tuple[str, list[str]]:
    """A row's name for the flat formats: its label cells joined, a blank leading one (Table 3's Strict and Loc.
    rows under their backbone) taken from the row above, so no row loses its model; and the cells it used."""
    texts = [c.text() for c in row[:label_cols]]
    if label_cols > 1:
        texts = [t or (last[n] if n < len(last) and n < label_cols - 1 else "") for n, t in enumerate(texts)]
    return " ".join(t for t in texts if t), texts


def to_csv(tables: list[Table]) -> str:
    """One CSV: table, group, row, column, value, delta, n, CI, the change's CI, errors, bold and mark per cell
    (an empty table is one row naming the command that fills it)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["table", "group", "row", "column", "value", "delta", "n", "ci_low", "ci_high", "delta_ci_low",
                "delta_ci_high", "errors", "episodes", "bold", "mark", "runs"])  # fmt: skip
    for t in tables:
        cols = _flat_header(t)
        group = ""
        group_at = dict(t.groups)
        if not t.rows:
            w.writerow([t.key, "", "", "", _empty_note(t)] + [""] * 11)
        last: list[str] = []
        for i, row in enumerate(t.rows):
            group = group_at.get(i, group)
            label, last = row_label(row, t.label_cols, last)
            cells = row[t.label_cols :] if len(row) > t.label_cols else row[-1:]
            for col, c in zip(cols[t.label_cols :] or cols[-1:], cells, strict=False):
                value = "" if c.value is None else c.value if isinstance(c.value, str) else f"{c.value:.6f}"
                ci, dci = c.ci or (None, None), c.delta_ci or (None, None)
                stats = [c.n or "", _num(ci[0]), _num(ci[1]), _num(dci[0]), _num(dci[1]), c.errors or "", c.total or ""]
                w.writerow([t.key, group, label, col, value, _num(c.delta), *stats, int(c.bold), c.mark,
                            c.runs or ""])  # fmt: skip
    return buf.getvalue()
