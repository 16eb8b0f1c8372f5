"""Every option of every command is checked before any work: bad values end with one line
naming the option and its constraint, and exit status 2 (argparse's usage error).

The parser tree is walked (``scimech --help`` and every subcommand, the studies included), so a
new option declared with a :mod:`scimech.run.options` type is driven here without being listed."""

from __future__ import annotations

import argparse
import math
import socket
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scimech.cli.commands import build_parser
from scimech.run.options import Option


def _commands(parser: argparse.ArgumentParser, prefix=(), seen=None):
    """(argv prefix, parser) of every command and subcommand (an alias counts once)."""
    seen = set() if seen is None else seen
    seen.add(id(parser))
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    yield from _commands(sub, (*prefix, name), seen)


def _checked_options():
    out = []
    seen = set()
    for prefix, p in _commands(build_parser()):
        for a in p._actions:
            if isinstance(a.type, Option) and a.option_strings and (prefix, a.dest) not in seen:
                seen.add((prefix, a.dest))
                out.append((prefix, p, a))
    return out


OPTIONS = _checked_options()
REPO = Path(__file__).resolve().parents[2]


SAMPLES = Path(tempfile.mkdtemp(prefix="scimech-option-samples-"))


def _write_samples(root: Path) -> dict[str, Path]:
    """One small file (or folder) in each format an input option reads, by format name."""
    (root / "store.zarr").mkdir()
    (root / "store.zarr" / "zarr.json").write_text('{"zarr_format": 3, "node_type": "group"}')
    (root / "catalogue").mkdir()
    (root / "catalogue" / "catalog.fits").write_bytes(b"SIMPLE  =" + b" " * 71)
    files = {
        "netcdf": b"CDF\x01" + bytes(60),
        "fits": b"SIMPLE  =" + b" " * 71,
        "npz": b"PK\x03\x04" + bytes(30),
        "torch": b"PK\x03\x04" + bytes(30),
        "text": b"seeds: [0, 1]\n",
    }
    for name, data in files.items():
        (root / f"sample.{name}").write_bytes(data)
    np.save(root / "sample.npy", np.zeros(3))
    out = {name: root / f"sample.{name}" for name in files}
    (root / "cluster.toml").write_text('[cluster]\nkind = "local"\n')
    out.update(
        npy=root / "sample.npy", zarr=root / "store.zarr", folder=root / "catalogue", cluster=root / "cluster.toml"
    )
    return out


SAMPLE_FILES = _write_samples(SAMPLES)


def _good_input(a) -> str:
    """A path the input option ``a`` reads (the first sample its type accepts)."""
    for path in (*SAMPLE_FILES.values(), REPO):
        try:
            if a.type(str(path)) is not None:
                return str(path)
        except argparse.ArgumentTypeError:
            continue
    raise AssertionError(f"no sample file is accepted by {a.option_strings or a.dest}: {a.type.constraint}")


def _placeholder(a) -> str:
    """A value a required option accepts (a sample file for input options, a writable path for outputs)."""
    if isinstance(a.type, Option):
        if getattr(a.type, "formats", None) or "existing" in a.type.constraint:
            return _good_input(a)
        if getattr(a.type, "output", None):
            return str(SAMPLES / "out" / ("here" + (a.type.suffixes or ("",))[0]))
        return "3"
    return "placeholder"


def _argv(prefix, parser, action, value):
    """argv that sets ``action`` to ``value`` and every other required argument to a placeholder."""
    argv = list(prefix)
    for a in parser._actions:
        if a is action or isinstance(a, argparse._SubParsersAction):
            continue
        if a.required and a.option_strings:
            argv += [a.option_strings[0], _placeholder(a)]
        elif not a.option_strings and a.nargs is None:
            argv.append(_placeholder(a))
    n = action.nargs if isinstance(action.nargs, int) else 1
    return [*argv, f"{action.option_strings[0]}={value}"] if n == 1 else [*argv, action.option_strings[0], *[value] * n]


