"""``--data`` and ``inspect`` given a product as it is distributed: several paths, a glob or a folder.

A domain's reader takes one path, a list of paths or a glob (``astro.data.catalog.read_legacy_survey``,
``neuro.data.from_traces``); these helpers let its command line say the same:

* :func:`data_takes_many`: ``--data PATH [PATH ...]``, one path kept as it is, several as a list, and a
  quoted glob (``--data 'dr10/sweep-*.fits'``) kept as the pattern when it matches paths in the option's
  formats;
* :func:`inspect_takes_many`: ``inspect PATH [PATH ...]`` the same way, with :func:`given` joining the
  first path and the rest.
"""

from __future__ import annotations

import argparse
import glob
from pathlib import Path

from .options import Option, input_path, seems

__all__ = ["OneOrMore", "glob_or_path", "data_takes_many", "inspect_takes_many", "given"]


class OneOrMore(argparse._StoreAction):
    """``PATH [PATH ...]``: one path kept as it is, several as a list."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values[0] if len(values) == 1 else list(values))


def _has_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


def glob_or_path(base: Option) -> Option:
    """``base`` (an input path of some formats) that also takes a glob: the pattern (a string) when it matches
    some paths, each in one of ``base``'s formats; a pattern that matches nothing, or a path of another kind,
    is refused naming it."""
    formats = tuple(getattr(base, "formats", ()))

    def convert(text: str):
        if Path(text).exists() or not _has_glob(text):
            return base.convert(text)
        found = sorted(Path(p) for p in glob.glob(text))
        if not found:
            raise argparse.ArgumentTypeError(f"no file or folder matches {text!r}; check the pattern.")
        other = [p for p in found if formats and not any(k.test(p) for k in formats)]
        if other:
            raise argparse.ArgumentTypeError(
                f"{text!r} matches {other[0]}, which is {seems(other[0])}, not "
                f"{' or '.join(k.words for k in formats)}; narrow the pattern."
            )
        return text

    option = Option(convert, base.constraint, base.bad_examples)  # the refusals of a path name the base's formats
    option.formats = formats
    return option


def data_takes_many(parser: argparse.ArgumentParser) -> None:
    """``--data`` of ``parser`` (added by :func:`scimech.run.options.add`) takes several paths or a glob."""
    action = next(a for a in parser._actions if a.dest == "data")
    base = action.type if isinstance(action.type, Option) else input_path()
    action.type, action.nargs, action.metavar = glob_or_path(base), "+", "PATH"
    action.__class__ = OneOrMore


def inspect_takes_many(parser: argparse.ArgumentParser, formats: tuple = ()) -> None:
    """``inspect PATH [PATH ...]``: the positional ``path`` takes a glob, and ``more`` the other paths."""
    base = input_path(*formats) if formats else None
    path = next(a for a in parser._actions if a.dest == "path")
    if base is not None:
        path.type = glob_or_path(base)
    elif isinstance(path.type, Option):
        path.type = glob_or_path(path.type)
    path.help = "the product: a file or store, a folder or a glob, as given to `study --data`"
    parser.add_argument(
        "more",
        nargs="*",
        type=path.type if path.type is not None else str,
        metavar="PATH",
        help="more files or folders of the same product",
    )


def given(first, more=None):
    """One path (as given), or a list of them: ``inspect``'s ``path`` and ``more`` joined."""
    more = list(more or [])
    return [first, *more] if more else first
