"""Progress bars for long work (tqdm), with one switch.

Whether a bar shows, first match wins:

1. the verb's own ``progress=True`` / ``False`` (where it takes one);
2. :func:`set_progress` (``scimech.set_progress(False)`` silences every bar, ``True`` shows them,
   ``None`` goes back to automatic);
3. the environment variable ``SCIMECH_QUIET=1`` (the test suite sets it): no bars;
4. automatic: bars only when standard error is a terminal, so logs and notebooks run by a
   script stay clean.

The sweeps (:func:`~scimech.causal.intervene.ablation_sweep`,
:func:`~scimech.causal.intervene.patching_sweep`), :func:`~scimech.causal.atp.attribution_patching`,
:func:`~scimech.analysis.probe.probe_sites`, dictionary training and the studies show one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

__all__ = ["progress", "quiet", "set_progress", "progress_enabled", "bar"]

T = TypeVar("T")

_switch: bool | None = None


def quiet() -> bool:
    """True when ``SCIMECH_QUIET`` asks for no progress output (``1``, ``true``)."""
    return os.environ.get("SCIMECH_QUIET", "0") not in ("", "0", "false", "False")


def set_progress(on: bool | None) -> None:
    """Show (``True``) or hide (``False``) every progress bar of scimech; ``None``: automatic.

    Parameters
    ----------
    on
        ``True``, ``False`` or ``None`` (automatic: no bars with ``SCIMECH_QUIET=1`` or when
        standard error is not a terminal). A verb's own ``progress=`` argument still wins.

    Examples
    --------
    >>> import scimech
    >>> scimech.set_progress(False)  # no bars, even in a terminal
    >>> scimech.set_progress(None)  # back to automatic
    """
    global _switch
    if on is not None and not isinstance(on, bool):
        raise TypeError(f"set_progress takes True, False or None; got {on!r}.")
    _switch = on


def progress_enabled(progress: bool | None = None) -> bool:
    """Whether a bar shows: ``progress`` if given, else :func:`set_progress`'s switch, else
    not with ``SCIMECH_QUIET=1``, else only when standard error is a terminal."""
    if progress is not None:
        return bool(progress)
    if _switch is not None:
        return _switch
    if quiet():
        return False
    return bool(getattr(sys.stderr, "isatty", lambda: False)())


def bar(total: int | None, desc: str, progress: bool | None = None, unit: str = "it") -> tqdm:
    """A progress bar to advance by hand (``.update(n)``; close it, or use it in ``with``)."""
    return tqdm(
        total=total, desc=desc, unit=unit, disable=not progress_enabled(progress), dynamic_ncols=True, leave=False
    )


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
    **kw
        Passed to tqdm; ``disable=True`` hides the bar whatever the switch says.
    """
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    disable = bool(kw.pop("disable", False)) or not progress_enabled(kw.pop("show", None))
    leave = kw.pop("leave", False)
    return iter(tqdm(iterable, desc=desc, total=total, disable=disable, dynamic_ncols=True, leave=leave, **kw))
