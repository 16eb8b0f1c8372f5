"""One option vocabulary across every command, paths checked where they are parsed, and options
that act only with another refused elsewhere.

The parser tree is walked (every ``scimech`` command and subcommand), so a new command or
option is driven here without being listed: a shared flag must come from
:data:`scimech.run.options.SHARED`, an input path must name the formats it reads, an output must be
probed, and an option whose help says "with --X" must declare that it needs --X."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scimech.cli.commands import build_parser, commands, main, options_page
from scimech.run import options
from scimech.run.options import SHARED, Option

from .test_options import SAMPLE_FILES, SAMPLES, _argv, _placeholder

REPO = Path(__file__).resolve().parents[2]
COMMANDS = list(commands())
SHARED_FLAGS = {spec.flag: key for key, spec in SHARED.items()}


def _actions():
    for name, parser in COMMANDS:
        for a in parser._actions:
            if a.option_strings and not isinstance(a, options._Deprecated):
                yield name, parser, a


def test_every_shared_flag_comes_from_the_one_declaration():
    """``--seeds`` (and every shared flag) is built by scimech.run.options.add wherever it appears: the
    same meaning and type in every command."""
    own_way = [
        (name, a.option_strings[0])
        for name, _, a in _actions()
        if set(a.option_strings) & set(SHARED_FLAGS) and getattr(a, "shared", None) is None
    ]
    assert own_way == []
    # and the shared words are not spelled under another flag
    for name, _, a in _actions():
        if a.dest in SHARED and a.dest != "size":
            assert a.option_strings == [SHARED[a.dest].flag], (name, a.option_strings)


def test_seeds_lists_seed_values_in_every_command(tmp_path):
    found = 0
    for name, _parser, a in _actions():
        if a.option_strings == ["--seeds"]:
            found += 1
            words = name.split()[1:]
            args = build_parser().parse_args([*words, "--seeds", "3", "8", "--out", str(tmp_path / "o")])
            assert args.seeds == [3, 8], name
    assert found >= 2  # ocean study and neuro study


def test_the_options_page_is_generated_from_the_declarations():
    page = (REPO / "docs" / "options.md").read_text()
    assert page == options_page(), (
        "docs/options.md is stale: python -m scimech.cli.commands --options-page > docs/options.md"
    )
    for spec in SHARED.values():
        assert f"| `{spec.flag}` |" in page


def _needs():
    return [(name, n) for name, parser in COMMANDS for n in parser.get_default("_needs") or ()]


NEEDS = _needs()


def _required(parser) -> list[str]:
    argv = []
    for a in parser._actions:
        if a.required and a.option_strings:
            argv += [a.option_strings[0], _placeholder(a)]
    return argv


def _fill(example) -> list[str]:
    """An example's argv with each format placeholder ({npy}, {fits}, ...) replaced by a sample file."""
    return [str(SAMPLE_FILES[w[1:-1]]) if w in options.EXAMPLE_FILES else w for w in example]


def test_every_command_with_context_options_declares_them():
    declared = {(name, n.flag) for name, n in NEEDS}
    assert {
        ("scimech neuro study", "--held-out"),
        ("scimech neuro baselines", "--held-out"),
        ("scimech astro study", "--images"),
        ("scimech dictionary train", "--target-site"),
    } <= declared
    # an option whose help says it acts "with --X" must declare it (a new one cannot be added without)
    undeclared = [
        (name, a.option_strings[0])
        for name, _, a in _actions()
        if re.match(r"with (a \S+ )?--[a-z]", a.help or "") and (name, a.option_strings[0]) not in declared
    ]
    assert undeclared == []


@pytest.mark.parametrize("name, need", NEEDS, ids=[f"{n} {d.flag}" for n, d in NEEDS])
def test_an_option_given_where_it_does_nothing_is_refused(name, need, capsys):
    parser = dict(COMMANDS)[name]
    argv = [*name.split()[1:], *_required(parser), *_fill(need.example)]
    if "--out" not in argv and any(a.option_strings == ["--out"] for a in parser._actions):
        argv += ["--out", str(SAMPLES / "never")]
    if any(a.option_strings == ["--dry-run"] for a in parser._actions):
        argv.append("--dry-run")  # refused before the plan; were it not, nothing would run
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{name}: error: argument {need.flag}: does nothing here; it needs {need.need}."]
    assert not (SAMPLES / "never").exists()


