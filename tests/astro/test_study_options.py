"""`scimech astro study` on the shared study options: a --config file (YAML or TOML) sets any
study option and the command line wins over it; bad values and unknown keys are refused before
any work; --size medium sits between quick and full; --data takes a catalogue or a folder."""

from __future__ import annotations

import argparse
import re
import socket
from pathlib import Path

import numpy as np
import pytest

from scimech.cli.commands import build_parser, main
from scimech.studies.contract import apply_config

STUDY = ["astro", "study"]


def _dry_run(capsys, *argv) -> str:
    assert main([*STUDY, *argv, "--dry-run"]) == 0
    return capsys.readouterr().out


def _units(text: str) -> int:
    return int(re.search(r"units of work: (\d+) \(", text).group(1))


@pytest.mark.parametrize(
    "suffix, text",
    [
        (".yaml", "size: medium\nn_test: 400\nchunk_size: 100\nworld: standard\nplanted: true\nseed: 3\nout: {out}\n"),
        (
            ".toml",
            'size = "medium"\nn_test = 400\nchunk_size = 100\nworld = "standard"\nplanted = true\nseed = 3\n'
            'out = "{out}"\n',
        ),
    ],
    ids=["yaml", "toml"],
)
def test_a_config_file_sets_the_options_and_the_command_line_wins(suffix, text, tmp_path, capsys):
    out = tmp_path / "from-the-file"
    cfg = tmp_path / f"astro{suffix}"
    cfg.write_text(text.format(out=out))
    plan = _dry_run(capsys, "--config", str(cfg))
    assert _units(plan) == 4  # 400 test galaxies in chunks of 100
    assert "synthetic, 4000 training and 400 test, world standard (planted stand-in)" in plan  # medium's 4000
    assert "size: medium" in plan and f"results would go to: {out}" in plan
    # the command line wins over the file, option by option
    plan = _dry_run(capsys, "--config", str(cfg), "--n-test", "300", "--size", "full", "--out", str(tmp_path / "cli"))
    assert _units(plan) == 3
    assert "synthetic, 8000 training and 300 test, world standard (planted stand-in)" in plan
    assert f"results would go to: {tmp_path / 'cli'}" in plan
    assert not out.exists() and not (tmp_path / "cli").exists()


def _study_parser():
    root = build_parser()
    astro = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction)).choices["astro"]
    study = next(a for a in astro._actions if isinstance(a, argparse._SubParsersAction)).choices["study"]
    return root, study


def _a_value(action, tmp_path):
    """A value for ``action`` other than its default, and what it parses to."""
    if action.nargs == 0:
        return True, not action.default
    if action.choices:
        value = [c for c in action.choices if c != action.default][-1]
        return value, value
    constraint = getattr(action.type, "constraint", "")
    if getattr(action.type, "output", None):
        return str(tmp_path / "somewhere"), tmp_path / "somewhere"
    for fmt in getattr(action.type, "formats", ()):  # an input read in a format: a file in the first one
        path = tmp_path / f"{action.dest}.input"
        path.write_bytes(b"SIMPLE  =" + b" " * 71)  # a FITS header's first card
        if fmt.test(path):
            return str(path), path
        np.save(path.with_suffix(".npy"), np.zeros(2))
        if fmt.test(path.with_suffix(".npy")):
            return str(path.with_suffix(".npy")), path.with_suffix(".npy")
        np.savez(path.with_suffix(".npz"), a=np.zeros(2))
        if fmt.test(path.with_suffix(".npz")):
            return str(path.with_suffix(".npz")), path.with_suffix(".npz")
    if action.dest == "cluster":
        path = tmp_path / "cluster.toml"
        path.write_text("[cluster]\nkind = 'sync'\n")
        return str(path), path
    if constraint.startswith("an existing folder"):
        path = tmp_path / action.dest
        path.mkdir(exist_ok=True)
        return str(path), path
    if constraint.startswith("an existing"):
        path = tmp_path / f"{action.dest}.txt"
        path.write_text("x")
        return str(path), path
    if constraint.startswith("a whole number"):
        return 7, 7
    if constraint.startswith("a fraction"):
        return 0.4, 0.4
    if constraint.startswith("a torch device"):
        return "cpu", "cpu"  # the one device every machine has (a bad one: below)
    if action.type is Path:
        return str(tmp_path / "somewhere"), tmp_path / "somewhere"
    return _SCHEDULER if action.dest == "scheduler" else "standard", None


# --scheduler must answer when it is parsed: a socket listening here for this module's tests
_LISTENING = socket.create_server(("127.0.0.1", 0))
_SCHEDULER = f"tcp://127.0.0.1:{_LISTENING.getsockname()[1]}"


def test_every_study_option_is_settable_in_a_config_file(tmp_path):
    root, study = _study_parser()
    options = [
        a
        for a in study._actions
        if a.option_strings and a.help != argparse.SUPPRESS and a.dest not in ("help", "config", "dry_run")
    ]
    assert {
        "out",
        "size",
        "data",
        "device",
        "cluster",
        "scheduler",
        "workers",
        "n_train",
        "model",
        "planted",
        "world",
        "seed",
        "chunk_size",
        "images",
        "test_fraction",
    } <= {a.dest for a in options}
    for action in options:
        value, parsed = _a_value(action, tmp_path)
        cfg = tmp_path / f"{action.dest}.yaml"
        cfg.write_text(f"{action.dest}: {value if not isinstance(value, bool) else str(value).lower()}\n")
        argv = [*STUDY, "--config", str(cfg)]
        args = apply_config(root, argv, root.parse_args(argv))
        assert getattr(args, action.dest) == (value if parsed is None else parsed), action.dest


