"""A study run from Python (scimech.studies.run_study) is the study the command line runs.

The independent path is the command line itself, ``scimech.cli.commands.main([...])``: the same
options typed as flags must give the same plan (what ``--dry-run`` prints), the same refusals, and
(slow tier) the same summary numbers and findings as the Python call.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from scimech.cli.commands import main
from scimech.errors import ConfigError
from scimech.studies import plan_study, run_study, study_options

#: the smallest ocean study the command accepts in reasonable time: one unit, one epoch, a 6 x 8 ocean
TINY = "synth: {n_members: 1, years: 4, ny: 6, nx: 8}\nwindow: 3\nwidth: 4\nbatch_size: 16\n"


def _cli_dry_run(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main([*argv, "--dry-run"]) == 0
    return capsys.readouterr().out.strip()


def _cli_error(capsys, argv: list[str]) -> str:
    capsys.readouterr()
    assert main(argv) == 2
    return capsys.readouterr().err.strip()


def test_keywords_give_the_plan_the_flags_give(tmp_path, capsys):
    """Lists, one values, Paths and defaults turn into the flags the command parses: same plan text."""
    out = tmp_path / "o"
    cli = _cli_dry_run(
        capsys, ["ocean", "study", "--out", str(out), "--seeds", "0", "2", "--regimes", "mixed", "--epochs", "3"]
    )
    plan = plan_study("ocean", out=out, seeds=[0, 2], regimes=["mixed"], epochs=3)
    assert plan.text() == cli
    assert list(plan.units) == ["mixed/seed=0", "mixed/seed=2"]  # the units the options ask for, not the defaults
    assert not out.exists()  # a plan writes nothing


def test_settings_keywords_act_as_the_config_file(tmp_path, capsys):
    """ocean's settings beyond its options (window, width, synth) given as keywords act as a --config file's;
    a keyword wins over the file as a flag does."""
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY + "epochs: 5\n")
    out = tmp_path / "o"
    cli = _cli_dry_run(
        capsys,
        ["ocean", "study", "--out", str(out), "--seeds", "0", "--regimes", "mixed", "--config", str(cfg)]
        + ["--epochs", "1"],
    )
    from_file = plan_study("ocean", out=out, seeds=[0], regimes=["mixed"], config=cfg, epochs=1)
    as_keywords = plan_study(
        "ocean",
        out=out,
        seeds=[0],
        regimes=["mixed"],
        epochs=1,
        window=3,
        width=4,
        batch_size=16,
        synth={"n_members": 1, "years": 4, "ny": 6, "nx": 8},
    )
    assert from_file.text() == cli == as_keywords.text()
    assert "epochs: 1" in cli and "window 3 months" in cli and "6 x 8 grid" in cli  # the keyword, the file's values
    assert from_file.settings.config == as_keywords.settings.config


@pytest.mark.parametrize(
    ("study", "argv", "keywords"),
    [
        (
            "astro",
            ["--planted", "--n-train", "300", "--n-bootstrap", "20"],
            dict(planted=True, n_train=300, n_bootstrap=20),
        ),
        ("neuro", ["--nodes", "2", "--n-seeds", "1", "--long-context", "0"], dict(nodes=2, n_seeds=1, long_context=0)),
    ],
)
def test_every_study_plans_as_its_command(tmp_path, capsys, study, argv, keywords):
    out = tmp_path / study
    cli = _cli_dry_run(capsys, [study, "study", "--out", str(out), *argv])
    assert plan_study(study, out=out, **keywords).text() == cli


def test_an_unknown_keyword_is_refused_naming_the_nearest(tmp_path):
    with pytest.raises(ConfigError, match=r"no option seed; did you mean seeds\?") as err:
        run_study("ocean", out=tmp_path / "o", seed=[0])
    assert "regimes" in str(err.value) and "window" in str(err.value)  # the accepted ones are listed
    with pytest.raises(ConfigError, match=r"no option n_galaxies; did you mean n_train\?|no option n_galaxies;"):
        run_study("astro", out=tmp_path / "a", n_galaxies=10)
    with pytest.raises(ConfigError, match=r"dry_run is not a keyword here: plan_study\(...\) gives the plan"):
        run_study("ocean", out=tmp_path / "o", dry_run=True)
    with pytest.raises(ConfigError, match="No study 'oceans'"):
        run_study("oceans")
    assert not (tmp_path / "o").exists() and not (tmp_path / "a").exists()


def test_a_bad_value_is_refused_with_the_commands_words(tmp_path, capsys):
    """Each refusal is the command's own message, raised (not an exit) and naming the option."""
    out = str(tmp_path / "o")
    for argv, keywords in (
        (["--epochs", "0"], dict(epochs=0)),
        (["--seeds", "1", "1"], dict(seeds=[1, 1])),
        (["--size", "huge"], dict(size="huge")),
        (["--member", "0"], dict(member=0)),  # acts only with --data
    ):
        said = _cli_error(capsys, ["ocean", "study", "--out", out, *argv]).splitlines()[-1]
        words = said.split(": error: ", 1)[1].split(" (see `")[0]  # the CLI's hint to its --help left aside
        with pytest.raises(ConfigError) as err:
            plan_study("ocean", out=out, **keywords)
        assert words.split("; did you mean")[0] in str(err.value), (argv, said, err.value)
    with pytest.raises(ConfigError, match=r"planted is a switch \(--planted\)"):
        plan_study("astro", out=out, planted="yes")
    with pytest.raises(ConfigError, match=r"epochs \(--epochs\) takes one value"):
        plan_study("ocean", out=out, epochs=[1, 2])


def test_study_options_lists_the_keywords():
    keywords = study_options("ocean")
    assert {"seeds", "regimes", "epochs", "data", "out", "size", "window", "synth"} <= set(keywords)
    assert not {"help", "dry_run", "config", "quick"} & set(
        keywords
    )  # not keywords: the help, the dry run, short forms


@pytest.mark.slow  # two whole (tiny) ocean studies, about 20 s of CPU each
def test_run_study_gives_the_numbers_the_command_gives(tmp_path, capsys):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(TINY)
    flags = ["--seeds", "0", "--regimes", "mixed", "--epochs", "1", "--config", str(cfg)]
    assert main(["ocean", "study", "--out", str(tmp_path / "cli"), *flags]) == 0
    result = run_study("ocean", out=tmp_path / "py", seeds=[0], regimes=["mixed"], epochs=1, config=cfg)

    assert result.out == tmp_path / "py" and result.report == tmp_path / "py" / "report.md"
    assert result.report.is_file()
    cli = xr.load_dataset(tmp_path / "cli" / "summary.nc")
    mine = result.evidence.summary
    numeric = [v for v in cli.data_vars if np.issubdtype(cli[v].dtype, np.number)]
    assert {"rmse", "acc", "fidelity_r"} <= set(numeric)
    for v in numeric:  # one thread, fixed seeds: the same training, to float32 round-off
        np.testing.assert_allclose(mine[v].values, cli[v].values, rtol=1e-5, atol=1e-6, equal_nan=True, err_msg=v)
    said = (tmp_path / "cli" / "findings.txt").read_text().strip()
    assert [f.line() for f in result.findings] == said.splitlines()
    assert (tmp_path / "py" / "findings.txt").read_text().strip() == said
    truth = (tmp_path / "cli" / "recovery.txt").read_text().strip()
    assert result.planted_truth is not None and result.planted_truth.strip() == truth
    assert str(result).splitlines()[0] == truth.splitlines()[0] and str(result).endswith("report.md")
