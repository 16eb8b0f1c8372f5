"""The module paths of scimech 0.1 that moved into subpackages (kept as shims until scimech 0.3.0).

A shim at an old path (``scimech/sites.py``) warns and puts the moved module in its place in
``sys.modules``, so the old name is the same module object. A shim package (``scimech/dictionary/``)
does the same, and :func:`keep_old_submodules` makes ``scimech.dictionary.saes`` load its own shim
file: otherwise Python would search the moved package's ``__path__`` and load a second copy of
``scimech.analysis.dictionary.saes`` under the old name.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class OldSubmodules(importlib.abc.MetaPathFinder):
    """Finds ``<prefix>.<name>`` in ``directory`` (the old package folder, holding the shims)."""

    def __init__(self, prefix: str, directory: str) -> None:
        self.prefix, self.directory = prefix, directory

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith(self.prefix + "."):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.directory])


def keep_old_submodules(prefix: str, directory: str) -> None:
    """Let ``import <prefix>.<name>`` find the shim ``directory/<name>.py`` (once per prefix)."""
    if not any(isinstance(f, OldSubmodules) and f.prefix == prefix for f in sys.meta_path):
        sys.meta_path.insert(0, OldSubmodules(prefix, directory))
