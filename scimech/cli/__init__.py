"""The ``scimech`` command, on top of the core: it may import every folder below it.

``scimech demo``, ``scimech validate``, ``scimech dictionary ...``, ``scimech versions`` and one
command per installed study (``scimech ocean ...``); :mod:`scimech.cli.commands` builds the parser
and runs them. ``python -m scimech`` is the same command. :func:`main` and :func:`build_parser`
are imported when first used, so ``import scimech.cli`` costs nothing.
"""

from __future__ import annotations

import typing as _typing

__all__ = ["main", "build_parser"]

if _typing.TYPE_CHECKING:
    from .commands import build_parser as build_parser
    from .commands import main as main


def __getattr__(name: str):
    if name in __all__:
        from . import commands

        return getattr(commands, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
