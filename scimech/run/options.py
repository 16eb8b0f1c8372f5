"""Command-line options declared once with their constraint, checked before any work.

Two layers:

- **Types.** Each function below returns an ``argparse`` *type*: a callable that converts the
  text a user typed and raises :class:`argparse.ArgumentTypeError` when it breaks the
  constraint. argparse then stops at once with one line and exit status 2, before any data is
  read or any model built::

      scimech ocean train: error: argument --epochs: must be a whole number >= 1. Got '-1' instead.

  The constraint travels with the type (``.constraint``, ``.bad_examples``), so the tests can
  drive every option of every command with values that must be refused
  (``tests/scimech/test_options.py``). Paths are checked where they are parsed:
  :func:`output_path` writes a probe file where the output would go (a scratch folder on
  another node, a read-only project folder or a full quota fails here, not after the first
  hour), :func:`input_path` reads the first bytes of an input and names what it seems to be
  when it is not the format the option reads.
- **The shared vocabulary.** :data:`SHARED` declares the options every command spells the same
  way (``--out``, ``--data``, ``--config``, ``--size``, ``--seed``, ``--seeds``, ``--epochs``,
  ``--batch-size``, ``--device``, ``--dtype``, ``--workers`` ...), each with one meaning and one
  type; commands add them with :func:`add` and may narrow them (a default, the formats an input
  is read in, the sizes offered), never change their meaning. :func:`needs` declares an option
  that acts only in some context (``--held-out`` only with ``--data``): given elsewhere it is
  refused with one line naming what it needs (:func:`refused_in_context`).
  :func:`deprecated` keeps an old spelling for one release with a warning naming the new one and
  the release that removes the old one (:data:`REMOVED_IN`; CHANGELOG.md lists every one).
  :func:`vocabulary_table` is the table of ``docs/options.md``, generated from the declarations.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "whole",
    "number",
    "fraction",
    "existing_path",
    "device",
    "Option",
    "output_path",
    "input_path",
    "Format",
    "FORMATS",
    "seems",
    "SHARED",
    "SharedOption",
    "add",
    "needs",
    "Needs",
    "refused_in_context",
    "deprecated",
    "vocabulary_table",
    "needs_table",
    "SIZES",
    "add_study_options",
    "Use",
    "add_uses",
    "add_dry_run",
    "add_cluster_arguments",
    "REMOVED_IN",
    "removal_notice",
]

#: the release that removes the spellings deprecated in this one (old option spellings, old command
#: names, ``repeat=``); CHANGELOG.md's "Deprecated" entries name the same release
REMOVED_IN = "0.2.0"


def removal_notice(old: str, new: str) -> str:
    """One wording for every deprecated spelling: ``old`` is deprecated, removed in :data:`REMOVED_IN`."""
    return f"{old} is deprecated and will be removed in scimech {REMOVED_IN}; use {new}."


class Option:
    """An argparse type with its constraint in words and values it must refuse."""

    # set only by the factories that make one, so that `getattr(option, "output", None)` tells them apart
    output: str  # output_path: what is written there
    suffixes: tuple[str, ...]  # output_path: the name endings accepted
    formats: tuple[Format, ...]  # data_path: the formats accepted

    def __init__(self, convert: Callable[[str], object], constraint: str, bad_examples: tuple[str, ...]):
        self.convert, self.constraint, self.bad_examples = convert, constraint, bad_examples
        self.__name__ = constraint  # argparse names the type in some messages

    def __call__(self, text: str):
        try:
            value = self.convert(text)
        except (TypeError, ValueError):
            value = None
        if value is None:
            raise argparse.ArgumentTypeError(f"must be {self.constraint}. Got {text!r} instead.")
        return value

    def __repr__(self) -> str:
        return f"Option({self.constraint!r})"


def whole(minimum: int = 1, maximum: int | None = None) -> Option:
    """A whole number in ``[minimum, maximum]``."""

    def convert(text: str):
        v = int(text.strip())
        return v if v >= minimum and (maximum is None or v <= maximum) else None

    rng = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
    bad = (str(minimum - 1), "1.5", "nan", "", "two") + ((str(maximum + 1),) if maximum is not None else ())
    return Option(convert, f"a whole number {rng}", bad)


def number(minimum: float | None = 0.0, *, strict: bool = True, maximum: float | None = None) -> Option:
    """A finite real number above ``minimum`` (``strict``) or at least it, and at most ``maximum``."""

    def convert(text: str):
        v = float(text.strip())
        if not math.isfinite(v):
            return None
        if minimum is not None and (v <= minimum if strict else v < minimum):
            return None
        return v if maximum is None or v <= maximum else None

    if minimum is None:
        words = "a finite number"
    else:
        words = f"a finite number {'>' if strict else '>='} {minimum:g}"
    if maximum is not None:
        words += f" and <= {maximum:g}"
    bad = ("nan", "inf", "", "x") + ((f"{minimum - 1:g}",) if minimum is not None else ())
    return Option(convert, words, bad + ((str(maximum + 1),) if maximum is not None else ()))


def fraction() -> Option:
    """A share strictly between 0 and 1."""

    def convert(text: str):
        v = float(text.strip())
        return v if 0 < v < 1 else None

    return Option(convert, "a fraction between 0 and 1 (exclusive)", ("0", "1", "-0.2", "1.5", "nan", ""))


def existing_path(kind: str = "file or folder") -> Option:
    """A path that exists (a file or a folder: zarr stores are folders); ``kind="folder"``: a folder."""

    def convert(text: str):
        p = Path(text)
        if not (text.strip() and p.exists()):
            return None
        if kind == "folder" and not p.is_dir():
            raise argparse.ArgumentTypeError(f"{text!r} is {seems(p)}; expected an existing folder.")
        return p

    return Option(convert, f"an existing {kind}", ("", "/no/such/path/anywhere"))


def _available(name: str) -> bool:
    kind, _, index = name.partition(":")
    if kind == "cpu":  # every machine has one: no torch import while parsing
        return not index
    import torch

    if kind == "cuda":
        if not torch.cuda.is_available():
            return False
        return not index or int(index) < torch.cuda.device_count()
    if kind == "mps":
        return not index and bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return False


def device() -> Option:
    """A torch device this machine has: ``cpu``, ``cuda``, ``cuda:N`` or ``mps`` (``auto``: a GPU
    when there is one, else the CPU). A GPU asked for on a machine without one is refused at
    once, with the devices it has, instead of failing inside the first unit of work."""

    def convert(text: str):
        name = text.strip().lower()
        if name == "auto":
            import torch

            return "cuda" if torch.cuda.is_available() else "cpu"
        kind, _, index = name.partition(":")
        if kind not in ("cpu", "cuda", "mps") or (index and (kind != "cuda" or not index.isdigit())):
            return None
        if not _available(name):
            raise argparse.ArgumentTypeError(
                f"{text!r} is not on this machine (it has: {', '.join(available_devices())}). "
                "Pass --device cpu, or run on a machine with that device."
            )
        return name

    return Option(convert, "a torch device: cpu, cuda, cuda:N, mps or auto", ("", "gpu", "cuda:x", "tpu", "cpu:0"))


def available_devices() -> list[str]:
    """The torch devices of this machine, by the names ``--device`` accepts."""
    import torch

    found = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        found.append("mps")
    return found


# --- paths: checked where they are parsed --------------------------------------------------------

#: what a file or store written under each name ending is, by its format name in :data:`FORMATS`
WRITTEN = {".zarr": "zarr", ".nc": "netcdf", ".fits": "fits"}


def _replaceable(path: Path, text: str, suffixes: tuple[str, ...]) -> None:
    """A file or store the command writes: a name ending it writes, and nothing of another kind
    already there (writing a zarr store over a text file of that name would delete the file)."""
    suffix = path.suffix.lower()
    if suffix not in suffixes:
        raise argparse.ArgumentTypeError(
            f"{text!r} does not end in {' or '.join(suffixes)}: the name says what is "
            "written (e.g. runs/data" + suffixes[0] + ")."
        )
    if not path.exists():
        return
    fmt = WRITTEN.get(suffix)
    empty_folder = path.is_dir() and not any(path.iterdir())
    if fmt is not None and not FORMATS[fmt].test(path) and not (fmt == "zarr" and empty_folder):
        raise argparse.ArgumentTypeError(
            f"{text!r} exists and is {seems(path)}, not {FORMATS[fmt].words}: writing there would replace it. Remove "
            "it or choose another name."
        )


def output_path(kind: str = "folder", suffixes: tuple[str, ...] | None = None) -> Option:
    """A place the command can write: ``kind`` ``"folder"`` (a results folder), ``"file"`` (the one
    file or store the command writes) or ``"file or folder"``; ``suffixes``: the name endings of
    the file or store written (``(".zarr", ".nc")``), checked with what is already there.

    Checked without leaving anything behind: the nearest folder that exists on the way to it
    must be a folder, and a probe file must be writable there (then removed). Nothing is created
    while parsing, so ``--dry-run`` writes nothing."""
    constraint = f"a {kind} this machine can write" + (f" (ending in {' or '.join(suffixes)})" if suffixes else "")

    def convert(text: str):
        if not text.strip():
            return None
        path = Path(text).expanduser()
        if suffixes:
            _replaceable(path, text, suffixes)
        if kind == "folder" and path.is_file():
            raise argparse.ArgumentTypeError(f"{text!r} is a file; expected {constraint} (results go into it).")
        if kind == "file" and path.is_dir() and not _looks_like_store(path) and any(path.iterdir()):
            raise argparse.ArgumentTypeError(f"{text!r} is a folder; expected {constraint}.")
        base = path if path.is_dir() else path.parent
        while not base.exists() and base != base.parent:
            base = base.parent
        if not base.is_dir():
            raise argparse.ArgumentTypeError(f"cannot create {text!r}: {str(base)!r} is a file; expected {constraint}.")
        try:
            fd, probe = tempfile.mkstemp(prefix=".scimech-write-probe-", dir=base)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)
                os.unlink(probe)
        except OSError as err:
            raise argparse.ArgumentTypeError(
                f"cannot write to {text!r}: no file can be written in {str(base)!r} ({err.strerror or err}); "
                f"expected {constraint} (a scratch or home folder)."
            ) from None
        return path

    option = Option(convert, constraint, ("", "/proc/scimech-no-such-place/out" + (suffixes or ("",))[0]))
    option.output = kind
    option.suffixes = tuple(suffixes or ())
    return option


def _zarr_group(path: Path) -> bool:
    """A zarr group (what xarray opens as a dataset): v3 ``zarr.json`` of a group, or v2 ``.zgroup``;
    a lone array (``.zarray``) is not a dataset."""
    if not path.is_dir():
        return False
    if (path / ".zgroup").exists():
        return True
    try:
        return json.loads((path / "zarr.json").read_text()).get("node_type") == "group"
    except (OSError, ValueError, AttributeError):
        return False


def _looks_like_store(path: Path) -> bool:
    return any((path / name).exists() for name in ("zarr.json", ".zgroup", ".zarray"))


@dataclass(frozen=True)
class Format:
    """A format an input option reads: its name in words and a test on the path."""

    words: str
    test: Callable[[Path], bool]


def _head(path: Path, n: int = 512) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _magic(*prefixes: bytes) -> Callable[[Path], bool]:
    return lambda p: p.is_file() and _head(p).startswith(prefixes)


def _zip_members(p: Path) -> list[str] | None:
    """The member names of a zip file (``None``: not a readable zip)."""
    import zipfile

    try:
        with zipfile.ZipFile(p) as z:
            return z.namelist()
    except (OSError, zipfile.BadZipFile):
        return None


def _zip_with(suffix: str) -> Callable[[Path], bool]:
    """A zip whose members include one ending in ``suffix`` (torch: ``data.pkl``; NumPy: ``.npy``).
    A zip that cannot be read (a truncated header) passes, to be named by its reader."""

    def test(p: Path) -> bool:
        if not (p.is_file() and _head(p).startswith((b"PK\x03\x04", b"PK\x05\x06"))):
            return False
        names = _zip_members(p)
        return names is None or any(n.endswith(suffix) for n in names)

    return test


def _fits(p: Path) -> bool:
    """A FITS file, or one compressed with gzip or bzip2 (astropy reads ``.fits.gz`` and ``.fits.bz2``)."""
    if not p.is_file():
        return False
    head = _head(p, 16)
    if head.startswith(b"SIMPLE  ="):
        return True
    import bz2
    import gzip

    opener = gzip.open if head.startswith(b"\x1f\x8b") else bz2.open if head.startswith(b"BZh") else None
    if opener is None:
        return False
    try:
        with opener(p, "rb") as f:
            return f.read(9) == b"SIMPLE  ="
    except (OSError, EOFError):
        return False


def _safetensors(p: Path) -> bool:
    """A safetensors file: an 8-byte little-endian header length that fits the file, then its JSON header."""
    if not p.is_file():
        return False
    head = _head(p, 9)
    return len(head) == 9 and head[8:9] == b"{" and 8 + int.from_bytes(head[:8], "little") <= p.stat().st_size


def _text(p: Path) -> bool:
    if not p.is_file():
        return False
    head = _head(p, 4096)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:  # a multi-byte character cut at the end of the head is still text
        if err.start < len(head) - 4:
            return False
    return b"\x00" not in head


#: the formats inputs are read in, by name (``input_path("netcdf", "zarr")``)
FORMATS: dict[str, Format] = {
    "netcdf": Format("a netCDF file", _magic(b"CDF\x01", b"CDF\x02", b"CDF\x05", b"\x89HDF\r\n\x1a\n")),
    "zarr": Format("a zarr store (a folder with zarr.json or .zgroup)", lambda p: _zarr_group(p)),
    "fits": Format("a FITS file (.fits, .fits.gz, .fits.bz2)", _fits),
    "npy": Format("a NumPy .npy array", _magic(b"\x93NUMPY")),
    "npz": Format("a NumPy .npz archive", _zip_with(".npy")),
    "torch": Format("a torch checkpoint (.pt)", lambda p: _magic(b"\x80")(p) or _zip_with("data.pkl")(p)),
    "state": Format("a scimech state file (.safetensors)", lambda p: _safetensors(p)),
    "text": Format("a text file (YAML or TOML)", _text),
    "folder": Format("a folder", lambda p: p.is_dir()),
}


def seems(path: str | Path) -> str:
    """What ``path`` seems to be, in words, from its first bytes (for error messages)."""
    p = Path(path)
    if p.is_dir():
        if _zarr_group(p):
            return "a zarr store"
        return "a zarr array, not a store of variables" if _looks_like_store(p) else "a folder"
    if not p.exists():
        return "missing"
    head = _head(p)
    if not head:
        return "an empty file"
    for name in ("netcdf", "fits", "npy"):
        if FORMATS[name].test(p):
            return FORMATS[name].words
    if _safetensors(p):
        return "a safetensors file"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        names = _zip_members(p) or []
        if any(n.endswith("data.pkl") for n in names):
            return "a torch checkpoint"
        return "a NumPy .npz archive" if any(n.endswith(".npy") for n in names) else "a zip archive"
    if head.startswith(b"\x1f\x8b"):
        return "a gzip-compressed file"
    if head.startswith(b"\x80"):
        return "a Python pickle"
    if _text(p):
        first = head.decode("utf-8", "replace").strip().splitlines()
        return f"a text file starting {first[0][:40]!r}" if first else "a text file of blank lines"
    return "binary data of an unknown kind"


def input_path(*formats: str | Format) -> Option:
    """An existing input in one of ``formats`` (names of :data:`FORMATS`, or :class:`Format`
    objects a domain builds, e.g. "a folder holding catalog.fits"). The first bytes are read:
    a file that exists but is not one of them is refused with what it seems to be."""
    kinds = [FORMATS[f] if isinstance(f, str) else f for f in formats]
    words = " or ".join(k.words for k in kinds)

    def convert(text: str):
        p = Path(text).expanduser()
        if not text.strip():
            return None
        if not p.exists():
            raise argparse.ArgumentTypeError(f"{text!r} does not exist; expected {words}.")
        if not any(k.test(p) for k in kinds):
            raise argparse.ArgumentTypeError(f"{text!r} is not {words}: it seems to be {seems(p)}.")
        return p

    option = Option(convert, words, ("", "/no/such/path/anywhere"))
    option.formats = tuple(kinds)
    return option


# --- the shared vocabulary -----------------------------------------------------------------------

#: the sizes every study command takes (``--size``): quick (seconds to a few minutes, the demo and
#: the tests), medium (a verdict with usable intervals), full (the reference paper's sizes)
SIZES = ("quick", "medium", "full")
#: each size in the words of ``--help``: a command's help names only the sizes it offers
SIZE_WORDS = {"quick": "quick (minutes)", "medium": "medium (usable intervals)", "full": "full (the reference sizes)"}
DTYPES = ("float32", "bfloat16", "float16")


@dataclass(frozen=True)
class SharedOption:
    """One option of the shared vocabulary: its flag, its meaning (one sentence, the docs table)
    and how it is built (``build(**narrowing) -> add_argument keywords``)."""

    flag: str
    meaning: str
    build: Callable[..., dict]

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def cluster_file() -> Option:
    """A TOML / YAML file with a valid ``[cluster]`` section (its kind, keys and, for SLURM / PBS,
    cores and memory), read where it is parsed rather than when the first unit is submitted."""
    text_file = input_path("text")

    def convert(text: str):
        if not text.strip() or not Path(text).is_file():
            return None
        path = text_file(text)
        from scimech.errors import ConfigError
        from scimech.run.parallel import jobqueue_kwargs, read_cluster_config

        try:
            section = read_cluster_config(path)
            if section.get("kind", "local") in ("slurm", "pbs"):
                jobqueue_kwargs(section, section["kind"])
        except ConfigError as err:
            raise argparse.ArgumentTypeError(f"{text!r}: {' '.join(str(err).split())}") from None
        return path

    return Option(convert, "an existing TOML/YAML file with a [cluster] section", ("", "/no/such/cluster.toml"))


def scheduler_address() -> Option:
    """``tcp://host:port`` (or ``tls://``, or ``host:port``) of a Dask scheduler that answers now:
    a wrong address fails here in two seconds, not after Dask's 30 s connection timeout."""
    import re
    import socket

    def convert(text: str):
        m = re.fullmatch(r"(?i:(tcp|tls|ucx|ws|wss)://)?\[?([^\]/:]+|[0-9a-fA-F:]+)\]?:(\d{1,5})", text.strip())
        if not m:
            return None
        host, port = m.group(2), int(m.group(3))
        try:
            socket.create_connection((host, port), timeout=2.0).close()
        except OSError as err:
            raise argparse.ArgumentTypeError(
                f"no Dask scheduler answers at {text!r} ({err.strerror or err}). Start one (`dask scheduler`) and "
                "give the address it prints, or use --workers N for a local cluster."
            ) from None
        return text.strip() if m.group(1) else f"tcp://{text.strip()}"

    return Option(convert, "a Dask scheduler address: tcp://host:port", ("", "notanaddress", "tcp://host"))