def _refused(prefix, parser, action, value, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(_argv(prefix, parser, action, value))
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2
    assert err[-1].startswith(f"scimech {' '.join(prefix)}: error: argument {action.option_strings[0]}"), err[-1]
    if isinstance(action.nargs, int) and action.nargs > 1 and value.startswith("-"):
        # argparse reads '-x' (not a negative number) after a multi-value option as the next option
        assert "expected" in err[-1] or action.type.constraint in err[-1]
    else:
        assert action.type.constraint in err[-1]


def test_every_numeric_option_of_every_command_is_declared():
    """No option of a study reads a bare int/float (those accept -1, 0 and nan silently)."""
    bare = [
        (" ".join(prefix), a.option_strings[0])
        for prefix, p in _commands(build_parser())
        for a in p._actions
        if a.type in (int, float)
    ]
    assert bare == []
    assert len(OPTIONS) >= 30  # ocean, astro, neuro, validate and the cluster options


@pytest.mark.parametrize(
    "prefix, parser, action", OPTIONS, ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, _, a in OPTIONS]
)
def test_bad_values_are_refused_with_the_constraint(prefix, parser, action, capsys):
    for bad in action.type.bad_examples:
        _refused(prefix, parser, action, bad, capsys)


WHOLE = [o for o in OPTIONS if o[2].type.constraint.startswith("a whole number")]
NUMBER = [o for o in OPTIONS if o[2].type.constraint.startswith("a finite number")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    option=st.sampled_from(WHOLE),
    value=st.one_of(
        st.integers(max_value=-1),
        st.floats().filter(lambda f: f != int(f) if math.isfinite(f) else True),
        st.text(alphabet="abc-.e ", min_size=1),
    ),
)
def test_whole_number_options_refuse_negatives_fractions_and_text(option, value, capsys):
    prefix, parser, action = option
    text = str(value)
    if set(text) <= {"-"}:  # argparse reads "--" as the end of the options, before any type sees it
        return
    try:
        ok = int(text.strip()) >= 0 and action.type(text) is not None
    except Exception:
        ok = False
    if not ok:
        _refused(prefix, parser, action, text, capsys)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(NUMBER), value=st.one_of(st.floats(max_value=0.0), st.just(math.nan), st.just(math.inf)))
def test_positive_number_options_refuse_zero_negatives_and_nan(option, value, capsys):
    prefix, parser, action = option
    _refused(prefix, parser, action, repr(value), capsys)


@pytest.mark.parametrize(
    "prefix, parser, action", OPTIONS, ids=[f"{' '.join(p)} {a.option_strings[0]}" for p, _, a in OPTIONS]
)
def test_a_good_value_parses(prefix, parser, action):
    if getattr(action.type, "formats", None) or "existing" in action.type.constraint:
        good = _good_input(action)
        args = build_parser().parse_args(_argv(prefix, parser, action, good))
        assert getattr(args, action.dest) == Path(good)
        return
    if getattr(action.type, "output", None):
        good = str(SAMPLES / "results" / ("run" + (action.type.suffixes or ("",))[0]))
        args = build_parser().parse_args(_argv(prefix, parser, action, good))
        assert getattr(args, action.dest) == Path(good) and not (SAMPLES / "results").exists()  # nothing created
        return
    if "scheduler" in action.type.constraint:  # an address that answers: a socket listening here
        with socket.create_server(("127.0.0.1", 0)) as server:
            good = f"tcp://127.0.0.1:{server.getsockname()[1]}"
            assert getattr(build_parser().parse_args(_argv(prefix, parser, action, good)), action.dest) == good
        return
    if "torch device" in action.type.constraint:
        assert getattr(build_parser().parse_args(_argv(prefix, parser, action, "cpu")), action.dest) == "cpu"
        return
    good = "0.5" if "fraction" in action.type.constraint or "<= 1" in action.type.constraint else "3"
    args = build_parser().parse_args(_argv(prefix, parser, action, good))
    value = getattr(args, action.dest)
    assert value == pytest.approx(float(good)) or value == [pytest.approx(float(good))] * len(value)
