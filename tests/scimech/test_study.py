"""The study contract (scimech.studies.contract): verdicts only from numbers that are there, one writer
for the files `scimech demo` prints, studies found through entry points."""

from __future__ import annotations

import argparse
import math
import socket
import sys
from pathlib import Path

import pytest

from scimech.errors import ConfigError
from scimech.studies.contract import (
    FINDINGS_FILE,
    RECOVERY_FILE,
    Plan,
    PlantedTruthRow,
    Study,
    add_study_options,
    apply_config,
    assess,
    load_study,
    recovery_line,
    registered_studies,
    write_outcome,
)


def test_a_verdict_needs_finite_numbers():
    ok = assess("mixed supervision is more consistent", True, "0.83 vs 0.58", numbers={"mixed": 0.83, "pred": 0.58})
    assert (
        ok.verdict == "REPRODUCED" and ok.line() == "REPRODUCED: mixed supervision is more consistent (0.83 vs 0.58)."
    )
    no = assess("claim", False, numbers={"a": 1.0})
    assert no.verdict == "NOT reproduced"
    # a NaN estimate can never make a finding "NOT reproduced", whatever the rule said
    nan = assess("claim", False, "nan vs nan", numbers={"agreement mixed": math.nan, "agreement pred": 0.5})
    assert nan.verdict == "NOT ASSESSED" and "agreement mixed is not a finite number" in nan.line()
    assert assess("claim", True, numbers={"x": None}).verdict == "NOT ASSESSED"
    few = assess("consistent across seeds", True, numbers={"r": 0.9}, minimum={"seeds": (1, 2)})
    assert few.verdict == "NOT ASSESSED" and "seeds: 1 where at least 2 are needed" in few.reason
    assert assess("claim", None).verdict == "NOT ASSESSED"


def test_planted_truth_rows_count_only_what_was_assessed():
    rows = [
        PlantedTruthRow.from_interval("q_surf", "r", 0.9, 0.85, 0.95, 0.5),  # recovered
        PlantedTruthRow.from_interval("q_ekman", "r", 0.55, 0.48, 0.6, 0.5),  # interval reaches 0.48
        PlantedTruthRow.from_interval("eddy", "r", math.nan, math.nan, math.nan, 0.5),  # not assessed
        PlantedTruthRow.from_interval("leak", "r", 0.1, 0.05, 0.2, 0.3, above=False),  # below: recovered
        PlantedTruthRow.from_interval("contrast", "r", 0.9, 0.8, 0.95, 0.5, counted=False),
    ]
    assert [r.recovered for r in rows] == [True, False, None, True, True]
    assert recovery_line("ocean", rows, "seed 0") == "ocean planted truth: 2 of 3 recovered (seed 0; 1 not assessed)"


def test_write_outcome_writes_the_two_files(tmp_path):
    f = [assess("a", True, "1 > 0", numbers={"x": 1}), "a line as it is"]
    paths = write_outcome(tmp_path, f, "astro planted truth: 2 of 2 recovered\n\ntable")
    assert {p.name for p in paths} == {RECOVERY_FILE, FINDINGS_FILE}
    assert (tmp_path / FINDINGS_FILE).read_text() == "REPRODUCED: a (1 > 0).\na line as it is\n"
    assert (tmp_path / RECOVERY_FILE).read_text().splitlines()[0] == "astro planted truth: 2 of 2 recovered"
    assert not list(tmp_path.glob("*.tmp*"))  # atomic: no temporary left behind


def test_the_shipped_studies_are_registered_and_follow_the_contract():
    studies = registered_studies()
    assert list(studies)[:3] == ["ocean", "astro", "neuro"]
    for name in ("ocean", "astro", "neuro"):
        study = load_study(name)
        assert isinstance(study, Study) and study.name == name and study.title
    with pytest.raises(KeyError, match="installed: ocean, astro, neuro"):
        load_study("weather")


