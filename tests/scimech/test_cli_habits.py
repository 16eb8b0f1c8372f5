"""The command line's manners: a mistyped option, command or choice is answered with the nearest one
accepted, in every command; each option's help promises only what that command accepts; an error
message is printed whole; ``python -m scimech`` and ``scimech versions`` work as in the ecosystem."""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scimech.cli.commands import build_parser, commands, main, nearest
from scimech.run.options import SIZES

REPO = Path(__file__).resolve().parents[2]
PARSER = build_parser()
COMMANDS = list(commands(PARSER))


def _usage_error(argv: list[str]) -> str:
    """The one line a usage error prints (exit status 2 checked)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
        PARSER.parse_args(argv)
    assert stop.value.code == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1, err.getvalue()
    return lines[0]


def _accepted(parser: argparse.ArgumentParser) -> set[str]:
    return {f for a in parser._actions for f in a.option_strings}


def _offered(parser: argparse.ArgumentParser) -> list[str]:
    """The options shown in ``--help`` (old spellings kept for a release and short forms are hidden)."""
    return [f for a in parser._actions if a.help != argparse.SUPPRESS for f in a.option_strings if f.startswith("--")]


def _needs_nothing(parser: argparse.ArgumentParser) -> bool:
    """No argument is required: an unknown option is the only mistake on the line."""
    return not any(a.required for a in parser._actions) and not any(
        isinstance(a, argparse._SubParsersAction) for a in parser._actions
    )


def test_a_mistyped_option_is_answered_with_the_nearest_one(tmp_path):
    import xarray as xr

    product = tmp_path / "store.zarr"
    xr.Dataset({"tos": ("time", [1.0, 2.0])}).to_zarr(product)  # what inspect reads (its content: not parsed yet)
    line = _usage_error(["ocean", "inspect", str(product), "--jsn", str(tmp_path / "t.json")])
    assert line.startswith("scimech ocean inspect: error: unrecognized arguments: --jsn")
    assert "did you mean --json?" in line
    # the value written with `=` follows the flag
    assert "did you mean --out=runs/x?" in _usage_error(["ocean", "study", "--ot=runs/x", "--dry-run"])
    # a command and a choice
    assert "did you mean 'ocean'?" in _usage_error(["ocaen", "study"])
    assert "did you mean 'medium'?" in _usage_error(["ocean", "study", "--size", "medum"])
    # nothing close: no guess
    assert "did you mean" not in _usage_error(["ocean", "study", "--zzzzzzzz"])


@pytest.mark.parametrize("name", [n for n, p in COMMANDS if _offered(p)])
def test_every_command_suggests_its_own_options(name):
    """In every command, each option shown in its help, typed with one letter dropped, is answered
    with an option of that command as close to the typo as the one meant (difflib's ratio, computed
    here), never with an option of another command or a hidden old spelling."""
    parser = dict(COMMANDS)[name]
    for flag in _offered(parser):
        if len(flag) < 6:  # "--out" minus a letter is too short to guess safely
            continue
        typo = flag[:3] + flag[4:]
        if typo in _accepted(parser):
            continue
        guess = re.search(r"did you mean (\S+)\?", nearest(parser, f"unrecognized arguments: {typo}"))
        assert guess, (name, typo)
        said = guess.group(1)
        assert said in _offered(parser), (name, typo, said)
        ratio = difflib.SequenceMatcher(None, typo, said).ratio()
        assert ratio >= difflib.SequenceMatcher(None, typo, flag).ratio(), (name, typo, said, flag)


def test_each_command_refuses_an_unknown_option_itself(tmp_path, monkeypatch):
    """The command typed refuses what it does not know (its name in the line, its options guessed),
    not the top-level parser, for every command that needs no argument."""
    monkeypatch.chdir(tmp_path)  # default output folders are probed here
    checked = 0
    for name, parser in COMMANDS:
        if not _needs_nothing(parser) or name == "scimech":
            continue
        line = _usage_error([*name.split()[1:], "--hepl"])
        if f"{name}: error: argument FOLDER: must be an existing folder" in line:  # redraw's default: no run here
            continue
        checked += 1
        assert line.startswith(f"{name}: error: unrecognized arguments: --hepl; did you mean --help?"), line
    assert checked >= 12


def _flags_promised(help_text: str) -> list[str]:
    """The options a help text names for this command: a flag inside a backtick span that starts with
    a command's name (`study --data`, `scimech ocean study --out`) belongs to that other command."""
    own = re.sub(r"`[A-Za-z][^`]*`", "", help_text)
    return re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", own)