@pytest.mark.parametrize(
    "line, message",
    [
        ("chunk_size: 0", "argument --chunk-size: must be a whole number >= 1"),
        ("size: huge", "argument --size: invalid choice: 'huge'"),
        ("test_fraction: 1.5", "argument --test-fraction: must be a fraction between 0 and 1"),
        ("device: tpu", "argument --device: must be a torch device"),
        ("planted: maybe", "planted is a switch: give true or false"),
    ],
)
def test_a_bad_value_in_the_file_is_refused_before_any_work(line, message, tmp_path, capsys):
    out = tmp_path / "run"
    cfg = tmp_path / "astro.yaml"
    cfg.write_text(f"{line}\nout: {out}\nn_train: 40\n")
    assert main([*STUDY, "--config", str(cfg)]) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [cfg]  # nothing written, nothing run


def test_an_unknown_key_is_one_clear_error(tmp_path, capsys):
    cfg = tmp_path / "astro.toml"
    cfg.write_text(f'n_galaxies = 40\nout = "{tmp_path / "run"}"\n')
    assert main([*STUDY, "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key 'n_galaxies'" in err[0] and "n_train" in err[0]
    assert not (tmp_path / "run").exists()


def _sizes(text: str) -> np.ndarray:
    """(training galaxies, test galaxies, bootstrap resamples) a dry run plans."""
    n_train, n_test = map(int, re.search(r"synthetic, (\d+) training and (\d+) test", text).groups())
    return np.array([n_train, n_test, int(re.search(r"bootstrap resamples: (\d+)", text).group(1))])


def test_size_medium_plans_sizes_between_quick_and_full(tmp_path, capsys):
    quick, medium, full = (
        _sizes(_dry_run(capsys, "--size", s, "--out", str(tmp_path / s))) for s in ("quick", "medium", "full")
    )
    assert (quick < medium).all() and (medium < full).all()
    assert (_sizes(_dry_run(capsys, "--medium", "--out", str(tmp_path / "m"))) == medium).all()  # the short form
    assert list(tmp_path.iterdir()) == []


def test_data_takes_a_catalogue_or_a_folder_holding_one(tmp_path, capsys):
    folder = tmp_path / "dr10"
    folder.mkdir()
    (folder / "catalog.fits").write_bytes(b"SIMPLE  =" + b" " * 71)  # a FITS header's first card
    np.save(folder / "images.npy", np.zeros((1, 4, 2, 2)))
    plan = _dry_run(capsys, "--data", str(folder), "--out", str(tmp_path / "run"))
    assert (
        f"the catalogue {folder / 'catalog.fits'} with cut-outs {folder / 'images.npy'}, 25% of its objects held out"
        in plan
    )
    plan = _dry_run(capsys, "--data", str(folder / "catalog.fits"), "--out", str(tmp_path / "run"))
    assert "with cut-outs" not in plan and f"the catalogue {folder / 'catalog.fits'}" in plan
    assert main([*STUDY, "--data", str(folder / "catalog.fits"), "--world", "standard", "--dry-run"]) == 2
    assert "argument --world: does nothing here; it needs synthetic galaxies" in capsys.readouterr().err
    assert main([*STUDY, "--data", str(folder / "images.npy"), "--dry-run"]) == 2  # cut-outs, not a catalogue
    err = capsys.readouterr().err
    assert (
        "is not a FITS file (.fits, .fits.gz, .fits.bz2) or a folder holding catalog.fits" in err
        and "it seems to be a NumPy .npy array" in err
    )
    (folder / "catalog.fits").unlink()
    assert main([*STUDY, "--data", str(folder), "--dry-run"]) == 2
    assert "it seems to be a folder" in capsys.readouterr().err


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]


def test_every_option_of_the_astro_commands_says_what_it_expects(tmp_path, capsys):
    astro = _subparser(build_parser(), "astro")
    for cmd in ("generate", "train", "study", "redraw", "shift"):
        bare = [a.option_strings or a.dest for a in _subparser(astro, cmd)._actions if not a.help]
        assert bare == [], f"astro {cmd}: options without help {bare}"
    study = {s: a.help for a in _subparser(astro, "study")._actions for s in a.option_strings}
    assert "config.json" in study["--model"] and "codecs/<NAME>" in study["--model"]
    assert "nanomaggy" in study["--train"] and "[arcsec]" in study["--train"]
    assert "--train" in study["--test"]
    assert "image_tokenizer.npz" in study["--image-tokenizer"] and "576 tokens" in study["--image-tokenizer"]
    assert "(N, 4, H, W)" in study["--images"] and "nanomaggies" in study["--images"]
    fits = tmp_path / "catalog.fits"
    fits.write_bytes(b"SIMPLE  =" + b" " * 71)
    args = build_parser().parse_args(["astro", "study", "--catalog", str(fits)])  # --catalog is --data (deprecated)
    assert args.data == fits and "--catalog is deprecated" in capsys.readouterr().err
