"""Progress bars for long work (tqdm), quiet in tests and non-interactive logs on request.

Set ``SCIMECH_QUIET=1`` to silence every bar (the test suite does).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

__all__ = ["progress", "quiet"]

T = TypeVar("T")


def quiet() -> bool:
    """True when progress output is switched off (``SCIMECH_QUIET=1``)."""
    return os.environ.get("SCIMECH_QUIET", "0") not in ("", "0", "false", "False")


def progress(iterable: Iterable[T], desc: str | None = None, total: int | None = None, **kw) -> Iterator[T]:
    """Wrap an iterable in a progress bar.

    Parameters
    ----------
    iterable
        What to iterate over.
    desc
        Label shown before the bar, e.g. ``"training mixed seed 0"``.
    total
        Number of items when ``len(iterable)`` is unknown.
    """
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    disable = bool(kw.pop("disable", False)) or quiet()
    leave = kw.pop("leave", False)
    return iter(tqdm(iterable, desc=desc, total=total, disable=disable, dynamic_ncols=True, leave=leave, **kw))