def test_a_context_option_with_its_context_is_accepted(tmp_path):
    """The refusal is not blanket: with what it needs, the same option parses."""
    store = SAMPLE_FILES["zarr"]
    for argv in (
        ["neuro", "study", "--data", str(store), "--held-out", "taxis", "--dry-run"],
        ["neuro", "study", "--proposer", "llm", "--llm-model", "qwen"],
        ["astro", "study", "--data", str(SAMPLE_FILES["fits"]), "--test-fraction", "0.3"],
    ):
        args = build_parser().parse_args([*argv, "--out", str(tmp_path / "o")])
        assert options.refused_in_context(args) is None, argv


INPUTS = [(name, parser, a) for name, parser, a in _actions() if getattr(a.type, "formats", None)]
OUTPUTS = [(name, parser, a) for name, parser, a in _actions() if getattr(a.type, "output", None)]


def test_every_path_option_is_checked_where_it_is_parsed():
    """Options that name a file or folder read or write it through a checked type."""
    pathlike = [
        (name, a.option_strings[0])
        for name, _, a in _actions()
        if a.metavar in ("PATH", "FILE", "FOLDER", "NPZ", "FITS", "CONFIG") or a.type is Path
    ]
    unchecked = [
        (name, flag)
        for name, flag in pathlike
        if not any(flag in a.option_strings and isinstance(a.type, Option) for n, _, a in _actions() if n == name)
    ]
    assert unchecked == []
    assert len(INPUTS) >= 15 and len(OUTPUTS) >= 15


def _argv_with(name, parser, action, value) -> list[str]:
    return _argv(tuple(name.split()[1:]), parser, action, value)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(INPUTS), content=st.binary(max_size=64))
def test_an_input_in_the_wrong_format_is_refused_with_what_it_seems_to_be(option, content, capsys):
    name, parser, action = option
    path = SAMPLES / "junk.nc"
    path.write_bytes(content)
    if any(f.test(path) for f in action.type.formats):  # random bytes that happen to be the format
        return
    assert main(_argv_with(name, parser, action, str(path))) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"argument {action.option_strings[0]}:" in err[0] and "it seems to be" in err[0], err