class _Distinct(argparse.Action):
    """A list option whose values must differ (a seed given twice is the same run, not a replicate)."""

    def __call__(self, parser, namespace, values, option_string=None):
        repeated = sorted({v for v in values if list(values).count(v) > 1})
        if repeated:
            parser.error(
                f"argument {option_string}: {', '.join(map(str, repeated))} given twice; the values must "
                "differ (the same seed twice is the same run, not a replicate)"
            )
        setattr(namespace, self.dest, values)


def _out(kind: str = "folder", suffixes: tuple[str, ...] | None = None) -> dict:
    return dict(type=output_path(kind, suffixes), metavar="FOLDER" if kind == "folder" else "PATH")


def _inputs(formats: Sequence[str | Format] = ()) -> dict:
    return dict(type=input_path(*formats) if formats else existing_path(), metavar="PATH")


def _sizes(choices: Sequence[str] = SIZES) -> dict:
    return dict(choices=tuple(choices))


SHARED: dict[str, SharedOption] = {
    o.dest: o
    for o in (
        SharedOption(
            "--out",
            "where the command writes: its results folder (or the one file or store it writes); "
            "checked writable before any work",
            _out,
        ),
        SharedOption(
            "--data",
            "your data instead of the built-in synthetic world (the formats each command reads "
            "are checked before any work)",
            _inputs,
        ),
        SharedOption(
            "--config",
            "a YAML or TOML file of this command's option values keyed by option name; the command line wins over it",
            lambda: dict(type=input_path("text"), metavar="FILE"),
        ),
        SharedOption(
            "--size",
            "quick (minutes), medium (usable intervals) or full (the reference sizes); each size the "
            "command offers has a short form (--quick)",
            _sizes,
        ),
        SharedOption(
            "--seed",
            "one seed: of the synthetic data, the initialisation and every random draw",
            lambda: dict(type=whole(0), metavar="N"),
        ),
        SharedOption(
            "--seeds",
            "seed values, one run each (--seeds 0 1 2: three runs)",
            lambda: dict(type=whole(0), nargs="+", metavar="S", action=_Distinct),
        ),
        SharedOption(
            "--n-seeds",
            "how many seeds: --seed, --seed+1, ... (where a command numbers its runs from --seed)",
            lambda: dict(type=whole(1), metavar="N"),
        ),
        SharedOption("--epochs", "passes over the training data", lambda: dict(type=whole(1), metavar="N")),
        SharedOption("--batch-size", "samples per optimiser step", lambda: dict(type=whole(1), metavar="N")),
        SharedOption(
            "--device",
            "torch device of training and forward passes: cpu, cuda, cuda:N, mps or auto "
            "(refused at once where the machine lacks it)",
            lambda: dict(type=device(), metavar="DEVICE"),
        ),
        SharedOption(
            "--dtype",
            "floating-point type of the studied model's forward passes: float32, bfloat16 or float16",
            lambda: dict(choices=DTYPES),
        ),
        SharedOption(
            "--workers",
            "run units on a local Dask cluster of N worker processes (default: serial)",
            lambda: dict(type=whole(1), metavar="N"),
        ),
        SharedOption(
            "--cluster",
            "a TOML/YAML file with a [cluster] section (kind = local | slurm | pbs | threads | "
            "sync): units on that Dask cluster",
            lambda: dict(type=cluster_file(), metavar="CONFIG"),
        ),
        SharedOption(
            "--scheduler",
            "the address of a running Dask scheduler (tcp://host:8786)",
            lambda: dict(type=scheduler_address(), metavar="ADDRESS"),
        ),
        SharedOption(
            "--dry-run",
            "check the options and print what would run (units, sizes, estimated time); run and write nothing",
            lambda: dict(action="store_true"),
        ),
    )
}


