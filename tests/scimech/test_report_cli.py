"""The report writer and the `scimech` command line."""

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from scimech.cli import main
from scimech.report import Report


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
    out = subprocess.run([sys.executable, "-m", "scimech.cli", "--help"], capture_output=True, text=True, check=True)
    for word in ("demo", "ocean", "astro", "neuro"):
        assert word in out.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: scimech" in capsys.readouterr().out


def test_demo_reports_a_failing_study_without_stopping(tmp_path, monkeypatch, capsys):
    import scimech.cli as cli

    class Ok:
        @staticmethod
        def demo(out, quick=True):
            rep = Report(out, "ok study")
            rep.text("fine")
            return rep.write()

    class Broken:
        @staticmethod
        def demo(out, quick=True):
            raise RuntimeError("boom")

    mods = {"ocean": Ok, "astro": Broken, "neuro": Ok}
    monkeypatch.setattr(cli, "_domain_cli", lambda name: (mods[name], None))
    rc = cli._run_demo(type("A", (), {"out": tmp_path / "demo", "domains": ["ocean", "astro", "neuro"], "full": False}))
    assert rc == 1
    index = (tmp_path / "demo" / "report.md").read_text()
    assert "failed: RuntimeError: boom" in index
    assert "[ocean/report.md](ocean/report.md)" in index
    assert "Report:" in capsys.readouterr().out
    assert np.isfinite(1.0)


def test_cli_turns_a_user_error_into_a_message_and_exit_code_2(tmp_path, capsys):
    from scimech.cli import main

    bad = tmp_path / "c.yaml"
    bad.write_text("epochs: 3\nbogus: 1\n")  # an unknown study setting: a ConfigError inside the command
    rc = main(["ocean", "study", "--config", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "ConfigError" in err and "bogus" in err and "Traceback" not in err
