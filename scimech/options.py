"""Command-line options declared once with their constraint, checked before any work.

Each function returns an ``argparse`` *type*: a callable that converts the text a user typed
and raises :class:`argparse.ArgumentTypeError` when it breaks the constraint. argparse then
stops at once with one line and exit status 2, before any data is read or any model built::

    scimech ocean train: error: argument --epochs: must be a whole number >= 1. Got '-1' instead.

The constraint travels with the type (``.constraint``, ``.bad_examples``), so the tests can
drive every option of every command with values that must be refused
(``tests/scimech/test_options.py``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path

__all__ = ["whole", "number", "fraction", "existing_path", "device", "Option"]


class Option:
    """An argparse type with its constraint in words and values it must refuse."""

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
    """A path that exists (a file or a folder: zarr stores are folders)."""
    def convert(text: str):
        p = Path(text)
        return p if text.strip() and p.exists() else None

    return Option(convert, f"an existing {kind}", ("", "/no/such/path/anywhere"))


def _available(name: str) -> bool:
    import torch

    kind, _, index = name.partition(":")
    if kind == "cpu":
        return not index
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
                "Pass --device cpu, or run on a machine with that device.")
        return name

    return Option(convert, "a torch device: cpu, cuda, cuda:N, mps or auto", ("", "gpu", "cuda:x", "tpu", "cpu:0"))


def available_devices() -> list[str]:
    """The torch devices of this machine, by the names ``--device`` accepts."""
    import torch

    found = ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        found.append("mps")
    return found