def add(
    parser, name: str, *, context: str = "", default: Any = None, required: bool = False, **narrowing
) -> argparse.Action:
    """Add the shared option ``name`` (a key of :data:`SHARED`) to ``parser`` (or an argument group).

    ``context``: what it does in this command, appended to the shared meaning in ``--help``;
    ``default``: this command's default (a string default is checked by the option's type, as a
    typed value would be: a default output folder is probed too); ``narrowing``: what the
    declaration lets a command choose (``kind="file"`` for ``--out``, the formats of ``--data``,
    the ``choices`` of ``--size``). The meaning and type stay the shared ones. ``--size`` brings
    its short forms ``--quick`` / ``--medium`` / ``--full``.
    """
    spec = SHARED[name]
    kwargs = spec.build(**narrowing)
    meaning = _sizes_offered(kwargs["choices"]) if name == "size" else spec.meaning
    words = meaning + (f". {context}" if context else "")
    if name == "size":
        words += f" (short forms: {', '.join('--' + c for c in kwargs['choices'])})"
    if default is not None and kwargs.get("action") != "store_true":
        words += f" (default: {' '.join(map(str, default)) if isinstance(default, (list, tuple)) else default})"
    kwargs["help"] = words.replace("%", "%%")
    if kwargs.get("action") != "store_true":
        kwargs["default"] = default
    if required:
        kwargs["required"] = True
    action = parser.add_argument(spec.flag, **kwargs)
    action.shared = name  # the tests check that every shared flag comes from here
    if name == "size":
        for size in kwargs["choices"]:
            short = parser.add_argument(
                f"--{size}", dest="size", action="store_const", const=size, help=argparse.SUPPRESS
            )
            short.shared = name
    return action