def test_the_help_check_finds_a_flag_the_command_refuses():
    assert _flags_promised("seed values; a count of seeds is --n-seeds") == ["--n-seeds"]
    assert _flags_promised("a `scimech ocean study --out` folder") == []


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS])
def test_help_promises_only_what_the_command_accepts(name):
    parser = dict(COMMANDS)[name]
    accepted = _accepted(parser)
    for action in parser._actions:
        text = action.help or ""
        if text == argparse.SUPPRESS:
            continue
        promised = [f for f in _flags_promised(text) if f not in accepted]
        assert promised == [], (name, action.option_strings, promised, text)
        if action.choices and set(action.choices) <= set(SIZES):  # --size names only the sizes offered
            named = [s for s in SIZES if re.search(rf"\b{s}\b", text)]
            assert set(named) <= set(action.choices), (name, named, action.choices, text)


def test_ocean_study_help_no_longer_sends_to_a_refused_option():
    parser = dict(COMMANDS)["scimech ocean study"]
    assert "--n-seeds" not in parser.format_help()
    assert "unrecognized arguments: --n-seeds" in _usage_error(["ocean", "study", "--n-seeds", "2", "--dry-run"])
    validate = dict(COMMANDS)["scimech validate"].format_help()
    assert "medium" not in validate and "quick (minutes)" in validate and "full (the reference sizes)" in validate


def test_a_long_error_message_is_printed_whole(tmp_path, capsys):
    """A cluster file that is not YAML, in a folder with a long name: the YAML parser's own message
    (read here with PyYAML) reaches the user whole, not cut at a length, and then the fix."""
    import yaml

    folder = tmp_path / ("a_project_folder_with_a_long_descriptive_name_" * 3)
    folder.mkdir()
    bad = folder / "cluster.yaml"
    bad.write_text("cluster:\n  kind: slurm\n  cores: [4\n  memory: 16GB\n")
    with pytest.raises(yaml.YAMLError) as parsed:
        yaml.safe_load(bad.read_text())
    said = " ".join(str(parsed.value).split())
    assert len(said) > 100  # a message worth cutting
    rc = main(["ocean", "study", "--cluster", str(bad), "--dry-run", "--out", str(tmp_path / "o")])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 2
    assert said in err and err.rstrip().endswith("(see `scimech ocean study --help`)"), err
    assert "with a [cluster] section" in err


def test_python_m_scimech_is_the_command():
    run = subprocess.run(
        [sys.executable, "-m", "scimech", "ocaen"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2 and "did you mean 'ocean'?" in run.stderr
    version = subprocess.run(
        [sys.executable, "-m", "scimech", "--version"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    from importlib.metadata import version as installed

    assert version.returncode == 0 and version.stdout.strip() == f"scimech {installed('scimech')}"


def test_scimech_versions_prints_the_versions_a_bug_report_needs(capsys):
    import numpy
    import torch
    import xarray

    assert main(["versions"]) == 0
    out = capsys.readouterr().out
    for line in (f"numpy: {numpy.__version__}", f"torch: {torch.__version__}", f"xarray: {xarray.__version__}"):
        assert line in out.splitlines(), line
    assert f"python: {sys.version.split()[0]}" in out


def _estimate_minutes(argv: list[str], tmp_path: Path, capsys) -> float:
    assert main([*argv, "--dry-run", "--out", str(tmp_path / "o")]) == 0
    found = re.search(r"estimated time: about ([0-9.]+) (s|min|h)\b", capsys.readouterr().out)
    assert found, "no estimate"
    return float(found.group(1)) * {"s": 1 / 60, "min": 1, "h": 60}[found.group(2)]


@pytest.mark.parametrize(
    "size, measured",
    [
        ("quick", 2.7),  # minutes: the quick ocean study, 9 units on 2 CPU cores (docs/ocean.md: 2-3 min)
        ("medium", 30.0),  # docs/ocean.md's size table: "about half an hour"
    ],
)
def test_the_ocean_study_estimates_its_time_within_a_factor_of_two(size, measured, tmp_path, capsys):
    minutes = _estimate_minutes(["ocean", "study", f"--{size}"], tmp_path, capsys)
    assert measured / 2 <= minutes <= measured * 2, f"{size}: estimated {minutes:.1f} min, measured {measured} min"
