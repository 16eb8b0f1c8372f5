"""A report a scientist can read: the competence section first, figures before tables within a section, every
caption tagged with its world, and wide tables split so that no column is hidden."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from scimech.studies.report import MAX_COLUMNS, Report  # noqa: E402

WORLD = "synthetic world (12 x 16 grid)"


def _report(tmp_path):
    rep = Report(tmp_path, title="t", world=WORLD)
    rep.heading("Results")
    rep.text("Intro.")
    rep.table(pd.DataFrame({"a": [1.0]}), caption="first table")
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    rep.figure(fig, "f", caption="the figure")
    return rep


def test_figures_come_before_tables_and_captions_carry_the_world(tmp_path):
    md = _report(tmp_path).write().read_text()
    assert md.index("Intro.") < md.index("![the figure") < md.index("**first table")
    assert f"the figure · {WORLD}" in md and f"first table · {WORLD}" in md
    assert f"Data: {WORLD}" in md.splitlines()[2]
    html = (tmp_path / "report.html").read_text()
    assert html.index("<figure>") < html.index("<table>")


def test_a_wide_table_is_split_and_every_column_shown(tmp_path):
    wide = pd.DataFrame({f"column {k}": [float(k), float(k) + 0.5] for k in range(20)}, index=["r1", "r2"])
    wide.index.name = "row"
    rep = Report(tmp_path, title="t")
    rep.table(wide, caption="wide")
    md = rep.write().read_text()
    headers = [line for line in md.splitlines() if line.startswith("| row |")]
    per = MAX_COLUMNS - 1
    assert len(headers) == -(-20 // per)  # ceil: each part at most MAX_COLUMNS columns, row labels included
    for line in headers:
        assert len(line.strip("|").split("|")) <= MAX_COLUMNS
    shown = [c.strip() for line in headers for c in line.strip("|").split("|")[1:]]
    assert shown == list(wide.columns)
    assert "wide (columns 15-20, part 3 of 3)" in md
    html = (tmp_path / "report.html").read_text()
    assert html.count("<table>") == len(headers)
    assert all(f"<th class='num'>column {k}</th>" in html or f"<th>column {k}</th>" in html for k in range(20))
    assert np.isfinite(wide.to_numpy()).all()


def test_the_demo_index_says_each_planted_truth_once_and_each_competence(tmp_path, monkeypatch):
    import scimech.cli.commands as cli

    line = "ocean planted truth: 3 of 4 recovered (free concept: RECOVERED)"

    class Planted:
        title = "planted"

        @staticmethod
        def demo(folder, quick=True):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "recovery.txt").write_text(line + "\n")
            (folder / "findings.txt").write_text("REPRODUCED: skill is similar\n")
            (folder / "competence.csv").write_text(
                'model,role,RMSE,verdict\nmixed,dissected model,"1 [0.9, 1.1]",competent\n'
                'persistence,yardstick,"2 [1.8, 2.2]",yardstick\n'
            )
            return Report(folder, "planted").write()

    monkeypatch.setattr(cli, "_study", lambda name: (Planted, None))
    out = tmp_path / "demo"
    assert cli._run_demo(type("A", (), {"out": out, "domains": ["ocean"], "size": "quick"})) == 0
    index = (out / "report.md").read_text()
    assert index.count(line) == 1  # under the study's heading, not again in the table
    row = next(r for r in index.splitlines() if r.startswith("| ocean |"))
    assert "| competent |" in row