def _sizes_offered(choices: Sequence[str]) -> str:
    """``--size``'s meaning in a command's help: the sizes it offers, and no other."""
    words = [SIZE_WORDS.get(c, c) for c in choices]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


@dataclass(frozen=True)
class Needs:
    """An option that acts only in some context: ``dest`` given (a value other than its default)
    while ``applies(args)`` is false is refused with ``need`` (what it needs, in words).
    ``example``: argv that must be refused (the option where it does nothing; the tests run each)."""

    prog: str
    flag: str
    dest: str
    default: Any
    applies: Callable[[argparse.Namespace], bool]
    need: str
    example: tuple[str, ...]


#: placeholders an example of :func:`needs` may hold for an input file of a format (``"{npy}"``)
EXAMPLE_FILES = tuple(f"{{{name}}}" for name in FORMATS)


def needs(
    parser: argparse.ArgumentParser,
    flag: str,
    applies: Callable[[argparse.Namespace], bool],
    need: str,
    example: Sequence[str],
) -> None:
    """Declare that ``flag`` of ``parser`` acts only when ``applies(args)``; elsewhere it is refused
    (``need``: e.g. ``"--data PATH (your traces)"``). ``example``: argv that must be refused: ``flag``
    with a good value, in a context where it does nothing (an input file is written as its format's
    placeholder, ``"{npy}"``, :data:`EXAMPLE_FILES`); the tests run every one."""
    action = next(a for a in parser._actions if flag in a.option_strings)
    default = action.default
    if isinstance(default, str) and callable(action.type):  # compared with parsed values: convert it as argparse does
        try:
            default = action.type(default)
        except (argparse.ArgumentTypeError, TypeError, ValueError):
            pass
    prior = list(parser.get_default("_needs") or [])
    prior.append(Needs(parser.prog, flag, action.dest, default, applies, need, tuple(example)))
    parser.set_defaults(_needs=prior)