@pytest.mark.parametrize("name, parser, action", OUTPUTS, ids=[f"{n} {a.option_strings[0]}" for n, _, a in OUTPUTS])
def test_an_output_that_cannot_be_written_is_refused(name, parser, action, capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    suffix = (action.type.suffixes or ("",))[0]  # a name the option writes, so the place is what is refused
    for bad, words in (
        (str(blocker / f"results{suffix}"), "is a file"),
        (f"/proc/scimech-no-such-place/out{suffix}", "no file can be written in '/proc'"),
    ):
        assert main(_argv_with(name, parser, action, bad)) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"argument {action.option_strings[0]}:" in err[0] and words in err[0], err


def test_a_deprecated_spelling_still_works_and_names_the_new_one(tmp_path, capsys):
    args = build_parser().parse_args(["astro", "synth", "--n", "12", "--out", str(tmp_path / "g.fits")])
    assert args.n_galaxies == 12
    err = capsys.readouterr().err
    assert "--n is deprecated" in err and "use --n-galaxies" in err


@pytest.mark.parametrize(
    "argv, words",
    [
        (["ocean", "study", "--out", "/proc/forbidden/x"], "argument --out: cannot write to '/proc/forbidden/x'"),
        (["neuro", "study", "--out", "/proc/forbidden/x"], "argument --out: cannot write to '/proc/forbidden/x'"),
        (
            ["dictionary", "train", "--acts", "{junk}", "--out", "{tmp}"],
            "argument --acts: '{junk}' is not a netCDF file",
        ),
        (["neuro", "study", "--held-out", "nosuch"], "argument --held-out: does nothing here; it needs --data PATH"),
    ],
)
def test_the_four_invocations_exit_2_with_one_line_and_no_traceback_in_seconds(argv, words, tmp_path):
    junk = tmp_path / "junk.nc"
    junk.write_text("this is not netCDF\n")
    argv = [w.replace("{junk}", str(junk)).replace("{tmp}", str(tmp_path / "o")) for w in argv]
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "scimech.cli.commands", *argv], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    seconds = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert words.replace("{junk}", str(junk)) in lines[0] and "Traceback" not in proc.stderr
    assert seconds < 10, f"{argv}: {seconds:.1f} s"
    assert not (tmp_path / "o").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "argv, words",
    [
        # an existing file of another kind where a store would be written: refused, the file kept
        (["ocean", "generate", "--out", "{notes}"], "does not end in .zarr"),
        (["ocean", "generate", "--out", "{notes_zarr}"], "exists and is a text file"),
        (["neuro", "generate", "--out", "{tmp}/rec.out"], "does not end in .zarr or .nc"),
        (["astro", "generate", "--out", "{tmp}"], "does not end in .fits or .zarr"),
        (["ocean", "redraw", "{notes}"], "expected an existing folder"),
        (["astro", "study", "--model", "{notes}", "--dry-run"], "expected an existing folder"),
        (["ocean", "study", "--seed", "3", "--dry-run"], "unrecognized arguments: --seed"),  # never read as --seeds
        (["ocean", "study", "--seeds", "0", "0", "--dry-run"], "argument --seeds: 0 given twice"),
        (["ocean", "study", "--scheduler", "notanaddress", "--dry-run"], "must be a Dask scheduler address"),
        (["ocean", "study", "--scheduler", "tcp://127.0.0.1:{closed}", "--dry-run"], "no Dask scheduler answers"),
        (["ocean", "study", "--cluster", "{notes}", "--dry-run"], "is not a cluster file"),
        (["ocean", "study", "--cluster", "{badkind}", "--dry-run"], "kind must be one of"),
        (
            ["dictionary", "train", "--acts", "{acts}", "--out", "{tmp}/d", "--features", "4", "--k", "8"],
            "--k 8 active features per row is more than the dictionary's 4 features",
        ),
        # an option typed at its default where it does nothing is refused like any other value
        (["astro", "study", "--test-fraction", "0.25", "--dry-run"], "argument --test-fraction: does nothing here"),
        # a bad value in the file is named with the file, even where the command line sets the option too
        (["astro", "study", "--config", "{ep0}", "--epochs", "3", "--dry-run"], "(from epochs: in the --config file"),
    ],
)
def test_mistakes_a_scientist_makes_exit_2_with_one_line_and_leave_files_alone(
    argv, words, tmp_path, capsys, monkeypatch
):
    import socket

    import numpy as np
    import xarray as xr

    notes, notes_zarr, badkind = tmp_path / "notes.txt", tmp_path / "notes.zarr", tmp_path / "bad.toml"
    for f in (notes, notes_zarr):
        f.write_text("field notes\n")
    badkind.write_text('[cluster]\nkind = "slurmm"\n')
    (tmp_path / "ep0.yaml").write_text("epochs: 0\n")
    acts = tmp_path / "acts.nc"
    xr.Dataset({"a": (("sample", "feature"), np.zeros((20, 4)))}).to_netcdf(acts)
    with socket.create_server(("127.0.0.1", 0)) as server:
        closed = server.getsockname()[1]  # a port nothing listens on once the server is closed
    fill = {
        "{notes}": notes,
        "{notes_zarr}": notes_zarr,
        "{tmp}": tmp_path,
        "{badkind}": badkind,
        "{acts}": acts,
        "{closed}": closed,
        "{ep0}": tmp_path / "ep0.yaml",
    }
    for k, v in fill.items():
        argv = [w.replace(k, str(v)) for w in argv]
    monkeypatch.chdir(tmp_path)  # in process (a traceback would fail the test): the four above cover a fresh one
    rc = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(lines) == 1, lines
    assert words in lines[0], lines[0]
    assert notes.read_text() == notes_zarr.read_text() == "field notes\n"
    assert not (tmp_path / "d").exists() and not (tmp_path / "runs").exists()


