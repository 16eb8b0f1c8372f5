"""`scimech neuro study` on the shared study options: a --config file sets every option (the
command line wins), bad values and unknown keys are refused before any work, --size plans
the sizes of docs/neuro.md's budget table, and a changed generator is never resumed."""

from __future__ import annotations

import argparse
import re
import socket

import numpy as np
import pytest
import yaml

from scimech.cli.commands import build_parser, main
from scimech.studies.contract import apply_config

STUDY = ["neuro", "study"]


def _config(tmp_path, values: dict, name="study.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(values))
    return path


def _study_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    for word in STUDY:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def _dry_run(argv, capsys) -> str:
    assert main([*STUDY, *argv, "--dry-run"]) == 0
    return capsys.readouterr().out


def test_every_study_option_is_settable_from_a_config_file(tmp_path):
    traces, labels, cluster = (tmp_path / n for n in ("traces.npy", "conditions.npy", "cluster.toml"))
    np.save(traces, np.zeros((10, 2)))
    np.save(labels, np.array(["a"] * 10))
    cluster.write_text("[cluster]\nkind = 'sync'\n")
    # key in the file -> the value the command must see (written by hand, not read back from the parser)
    want = {
        "out": tmp_path / "run",
        "size": "medium",
        "data": traces,
        "device": "cpu",
        "workers": 2,
        "seed": 3,
        "context": 8,
        "horizon": 16,
        "duration": 1.5,
        "max_windows": 50,
        "baselines": ("mean", "ridge_arx"),
        "conditions": labels,
        "dt": 0.01,
        "held_out": ["taxis", "dark"],
        "nodes": 5,
        "seeds": [2, 5],
        "long_context": 0,
        "long_nodes": 3,
        "generation": 4,
        "search_seconds": 30.0,
        "proposer": "llm",
        "base_url": "http://127.0.0.1:1/v1",
        "llm_model": "m",
        "protocol": "zapbench",
        "search_neurons": 64,
    }
    text = {
        **want,
        "out": str(want["out"]),
        "data": str(traces),
        "conditions": str(labels),
        "baselines": "mean,ridge_arx",
    }
    argv = [*STUDY, "--config", str(_config(tmp_path, text))]
    args = apply_config(build_parser(), argv, build_parser().parse_args(argv))
    assert {k: getattr(args, k) for k in want} == want
    with socket.create_server(("127.0.0.1", 0)) as server:  # --scheduler must answer when it is parsed
        scheduler = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        for key, value in (
            ("cluster", cluster),
            ("scheduler", scheduler),  # one of three at a time
            ("n_seeds", 4),
        ):  # --seeds or --n-seeds
            argv = [*STUDY, "--config", str(_config(tmp_path, {key: str(value)}, f"{key}.yaml"))]
            assert getattr(apply_config(build_parser(), argv, build_parser().parse_args(argv)), key) == value
    # every option of the command is among those just set (a new option must be added here)
    options = {a.dest for a in _study_parser()._actions if a.option_strings and a.help != argparse.SUPPRESS}
    assert options - {"help", "config", "dry_run"} == set(want) | {"cluster", "scheduler", "n_seeds"}


def test_the_command_line_wins_over_the_config_file(tmp_path, capsys):
    path = _config(tmp_path, {"nodes": 5, "n_seeds": 2, "size": "medium", "long_context": 0})
    text = _dry_run(["--config", str(path), "--nodes", "7", "--out", str(tmp_path / "run")], capsys)
    assert "nodes per search: 7\n" in text  # the command line's
    assert "search seeds: 0, 1\n" in text and "budget: medium" in text  # the file's
    assert "units of work: 28 (" in text  # 2 seeds x 2 searches x 7 nodes, no long context


@pytest.mark.parametrize(
    "values, flag",
    [
        ({"nodes": 0}, "--nodes"),
        ({"search_seconds": "nan"}, "--search-seconds"),
        ({"size": "huge"}, "--size"),
        ({"baselines": "mean,oracle"}, "--baselines"),
        ({"device": "tpu"}, "--device"),
    ],
)
def test_a_bad_value_in_the_file_is_refused_before_any_work(values, flag, tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*STUDY, "--config", str(_config(tmp_path, values)), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}" in err
    assert not out.exists()


def test_an_unknown_key_is_one_clear_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert main([*STUDY, "--config", str(_config(tmp_path, {"nodez": 3})), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key 'nodez'" in err[0]
    assert "nodes" in err[0] and "search_seconds" in err[0]  # it lists the keys the command takes
    assert not out.exists()


def _sizes(text: str) -> tuple[int, int, int, int, float]:
    seeds = re.search(r"search seeds: (.*)\n", text).group(1).split(", ")
    nodes, long_nodes = map(int, re.search(r"nodes per search: (\d+) \(long context 256: (\d+)\)", text).groups())
    units = int(re.search(r"units of work: (\d+) \(", text).group(1))
    cap = float(re.search(r"wall-clock cap per search: (\d+) s", text).group(1))
    return len(seeds), nodes, long_nodes, units, cap


def test_size_medium_plans_sizes_between_quick_and_full(tmp_path, capsys):
    # docs/neuro.md's budget table: seeds 1 / 3 / 3, nodes 12 / 24 / 40, context-256 searches
    # 6 (priors only) / 10 / 40 (both), wall-clock caps 90 / 240 / 3600 s
    quick, medium, full = (
        _sizes(_dry_run(["--size", s, "--out", str(tmp_path / s)], capsys)) for s in ("quick", "medium", "full")
    )
    assert quick == (1, 12, 6, 1 * 2 * 12 + 1 * 6, 90)
    assert medium == (3, 24, 10, 3 * 2 * 24 + 2 * 10, 240)
    assert full == (3, 40, 40, 3 * 2 * 40 + 2 * 40, 3600)
    assert all(q <= m <= f for q, m, f in zip(quick, medium, full)) and quick < medium < full
    assert _sizes(_dry_run(["--medium", "--out", str(tmp_path / "m")], capsys)) == medium  # the short form
    assert list(tmp_path.iterdir()) == []


def test_a_changed_generator_under_unchanged_settings_is_never_resumed(tmp_path, monkeypatch):
    """The same plan run twice, the simulator changed in between (a time-varying gain on its
    rates): the first run's folder is set aside whole, and the scores are those of the new data."""
    import neuro.run
    from neuro.baselines import fit_baseline
    from neuro.study import NeuroStudy
    from neuro.tasks import build_recording, build_task, evaluate

    out = tmp_path / "run"
    args = build_parser().parse_args(
        [
            *STUDY,
            "--out",
            str(out),
            "--duration",
            "0.6",
            "--max-windows",
            "30",
            "--nodes",
            "1",
            "--generation",
            "1",
            "--long-context",
            "0",
            "--baselines",
            "mean",
            "--search-seconds",
            "600",
        ]
    )
    study = NeuroStudy()
    plan = study.plan(args)
    first = study.run(plan).table.loc["mean", "val"]
    old_fingerprint = (out / "task_fingerprint.txt").read_text().strip()
    old_units = sorted(p.relative_to(out) for p in out.rglob("*.done.json"))
    assert any(p.parts[0] == "baselines" for p in old_units) and any(p.parts[0] == "search_priors" for p in old_units)

    made = []

    def changed(*args, **kw):  # another generator: same settings, other data
        rec = build_recording(*args, **kw)
        gain = 1.0 + 0.5 * np.sin(20.0 * rec["time"].values)[None, :, None]
        made.append(rec.assign(rates=(rec["rates"].dims, rec["rates"].values * gain)))  # values: the index stays
        return made[-1]

    monkeypatch.setattr(neuro.run, "build_recording", changed)
    with pytest.warns(UserWarning, match="held a study of other data"):
        again = study.run(plan).table.loc["mean", "val"]
    stale = out / f"stale-{old_fingerprint}"
    assert sorted(p.relative_to(stale) for p in stale.rglob("*.done.json")) == old_units  # kept aside whole
    assert (out / "task_fingerprint.txt").read_text().strip() != old_fingerprint
    # independent truth: the mean baseline scored directly on the changed generator's task
    task = build_task(True, duration=0.6, max_windows=30, seed=0, recording=made[0])
    want = float(evaluate(fit_baseline("mean", task), task, ("val",))["mae_mean"].sel(split="val"))
    assert again == pytest.approx(want, rel=1e-6) and again != pytest.approx(first, rel=1e-3)


def test_device_reaches_the_torch_baselines_only(small_task, monkeypatch):
    """``--device`` goes to the models trained with torch (GRU, TiDE-lite) and not to the others;
    a fit on another device is another unit (never resumed as the CPU one)."""
    import neuro.run
    from neuro.baselines import fit_baseline

    asked = {}

    def spy(name, task, **kw):  # records what each fit was asked for; fits the cheap mean baseline
        asked[name] = kw.get("device")
        return fit_baseline("mean", task)

    monkeypatch.setattr(neuro.run, "fit_baseline", spy)
    table = neuro.run.run_baselines(small_task, ["mean", "gru"], torch_steps=2, device="cuda:3")
    assert asked == {"mean": None, "gru": "cuda:3"} and list(table.index) == ["mean", "gru"]
    assert neuro.run._unit_key("gru", 2, "", "cuda:3") != neuro.run._unit_key("gru", 2, "", "cpu") == "gru-steps2"
    assert neuro.run._unit_key("mean", 2, "", "cuda:3") == "mean"


def test_the_demo_runs_the_study_commands_quick_default(tmp_path, monkeypatch):
    """`scimech demo` (NeuroStudy.demo) and `scimech neuro study` run the same NeuroStudy plan."""
    from neuro.study import NeuroStudy

    planned = []
    monkeypatch.setattr(NeuroStudy, "complete", lambda self, plan, client=None, task=None: planned.append(plan))
    NeuroStudy().demo(tmp_path / "demo")
    NeuroStudy().demo(tmp_path / "demo", quick=False)
    args = build_parser().parse_args([*STUDY, "--out", str(tmp_path / "demo")])
    quick, full = planned
    assert quick == NeuroStudy().plan(args) and quick.sizes["budget"] == "quick" and full.sizes["budget"] == "full"