def refused_in_context(args: argparse.Namespace, argv: Sequence[str] = ()) -> str | None:
    """The usage error for the first option given where it would do nothing, or ``None``: given
    means a value other than its default, or typed in ``argv`` (its default typed is given too)."""
    typed = {w.split("=", 1)[0] for w in argv if w.startswith("--")}
    for n in getattr(args, "_needs", None) or ():
        given = getattr(args, n.dest, n.default) != n.default or n.flag in typed
        if given and not n.applies(args):
            return f"{n.prog}: error: argument {n.flag}: does nothing here; it needs {n.need}."
    return None


class _Deprecated(argparse.Action):
    def __init__(self, option_strings, dest, new: str, nargs=None, **kwargs):
        self.deprecated_for = new  # also read by scimech.run.config: a config key with the old name still applies
        super().__init__(option_strings, dest, nargs=nargs, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"{parser.prog}: warning: {removal_notice(option_string, self.deprecated_for)}", file=sys.stderr)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def deprecated(parser, old: str, new: str, *, dest: str | None = None, nargs=None, const=None, type=None) -> None:
    """Keep ``old`` (a renamed option) for one release: it sets ``new``'s value, with a warning
    naming ``new``; hidden from ``--help``."""
    target = dest or new.split()[0].lstrip("-").replace("-", "_")
    kw = dict(nargs=nargs) if nargs is not None else {}
    if nargs == 0:
        kw["const"] = const
    parser.add_argument(
        old,
        dest=target,
        action=_Deprecated,
        new=new,
        type=type,
        help=argparse.SUPPRESS,
        default=argparse.SUPPRESS,
        **kw,
    )