_DATA_ONLY = {"--conditions": "{npy}", "--dt": "0.5", "--held-out": "taxis", "--protocol": "zapbench"}
_TRAINED_HERE = {"--epochs": "3", "--batch-size": "8", "--image-features": "colours"}


@settings(max_examples=40, deadline=None)
@given(
    chosen=st.sets(st.sampled_from(sorted(_DATA_ONLY))),
    with_data=st.booleans(),
    command=st.sampled_from(["study", "baselines"]),
)
def test_combinations_of_trace_options_are_refused_exactly_without_data(chosen, with_data, command):
    """By hand: a traces-only option is refused iff --data is missing, whatever else is given."""
    argv = ["neuro", command, "--out", str(SAMPLES / "never")]
    for flag in sorted(chosen):
        argv += [flag, *_fill([_DATA_ONLY[flag]])]
    if with_data:
        argv += ["--data", str(SAMPLE_FILES["zarr"])]
    refused = options.refused_in_context(build_parser().parse_args(argv))
    assert (refused is not None) == (bool(chosen) and not with_data)
    if refused:
        assert refused.split("argument ")[1].split(":")[0] in chosen and "--data PATH" in refused


@settings(max_examples=40, deadline=None)
@given(chosen=st.sets(st.sampled_from(sorted(_TRAINED_HERE))), with_model=st.booleans())
def test_combinations_of_training_options_are_refused_exactly_with_a_model(chosen, with_model):
    """By hand: an option of the stand-in trained here is refused iff --model brings the model."""
    argv = ["astro", "study", "--out", str(SAMPLES / "never")]
    for flag in sorted(chosen):
        argv += [flag, _TRAINED_HERE[flag]]
    if with_model:
        argv += ["--model", str(SAMPLE_FILES["folder"])]
    refused = options.refused_in_context(build_parser().parse_args(argv))
    assert (refused is not None) == (bool(chosen) and with_model)


def test_compressed_fits_and_an_empty_output_folder_are_accepted(tmp_path):
    import bz2
    import gzip

    header = b"SIMPLE  =" + b" " * 71
    (tmp_path / "c.fits.gz").write_bytes(gzip.compress(header))
    (tmp_path / "c.fits.bz2").write_bytes(bz2.compress(header))
    (tmp_path / "other.gz").write_bytes(gzip.compress(b"not fits at all"))
    fits = options.input_path("fits")
    assert fits(str(tmp_path / "c.fits.gz")) == tmp_path / "c.fits.gz"
    assert fits(str(tmp_path / "c.fits.bz2")) == tmp_path / "c.fits.bz2"
    with pytest.raises(argparse.ArgumentTypeError, match="gzip-compressed"):
        fits(str(tmp_path / "other.gz"))
    (tmp_path / "empty").mkdir()
    assert options.output_path("file")(str(tmp_path / "empty")) == tmp_path / "empty"  # a store to be
    assert options.output_path("file or folder")(str(tmp_path)) == tmp_path  # neuro trees --out


def test_a_renamed_option_in_a_config_file_still_applies_with_the_warning(tmp_path, capsys):
    from scimech.run.config import apply_config

    conf = tmp_path / "c.yaml"
    conf.write_text("model: qwen\nproposer: llm\n")
    argv = ["neuro", "study", "--config", str(conf), "--out", str(tmp_path / "o")]
    args = apply_config(build_parser(), argv, build_parser().parse_args(argv))
    assert args.llm_model == "qwen" and "--model is deprecated" in capsys.readouterr().err
    old = ["neuro", "discover", "--config", str(conf), "--out", str(tmp_path / "o")]  # an old command name too
    assert apply_config(build_parser(), old, build_parser().parse_args(old)).llm_model == "qwen"


def test_a_context_option_with_a_typed_string_default_is_compared_parsed():
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("--out", type=options.output_path(), default=str(SAMPLES / "x"))
    parser.add_argument("--data", default=None)
    options.needs(parser, "--out", lambda a: a.data is not None, "--data", ("--out", str(SAMPLES / "y")))
    assert options.refused_in_context(parser.parse_args([])) is None  # the default: not "given"
    assert options.refused_in_context(parser.parse_args(["--out", str(SAMPLES / "y")])) is not None
