"""Neuro's report tables read as a scientist reads them: each shown whole (one header row, no "part 1 of
3"), headers in words, no ``nan`` cell, numerical zeros as 0, the estimate and its interval in one cell."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from neuro.recovery import REPORT_FOUND, report_table
from neuro.report import DASH, RESULT_TABLES, node_table, number, readable
from neuro.run import COLS
from scimech.studies.report import MAX_COLUMNS, Report
from scimech.studies.verdicts import PlantedTruthRow


@pytest.mark.parametrize(
    "value, text",
    [
        (1.01e-17, "0"),  # a numerical zero (an amplitude ratio of a model with no beat)
        (-5e-19, "0"),
        (0.005465, "0.00547"),  # a small measurement keeps its three significant digits
        (0.33934, "0.339"),
        (49.87, "49.9"),
        (12345.6, "12346"),  # no 1.23e+04
        (float("nan"), DASH),
        (None, DASH),
        ("ok", "ok"),
    ],
)
def test_a_cell_has_three_significant_digits_and_no_nan(value, text):
    assert number(value) == text


def _results() -> pd.DataFrame:
    """A results.csv of two models, with NaN free-run columns and a 1e-17 amplitude ratio."""
    rng = np.random.default_rng(0)
    table = pd.DataFrame(rng.uniform(0.1, 0.9, (2, len(COLS))), columns=COLS, index=["mean", "discovered (priors)"])
    table.loc["mean", ["lr_phase", "rc_phase", "frequency", "frequency_error"]] = np.nan
    table.loc["mean", "tail_amplitude_ratio"] = 1.01e-17
    return table


def _pipe_tables(md: str) -> list[list[str]]:
    """The Markdown's pipe tables, each as its lines."""
    tables, current = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    return tables


def test_every_results_table_is_shown_whole_with_words_for_headers(tmp_path):
    results = _results()
    shown = [c for _, cols in RESULT_TABLES for c in cols]
    assert sorted(shown) == sorted(c for c in COLS if c != "lesion_mae")  # ood_lesion again, left to the file
    rep = Report(tmp_path, title="t")
    for caption, cols in RESULT_TABLES:
        assert len(cols) <= MAX_COLUMNS - 1  # with the row labels, within one table
        rep.table(readable(results, cols), caption=caption)
    nodes = [
        SimpleNamespace(id=0, parent=None, op="draft", status="ok", val=0.3, quick_val=0.4, error=""),
        SimpleNamespace(id=1, parent=0, op="improve", status="pruned", val=None, quick_val=0.9, error="pruned"),
    ]
    rep.table(node_table(nodes), caption="nodes")
    md = rep.write().read_text()
    assert "part 1 of" not in md
    tables = _pipe_tables(md)
    assert len(tables) == len(RESULT_TABLES) + 1
    for lines in tables:
        assert sum(set(line) <= set("|-") for line in lines) == 1  # one header row per table
        header = [c.strip() for c in lines[0].strip("|").split("|")]
        assert not any("_" in h for h in header), header
        cells = [c.strip() for line in lines[2:] for c in line.strip("|").split("|")]
        assert "nan" not in cells and not any("e-" in c for c in cells)
    free_run = tables[3]
    assert free_run[2].startswith("| mean of the context | – | – | – | – |") and "| 0 |" in free_run[2]
    assert tables[-1][0] == (
        "| node | parent | operation | status | validation MAE | quick-stage validation MAE | error |"
    )
    assert tables[-1][2].startswith("| 0 | – | draft | ok | 0.3 | 0.4 |")
    assert tables[-1][3].startswith("| 1 | 0 | improve | pruned | – | 0.9 |")


def test_the_planted_truth_table_joins_each_estimate_and_its_interval():
    rows = [
        PlantedTruthRow("signs", "sign accuracy", 0.749, 0.693, 0.801, 0.7, True, planted="60 inhibitory"),
        PlantedTruthRow("left_right", "phase", np.nan, np.nan, np.nan, 0.15, False, planted=0.484),
    ]
    ceiling = [PlantedTruthRow("signs", "sign accuracy", 1.0, 1.0, 1.0, 0.7, True)]
    table = report_table(rows, ceiling)
    assert table.shape[1] + 1 <= MAX_COLUMNS
    assert table.loc["signs", REPORT_FOUND] == "0.749 [0.693, 0.801]"
    assert table.loc["left_right", REPORT_FOUND] == DASH
    assert table.loc["left_right", "perfect forecaster"] == "not measured"
    assert not any("nan" in str(v) for v in table.to_numpy().ravel())