def test_every_domain_answers_the_same_verbs_in_the_same_order():
    from scimech.cli.commands import build_parser
    from scimech.studies.contract import VERBS

    root = build_parser()
    groups = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices
    for name in ("ocean", "astro", "neuro"):
        verbs = next(a for a in groups[name]._actions if isinstance(a, argparse._SubParsersAction))
        listed = [c.dest for c in verbs._choices_actions]  # as `scimech <domain> --help` lists them
        assert listed[: len(VERBS)] == list(VERBS), (name, listed)
        helps = {c.dest: c.help for c in verbs._choices_actions}
        assert helps["study"].startswith("run the study") and helps["redraw"].startswith("the findings, planted")


WEATHER = """
from pathlib import Path
from scimech.studies.contract import Plan, Study, assess


class WeatherStudy(Study):
    name = "weather"
    title = "weather: a toy study"
    out_default = "runs/weather"

    def add_options(self, parser):
        parser.add_argument("--days", type=int, default=3)

    def plan(self, args):
        return Plan("weather study", [f"day {d}" for d in range(args.days)], {"days": args.days}, out=str(args.out),
                    settings=args.days)

    def run(self, plan, client=None):
        return [d * 2 for d in range(plan.settings)]

    def findings(self, evidence):
        return [assess("every value is even", all(v % 2 == 0 for v in evidence), numbers={"n": len(evidence)})]

    def planted_truth(self, evidence):
        return None

    def report(self, evidence, plan):
        path = Path(plan.out) / "report.md"
        path.write_text(str(evidence))
        return path

    def load(self, folder):
        values = eval((folder / "report.md").read_text())
        return values, Plan("weather study", [], {}, out=str(folder))
"""