def vocabulary_table(commands: Iterable[tuple[str, argparse.ArgumentParser]]) -> str:
    """The Markdown table of the shared options: flag, meaning, and the commands that take each
    (``commands``: ``(name, parser)`` pairs, e.g. every command of ``scimech``)."""
    users: dict[str, list[str]] = {k: [] for k in SHARED}
    for name, parser in commands:
        for a in parser._actions:
            shared = getattr(a, "shared", None)
            if shared and a.option_strings == [SHARED[shared].flag] and name not in users[shared]:
                users[shared].append(name)
    rows = ["| option | meaning | commands |", "|---|---|---|"]
    for key, spec in SHARED.items():
        meaning = spec.meaning.replace("|", "\\|")
        rows.append(f"| `{spec.flag}` | {meaning} | {', '.join(f'`{c}`' for c in users[key]) or '-'} |")
    return "\n".join(rows) + "\n"


def needs_table(commands: Iterable[tuple[str, argparse.ArgumentParser]]) -> str:
    """The Markdown table of the options that act only in some context (:func:`needs`), per command."""
    rows = ["| command | option | acts only with |", "|---|---|---|"]
    for name, parser in commands:
        for n in parser.get_default("_needs") or ():
            rows.append(f"| `{name}` | `{n.flag}` | {n.need} |")
    return "\n".join(rows) + "\n"


