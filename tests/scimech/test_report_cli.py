"""The report writer and the `scimech` command line."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from scimech.cli.commands import main
from scimech.studies.report import Report


def test_report_writes_markdown_html_and_figures(tmp_path):
    rep = Report(tmp_path / "rep", title="A study")
    rep.text("Hello **world**.")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = rep.figure(fig, "line", caption="A line")
    rep.table(pd.DataFrame({"rmse": [0.5, 0.25]}, index=pd.Index(["a", "b"], name="regime")), caption="Skill")
    md = rep.write()
    text = md.read_text()
    assert png.exists() and png.stat().st_size > 1000
    assert "![A line](figures/line.png)" in text
    assert "| regime | rmse |" in text and "| b | 0.25 |" in text
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "data:image/png;base64," in html and "<table" in html


def test_help_lists_domains_and_demo():
    out = subprocess.run(
        [sys.executable, "-m", "scimech.cli.commands", "--help"], capture_output=True, text=True, check=True
    )
    for word in ("demo", "ocean", "astro", "neuro"):
        assert word in out.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: scimech" in capsys.readouterr().out


def test_demo_reports_a_failing_study_without_stopping(tmp_path, monkeypatch, capsys):
    import scimech.cli.commands as cli

    class Ok:
        title = "ok study"

        @staticmethod
        def demo(out, quick=True):
            rep = Report(out, "ok study")
            rep.text("fine")
            return rep.write()

    class Broken:
        title = "broken study"

        @staticmethod
        def demo(out, quick=True):
            raise RuntimeError("boom")

    mods = {"ocean": Ok, "astro": Broken, "neuro": Ok}
    monkeypatch.setattr(cli, "_study", lambda name: (mods[name], None))
    rc = cli._run_demo(
        type("A", (), {"out": tmp_path / "demo", "domains": ["ocean", "astro", "neuro"], "size": "quick"})
    )
    assert rc == 1
    index = (tmp_path / "demo" / "report.md").read_text()
    assert "failed: RuntimeError: boom" in index
    assert "[ocean report](ocean/report.md)" in index
    assert "Report:" in capsys.readouterr().out
    assert np.isfinite(1.0)


def test_cli_turns_a_user_error_into_a_message_and_exit_code_2(tmp_path, capsys):
    from scimech.cli.commands import main

    bad = tmp_path / "c.yaml"
    bad.write_text("epochs: 3\nbogus: 1\n")  # an unknown study setting: a ConfigError inside the command
    rc = main(["ocean", "study", "--config", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "ConfigError" in err and "bogus" in err and "Traceback" not in err


def test_demo_prints_each_studys_planted_truth_line_then_its_findings(tmp_path, monkeypatch, capsys):
    import os

    import scimech.cli.commands as cli

    out = tmp_path / "demo"

    class Planted:  # writes both files, as every study's demo should
        title = "planted"

        @staticmethod
        def demo(folder, quick=True):
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "recovery.txt").write_text(
                "ocean planted truth: 3 of 4 recovered (free concept: yes)\n\ntruth  recovered\nq_hidden  yes\n"
            )
            (folder / "findings.txt").write_text("REPRODUCED: skill is similar\n\nNOT reproduced: mixed wins\n")
            return Report(folder, "planted").write()

    class Silent:  # writes a report and nothing else
        title = "silent"

        @staticmethod
        def demo(folder, quick=True):
            return Report(folder, "silent").write()

    # a recovery.txt left by an earlier run of astro must not be passed off as this run's outcome
    old = out / "astro" / "recovery.txt"
    old.parent.mkdir(parents=True)
    old.write_text("astro planted truth: 9 of 9 recovered (stale)\n")
    os.utime(old, (1_000_000_000, 1_000_000_000))
    mods = {"ocean": Planted, "astro": Silent, "neuro": Silent}
    monkeypatch.setattr(cli, "_study", lambda name: (mods[name], None))
    rc = cli._run_demo(type("A", (), {"out": out, "domains": ["ocean", "astro"], "size": "quick"}))
    assert rc == 0
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
    i = printed.index("[scimech demo] ocean: ok in 0 s")
    assert printed[i + 1 : i + 4] == [
        "ocean planted truth: 3 of 4 recovered (free concept: yes)",
        "REPRODUCED: skill is similar",
        "NOT reproduced: mixed wins",
    ]
    j = printed.index("[scimech demo] astro: ok in 0 s")
    assert printed[j + 1] == "astro planted truth: not reported"
    assert "stale" not in "\n".join(printed)
    index = (out / "report.md").read_text()
    assert "ocean planted truth: 3 of 4 recovered (free concept: yes)" in index
    assert "- NOT reproduced: mixed wins" in index and "astro planted truth: not reported" in index


def test_markdown_table_cells_keep_a_pipe_inside_their_column(tmp_path):
    rep = Report(tmp_path, "pipes")
    rep.table(pd.DataFrame({"|r| free": ["0.34 (|r|)"], "n": [3]}), index=False)
    row = [line for line in rep.write().read_text().splitlines() if line.startswith("| 0.34")][0]
    # three unescaped pipes: the row has two cells, as the frame has two columns
    assert len([k for k, ch in enumerate(row) if ch == "|" and row[k - 1 : k] != "\\"]) == 3
    assert row.startswith("| 0.34 (\\|r\\|) | 3")