def test_a_study_of_yours_is_one_class_found_through_its_entry_point(tmp_path, monkeypatch, capsys):
    """A package declaring [project.entry-points."scimech.studies"] answers every verb: no code outside its class."""
    pkg = tmp_path / "mystudy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "study.py").write_text(WEATHER)
    dist = tmp_path / "mystudy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mystudy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[scimech.studies]\nweather = mystudy.study:WeatherStudy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert registered_studies()["weather"] == "mystudy.study:WeatherStudy"
        from scimech.cli.commands import build_parser, main

        assert "weather: a toy study" in build_parser().format_help()
        out = tmp_path / "run"
        assert main(["weather", "study", "--days", "4", "--out", str(out)]) == 0
        assert (out / "findings.txt").read_text() == "REPRODUCED: every value is even.\n"
        assert not (out / "recovery.txt").exists()  # no planted truth: no file
        assert "Report:" in capsys.readouterr().out
        (out / "findings.txt").unlink()
        assert main(["weather", "redraw", str(out)]) == 0  # redraw: the base class, from load()
        assert (out / "findings.txt").read_text() == "REPRODUCED: every value is even.\n"
        assert main(["weather", "study", "--days", "2", "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
        assert "units of work: 2 (day 0, day 1)" in capsys.readouterr().out and not (tmp_path / "dry").exists()
        assert main(["weather", "generate"]) == 2  # a verb it does not fill in: one line
        assert "this study has no synthetic data" in capsys.readouterr().err
        demo = load_study("weather").demo(tmp_path / "demo")
        assert demo == tmp_path / "demo" / "report.md" and (tmp_path / "demo" / "findings.txt").is_file()
    finally:
        sys.modules.pop("mystudy.study", None)
        sys.modules.pop("mystudy", None)


def test_an_entry_point_naming_a_module_is_refused_with_the_fix(tmp_path, monkeypatch):
    (tmp_path / "oldstudy.py").write_text("TITLE = 'old'\n")
    dist = tmp_path / "oldstudy-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: oldstudy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[scimech.studies]\nold = oldstudy\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(TypeError, match="must name its Study class as 'module:Class'"):
        load_study("old")
    sys.modules.pop("oldstudy", None)


def test_an_old_command_name_still_runs_and_names_the_new_one(tmp_path, capsys):
    from scimech.cli.commands import main

    assert main(["ocean", "plot", str(tmp_path)]) == 2  # an empty folder: refused, but by the redraw command
    err = capsys.readouterr().err
    assert "`plot` is deprecated" in err and "use `scimech ocean redraw`" in err and "No finished units" in err


def test_submodules_are_reachable_as_attributes_and_api_names_stay_functions():
    import subprocess

    code = (
        "import scimech, inspect; assert inspect.ismodule(scimech.causal.metrics); assert callable(scimech.record); "
        "import scimech.capture.record; assert callable(scimech.record) and not inspect.ismodule(scimech.record)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the shared study command: options, --config files, one execute -----------------------------


def _toy_parser():
    """``scimech toy study``: the shared options plus two of its own."""
    root = argparse.ArgumentParser(prog="scimech")
    sub = root.add_subparsers()
    st = sub.add_parser("toy").add_subparsers().add_parser("study")
    add_study_options(st, out_default="runs/toy", data_help="data", config_keys={"grid": "a nested setting"})
    st.add_argument("--seeds", type=int, nargs="+", default=[0])
    st.add_argument("--planted", action="store_true")
    return root


def _parse(argv, config=None, tmp_path=None, suffix=".yaml"):
    root = _toy_parser()
    if config is not None:
        path = tmp_path / f"c{suffix}"
        path.write_text(config)
        argv = [*argv, "--config", str(path)]
    args = root.parse_args(argv)
    return apply_config(root, argv, args) if config is not None else args


def test_every_study_option_is_there_with_its_default():
    args = _parse(["toy", "study"])
    assert (args.out, args.size, args.data, args.device, args.workers, args.dry_run) == (
        Path("runs/toy"),
        "quick",
        None,
        "cpu",
        None,
        False,
    )
    assert _parse(["toy", "study", "--medium"]).size == "medium"  # short form of --size medium


@pytest.mark.parametrize(
    "suffix,text",
    [
        (".yaml", "seeds: [3, 4]\nplanted: true\nsize: full\nworkers: 2\n"),
        (".toml", "seeds = [3, 4]\nplanted = true\nsize = 'full'\nworkers = 2\n"),
    ],
)
def test_a_config_file_sets_options_by_name(tmp_path, suffix, text):
    args = _parse(["toy", "study"], text, tmp_path, suffix)
    assert (args.seeds, args.planted, args.size, args.workers) == ([3, 4], True, "full", 2)


def test_the_command_line_wins_over_the_config_file(tmp_path):
    args = _parse(["toy", "study", "--seeds", "9", "--size", "medium"], "seeds: [3, 4]\nsize: full\n", tmp_path)
    assert (args.seeds, args.size) == ([9], "medium")


def test_declared_keys_go_to_config_extra_and_unknown_keys_are_one_error(tmp_path):
    assert _parse(["toy", "study"], "grid: {ny: 3}\n", tmp_path).config_extra == {"grid": {"ny": 3}}
    with pytest.raises(ConfigError, match=r"unknown key 'wrkers'.*takes: .*workers"):
        _parse(["toy", "study"], "wrkers: 2\n", tmp_path)
    with pytest.raises(ConfigError, match="switch"):
        _parse(["toy", "study"], "planted: maybe\n", tmp_path)
    with pytest.raises(ConfigError, match=r"key\(s\) 'off' are not names"):  # YAML 1.1 reads `off` as false
        _parse(["toy", "study"], "off: 3\n", tmp_path)
    with pytest.raises(ConfigError, match="not valid YAML"):
        _parse(["toy", "study"], "seeds: [1, 2\n", tmp_path)


def test_a_bad_value_in_the_file_is_refused_as_on_the_command_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        _parse(["toy", "study"], "workers: 0\n", tmp_path)
    assert exc.value.code == 2
    assert "argument --workers: must be a whole number >= 1" in capsys.readouterr().err


def test_a_device_the_machine_lacks_and_two_schedulers_are_refused(capsys):
    import torch

    missing = "mps" if torch.cuda.is_available() else "cuda"
    with socket.create_server(("127.0.0.1", 0)) as server:  # a scheduler address that answers
        scheduler = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        for argv in (["--device", missing], ["--device", "gpu"], ["--workers", "2", "--scheduler", scheduler]):
            with pytest.raises(SystemExit) as exc:
                _parse(["toy", "study", *argv])
            assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is not on this machine (it has: cpu" in err or torch.cuda.is_available()
    assert "not allowed with argument" in err
    assert _parse(["toy", "study", "--device", "auto"]).device == ("cuda" if torch.cuda.is_available() else "cpu")


class _Squares(Study):
    """A toy study: its 'planted truth' is that unit k returns k**2."""

    name = "toy"

    def plan(self, args):
        units = [f"k={k}" for k in args.seeds]
        return Plan("toy study", units, {"seeds": args.seeds}, 0.5, "a guess", str(args.out), settings=args.seeds)

    def run(self, plan, client=None):
        return {k: k * k for k in plan.settings}

    def findings(self, evidence):
        return [assess("squares are even for even k", all(v % 2 == 0 for k, v in evidence.items() if k % 2 == 0))]

    def load(self, folder):
        raise NotImplementedError

    def planted_truth(self, evidence):
        rows = [PlantedTruthRow.from_interval(f"k={k}", "k^2", v, v, v, k * k - 0.5) for k, v in evidence.items()]
        return recovery_line("toy", rows)

    def report(self, evidence, plan):
        path = Path(plan.out) / "report.md"
        path.write_text(str(evidence))
        return path


def test_execute_runs_the_plan_writes_the_outcome_and_prints_it(tmp_path, capsys):
    args = _parse(["toy", "study", "--out", str(tmp_path), "--seeds", "2", "3"])
    assert _Squares().execute(args) == 0
    printed = capsys.readouterr().out
    assert (tmp_path / "recovery.txt").read_text() == "toy planted truth: 2 of 2 recovered\n"
    assert (tmp_path / "findings.txt").read_text() == "REPRODUCED: squares are even for even k.\n"
    assert printed.splitlines() == [
        "toy planted truth: 2 of 2 recovered",
        "REPRODUCED: squares are even for even k.",
        f"Report: {tmp_path / 'report.md'}",
    ]


def test_execute_with_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    args = _parse(["toy", "study", "--out", str(tmp_path / "x"), "--seeds", "1", "2", "3", "--dry-run"])
    assert _Squares().execute(args) == 0
    text = capsys.readouterr().out
    assert "units of work: 3 (k=1, k=2, k=3)" in text and "about 2 s on one worker" in text
    assert not (tmp_path / "x").exists()


def test_the_planted_truth_table_is_laid_out_by_hand():
    from scimech.studies.verdicts import text_table

    assert text_table(["truth", "found"], [["edges", 0.9], ["a longer truth", "x"]], rule=True) == (
        "truth           found\n--------------  -----\nedges           0.9\na longer truth  x"
    )
    assert text_table(["a", "b"], [["1", "two words"]], sep=" | ", aligned=False) == "a | b\n1 | two words"


def test_a_study_command_may_not_take_a_shared_verb_and_a_broken_demo_is_a_config_error(tmp_path):
    from scimech.studies.contract import Command

    class Clash(_Squares):
        name = "clash"

        def commands(self):
            return [Command("shift", "mine", lambda p: None, lambda a: 0)]

        def demo_argv(self, out_dir, quick):
            return ["--no-such-option"]

    root = argparse.ArgumentParser(prog="scimech")
    with pytest.raises(ValueError, match="takes the name of a shared verb"):
        Clash().register(root.add_subparsers())
    with pytest.raises(ConfigError, match="demo options"):
        Clash().demo(tmp_path)