# --- the option groups every study command shares ------------------------------------------------


def add_cluster_arguments(parser) -> None:
    """Add ``--cluster CONFIG``, ``--scheduler ADDRESS`` and ``--workers N`` (one of them) to a
    command whose units run through :func:`scimech.run.parallel.map_units`."""
    group = parser.add_argument_group("execution (Dask; one of these, default: serial)").add_mutually_exclusive_group()
    for name in ("cluster", "scheduler", "workers"):
        add(group, name)


def add_dry_run(parser) -> None:
    """Add ``--dry-run`` to a study command: check the options, print the plan, write nothing."""
    add(parser, "dry_run")


def add_study_options(
    parser: argparse.ArgumentParser,
    *,
    out_default: str | None,
    data_help: str,
    default_size: str = "quick",
    config_keys: Mapping[str, str] | None = None,
    data_formats: Sequence[str | Format] = (),
) -> None:
    """Add the options every ``scimech <study> study`` command shares.

    ``--out`` (required when ``out_default`` is ``None``; probed for writing before any work),
    ``--config FILE``, ``--size`` (``quick`` | ``medium`` | ``full``; ``--quick``/``--medium``/
    ``--full`` are short forms), ``--data PATH`` (``data_formats``: the formats it is read in,
    checked on its first bytes), ``--device`` (refused at once when the machine lacks it),
    ``--cluster``/``--scheduler``/``--workers`` (one of them) and ``--dry-run``.
    ``config_keys``: ``{key: what it sets}`` a ``--config`` file may hold beyond the command's
    options (the study reads them from ``args.config_extra``).
    """
    g = parser.add_argument_group("study options (every study takes these)")
    add(g, "out", default=out_default, required=out_default is None, context="Resumable: finished units are kept")
    add(g, "config", context="e.g. `seeds: [0, 1]`, `workers: 4`")
    add(g, "size", default=default_size)
    add(g, "data", formats=tuple(data_formats), context=data_help)
    add(g, "device", default="cpu")
    add_cluster_arguments(parser)
    add_dry_run(parser)
    parser.set_defaults(config_extra={}, _config_keys=dict(config_keys or {}))


