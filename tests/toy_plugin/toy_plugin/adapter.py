"""The `toy` dataset adapter: a release of `pictures/NAME.png` and `labels.csv` (`name,squares`) into case packs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from copilot.adapters.common import AdapterError, AdapterReport, column, read_table
from toy_plugin.module import write_picture_case


def adapt_toy(src: str | Path, out: str | Path, labels: str | Path | None = None, copy: bool = False) -> AdapterReport:
    """One case per labelled picture present; a label outside 1 to 4 is skipped with its reason."""
    src, out = Path(src), Path(out)
    table = Path(labels) if labels else src / "labels.csv"
    if not table.is_file():
        raise AdapterError(f"{table}: no labels table")
    header, rows = read_table(table)
    name_col, count_col = column(header, "name", required=table.name), column(header, "squares", required=table.name)
    report = AdapterReport("toy")
    for row in rows:
        name, count = row[name_col], row[count_col]
        picture = src / "pictures" / f"{name}.png"
        if not count.isdigit() or not 1 <= int(count) <= 4:
            report.skip(name, f"label {count!r} is not 1 to 4")
        elif not picture.is_file():
            report.skip(name, "picture not in the release")
        else:
            pixels = np.asarray(Image.open(picture).convert("L"))
            report.cases.append(write_picture_case(out, f"toy_{name}", int(count), pixels))
    return report
