"""The module paths of scimech 0.1 that moved into subpackages (kept as shims until scimech 0.3.0).

A shim at an old path (``scimech/sites.py``) warns and puts the moved module in its place in
``sys.modules``, so the old name is the same module object. A shim package (``scimech/dictionary/``)
does the same, and :func:`keep_old_submodules` makes ``scimech.dictionary.saes`` load its own shim
file: otherwise Python would search the moved package's ``__path__`` and load a second copy of
``scimech.analysis.dictionary.saes`` under the old name.
"""

from __future__ import annotations

import importlib.machinery
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

#: ``{old module under scimech: its new home}``: ``scimech.metrics`` (an attribute of the package) still
#: gives the module scimech.causal.metrics, with a DeprecationWarning, until scimech 0.3.0
MOVED = {
    "ablation": "causal.ablation",
    "atp": "causal.atp",
    "attention": "capture.attention",
    "attribution": "analysis.attribution",
    "batches": "capture.batches",
    "calls": "capture.calls",
    "cli": "run.cli",
    "concepts": "analysis.concepts",
    "config": "run.config",
    "dictionary": "analysis.dictionary",
    "fingerprint": "run.fingerprint",
    "geometry": "analysis.geometry",
    "hooks": "capture.hooks",
    "intervene": "causal.intervene",
    "layout": "capture.layout",
    "metrics": "causal.metrics",
    "model_profile": "causal.model_profile",
    "options": "run.options",
    "parallel": "run.parallel",
    "prefix_reuse": "causal.prefix_reuse",
    "probe": "analysis.probe",
    "progress": "run.progress",
    "reading": "studies.reading",
    "record": "capture.record",
    "report": "studies.report",
    "results": "run.results",
    "samples": "causal.samples",
    "sites": "capture.sites",
    "stats": "analysis.stats",
    "study": "studies.contract",
    "sweep": "causal.sweep",
    "validate": "studies.validate",
    "verdicts": "studies.verdicts",
}


class OldSubmodules:  # a meta path finder (importlib.abc.MetaPathFinder's protocol, without importing it)
    """Finds ``<prefix>.<name>`` in ``directory`` (the old package folder, holding the shims)."""

    def __init__(self, prefix: str, directory: str) -> None:
        self.prefix, self.directory = prefix, directory

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not fullname.startswith(self.prefix + "."):
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.directory])


def keep_old_submodules(prefix: str, directory: str) -> None:
    """Let ``import <prefix>.<name>`` find the shim ``directory/<name>.py`` (once per prefix)."""
    if not any(isinstance(f, OldSubmodules) and f.prefix == prefix for f in sys.meta_path):
        sys.meta_path.insert(0, OldSubmodules(prefix, directory))
