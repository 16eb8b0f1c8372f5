"""`scimech ocean study` on the shared study options: a `--config` file keyed by option names
plus the study settings that are not options, the command line over the file, bad values and
unknown keys refused before any work, and the three sizes (`--dry-run`, nothing trained)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from ocean.plan import SIZES, StudyConfig
from ocean.settings import CONFIG_KEYS
from ocean.study import OceanStudy
from scimech.cli.commands import build_parser, main
from scimech.studies.contract import SIZES as STUDY_SIZES
from scimech.studies.contract import apply_config


def _args(argv):
    """The namespace `scimech` hands a command, the --config file applied (as scimech.cli.commands.main does)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return apply_config(parser, argv, args) if args.config is not None else args


def test_config_file_with_options_and_a_synth_section_the_command_line_winning(tmp_path, capsys):
    conf = tmp_path / "study.yaml"
    conf.write_text(
        "seeds: [3, 4]\nregimes: [mixed, prescription_only]\nepochs: 7\nsize: quick\n"
        "synth: {years: 5, ny: 9, nx: 11, hidden_coeff: 500.0}\nlr: 0.01\nwindow: 4\n"
    )
    out = tmp_path / "run"
    argv = ["ocean", "study", "--config", str(conf), "--out", str(out), "--seeds", "1", "--dry-run"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    # --seeds 1 on the command line over the file's [3, 4]; the file's regimes, epochs and grid
    assert "units of work: 2 (mixed/seed=1, prescription_only/seed=1)" in text
    assert "epochs: 7" in text and "synthetic ocean, 2 members x 5 years, 9 x 11 grid" in text
    assert not out.exists()
    # the settings that are not options reach the study's configuration
    cfg = OceanStudy().plan(_args([*argv, "--epochs", "2"])).settings.config
    assert (cfg.lr, cfg.window, cfg.epochs, cfg.seeds) == (0.01, 4, 2, [1])
    assert cfg.synth == {"years": 5, "ny": 9, "nx": 11, "hidden_coeff": 500.0}  # added to the quick grid
    assert cfg.regimes == ["mixed", "prescription_only"]


@pytest.mark.parametrize(
    "text, says",
    [
        ("epochs: 0\n", "--epochs: must be a whole number >= 1"),  # an option: argparse's own check
        ("seeds: [0, -1]\n", "--seeds: must be a whole number >= 0"),
        ("lr: -0.5\n", "'lr' setting of the ocean study must be a finite number > 0"),
        ("window: many\n", "Study setting 'window' must be a int"),
        ("fractions: [0.5, 0.5, 0.5]\n", "add up to 1"),
        ("synth: {years: 3, nope: 1}\n", "Unknown synth setting(s) ['nope']"),
        ("synth:\n  off: 3\n", "['off'] are read by YAML as true/false/null"),
        ("synth: {ny: -3}\n", "synth setting 'ny' must be a whole number >= 3"),  # failed deep in numpy
        ("synth: {lat: [50, 20]}\n", "synth setting 'lat' must be two increasing numbers"),
        ("synth: {output: weekly}\n", "synth setting 'output' must be 'monthly' or 'daily'"),
    ],
)
def test_a_bad_value_in_the_file_is_refused_before_any_work(tmp_path, capsys, text, says):
    conf = tmp_path / "bad.yaml"
    conf.write_text(text)
    out = tmp_path / "run"
    assert main(["ocean", "study", "--config", str(conf), "--out", str(out)]) == 2  # no --dry-run: it would run
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_an_unknown_key_is_one_clear_error(tmp_path, capsys):
    conf = tmp_path / "bad.yaml"
    conf.write_text("epochs: 3\nlearning_rate: 0.1\n")
    assert main(["ocean", "study", "--config", str(conf), "--out", str(tmp_path / "run")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "unknown key 'learning_rate'" in err[0]
    assert "lr" in err[0] and "seeds" in err[0]  # it lists what the command takes
    assert not (tmp_path / "run").exists()


def _dry_run_sizes(argv, capsys) -> dict:
    assert main([*argv, "--dry-run"]) == 0
    text = capsys.readouterr().out
    members, years, ny, nx = map(int, re.search(r"(\d+) members x (\d+) years, (\d+) x (\d+) grid", text).groups())
    return {
        "work": members * years * ny * nx,
        "units": int(re.search(r"units of work: (\d+)", text).group(1)),
        "epochs": int(re.search(r"epochs: (\d+)", text).group(1)),
        "width": int(re.search(r"width: (\d+)", text).group(1)),
    }


def test_size_medium_plans_sizes_between_quick_and_full(tmp_path, capsys):
    out = ["--out", str(tmp_path / "x")]
    quick, medium, full = (_dry_run_sizes(["ocean", "study", "--size", s, *out], capsys) for s in SIZES)
    assert quick["work"] < medium["work"] < full["work"]  # data: members x years x grid cells
    for key in ("units", "epochs", "width"):
        assert quick[key] <= medium[key] <= full[key], key
    assert medium["units"] >= 3 * 5  # 5 seeds: usable intervals over seed pairs
    # the short forms (and the older --quick / --full spellings) are the same sizes
    assert _dry_run_sizes(["ocean", "study", "--medium", *out], capsys) == medium
    assert _dry_run_sizes(["ocean", "study", "--full", *out], capsys) == full
    assert _dry_run_sizes(["ocean", "study", "--quick", *out], capsys) == quick
    assert not (tmp_path / "x").exists()


def test_the_sizes_are_the_study_contract_s():
    assert tuple(SIZES) == STUDY_SIZES


def test_config_keys_are_the_settings_that_are_not_options():
    fields = {f.name for f in dataclasses.fields(StudyConfig)}
    assert set(CONFIG_KEYS) | {"seeds", "regimes", "epochs", "data"} == fields
    assert set(CONFIG_KEYS).isdisjoint({"seeds", "regimes", "epochs", "data"})


def test_device_and_size_reach_the_plan(tmp_path):
    plan = OceanStudy().plan(_args(["ocean", "study", "--size", "medium", "--out", str(tmp_path)]))
    assert plan.settings.device == "cpu" and plan.settings.run_dir == tmp_path
    assert plan.settings.config.seeds == [0, 1, 2, 3, 4] and plan.settings.config.width == 16


def test_redraw_takes_a_folder_and_names_an_empty_one(tmp_path, capsys):
    assert main(["ocean", "redraw", str(tmp_path)]) == 2
    assert f"No finished units in {tmp_path}" in capsys.readouterr().err


def test_the_device_reaches_every_unit(tmp_path, monkeypatch):
    from ocean import run

    seen = {}

    def capture(fn, units, store, client=None, **kw):
        seen.update(units)
        raise RuntimeError("stop before training")

    monkeypatch.setattr(run, "map_units", capture)
    conf = tmp_path / "tiny.yaml"
    conf.write_text("synth: {n_members: 1, years: 7, ny: 6, nx: 8}\nseeds: [0, 1]\nregimes: [mixed]\n")
    plan = OceanStudy().plan(
        _args(["ocean", "study", "--config", str(conf), "--device", "cpu", "--out", str(tmp_path / "run")])
    )
    with pytest.raises(RuntimeError, match="stop before training"):
        OceanStudy().run(plan)
    assert sorted(seen) == ["mixed/seed=0", "mixed/seed=1"]
    assert {u["device"] for u in seen.values()} == {"cpu"} and {u["seed"] for u in seen.values()} == {0, 1}


def test_product_reading_settings_in_a_config_file_are_checked(tmp_path):
    """--member / --select / --mesh-mask have config-file twins under product:, each checked."""
    from ocean.plan import make_config
    from scimech.errors import ConfigError

    mesh = tmp_path / "mesh_mask.nc"
    mesh.write_bytes(b"CDF\x01")
    cfg = make_config({"product": {"member": 1, "select": {"experiment": 0}, "mesh_mask": str(mesh)}})
    assert cfg.product == {"member": 1, "select": {"experiment": 0}, "mesh_mask": str(mesh)}
    for bad, words in (
        ({"member": -1}, "'member' must be an index >= 0"),
        ({"select": {"experiment": "a"}}, "'select' must map each extra dim"),
        ({"mesh_mask": str(tmp_path / "none.nc")}, "does not exist"),
    ):
        with pytest.raises(ConfigError, match=words):
            make_config({"product": bad})