@dataclass(frozen=True)
class Use:
    """How a study uses an option of the shared vocabulary (:data:`SHARED`): what it does there
    (``context``, appended to the shared meaning in ``--help``), the study's ``default``, and
    ``one_of``: the options of a study with the same ``one_of`` label exclude each other
    (``--seeds`` or ``--n-seeds``: given together, refused)."""

    context: str = ""
    default: Any = None
    one_of: str = ""


#: the argument group of the shared options a study declares it uses (:func:`add_uses`)
USES_GROUP = "shared options, as this study uses them"


def add_uses(parser: argparse.ArgumentParser, uses: Mapping[str, str | Use]) -> None:
    """Add the options of the shared vocabulary a study uses, each with its meaning there.

    ``uses``: ``{name: context}`` or ``{name: Use(...)}``, ``name`` a key of :data:`SHARED`
    (``"seeds"``, ``"epochs"``, ``"dtype"``); the study's ``add_options`` then declares only
    the options that are its own. A name outside the vocabulary is refused, naming it.

    Examples
    --------
    >>> import argparse
    >>> from scimech.run.options import Use, add_uses
    >>> parser = argparse.ArgumentParser()
    >>> add_uses(parser, {"seeds": "Each seed trains every regime", "epochs": Use("Of the model", default=2)})
    >>> parser.parse_args(["--seeds", "0", "1"])
    Namespace(seeds=[0, 1], epochs=2)
    """
    unknown = sorted(set(uses) - set(SHARED))
    if unknown:
        raise ValueError(
            f"{', '.join(unknown)}: not in the shared vocabulary (scimech.run.options.SHARED: {', '.join(SHARED)})"
        )
    if not uses:
        return
    group = parser.add_argument_group(USES_GROUP)
    exclusive: dict[str, Any] = {}
    for name, use in uses.items():
        use = Use(use) if isinstance(use, str) else use
        if use.one_of and use.one_of not in exclusive:
            exclusive[use.one_of] = group.add_mutually_exclusive_group()
        add(exclusive.get(use.one_of, group), name, context=use.context, default=use.default)
