"""The module paths that moved, served by one alias table until scimech 0.3.0.

scimech 0.1 kept its modules flat (``scimech.sites``, ``scimech.study``, ``scimech.dictionary.saes``);
they now live in folders by concern (``scimech.capture.sites``, ...). No file remains at an old
path: :class:`OldPaths`, a finder on :data:`sys.meta_path` installed by ``import scimech``, reads
:data:`MOVED` and answers ``import scimech.sites`` with the module ``scimech.capture.sites`` itself
(the same object under both names, so a monkeypatch through the old path is seen by the new), with
one :class:`DeprecationWarning` naming the new path. A moved package's modules follow it
(``scimech.dictionary.saes`` is ``scimech.analysis.dictionary.saes``), and ``python -m <old path>``
runs the new module as a script.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import CodeType, ModuleType

#: the release that removes the old paths (CHANGELOG.md's "Deprecated" entry names the same)
REMOVED_IN = "0.3.0"

#: ``{old path under scimech: its new home}``: ``import scimech.metrics`` (and the attribute
#: ``scimech.metrics``) gives the module scimech.causal.metrics, with a DeprecationWarning, until
#: scimech 0.3.0. A key may be dotted (``run.cli``), and a moved package's submodules follow it.
MOVED = {
    "ablation": "causal.ablation",
    "atp": "causal.atp",
    "attention": "capture.attention",
    "attribution": "analysis.attribution",
    "batches": "capture.batches",
    "calls": "capture.calls",
    "concepts": "analysis.concepts",
    "config": "run.config",
    "dictionary": "analysis.dictionary",
    "fingerprint": "run.fingerprint",
    "geometry": "analysis.geometry",
    "hooks": "capture.hooks",
    "intervene": "causal.intervene",
    "layout": "capture.layout",
    "metrics": "causal.metrics",
    "model_profile": "causal.model_profile",  # the profile (capture.profile) and its table (capture.profiling)
    "options": "run.options",
    "parallel": "run.parallel",
    "prefix_reuse": "causal.prefix_reuse",
    "probe": "analysis.probe",
    "progress": "run.progress",
    "reading": "studies.reading",
    "record": "capture.record",
    "report": "studies.report",
    "results": "run.results",
    "run.cli": "cli.commands",
    "samples": "causal.samples",
    "sites": "capture.sites",
    "stats": "analysis.stats",
    "study": "studies.contract",
    "sweep": "causal.sweep",
    "validate": "studies.validate",
    "verdicts": "studies.verdicts",
}


def new_path(fullname: str) -> str | None:
    """The new path of the old module path ``fullname`` (``scimech.dictionary.saes`` ->
    ``scimech.analysis.dictionary.saes``), or ``None`` when it did not move."""
    if not fullname.startswith("scimech."):
        return None
    rest = fullname[len("scimech.") :]
    for old, new in MOVED.items():
        if rest == old or rest.startswith(old + "."):
            return f"scimech.{new}{rest[len(old) :]}"
    return None


def warn_moved(old: str, new: str, stacklevel: int = 2) -> None:
    """The one wording of the warning an old path gives."""
    warnings.warn(
        f"{old} moved to {new}; the old path will be removed in scimech {REMOVED_IN}",
        DeprecationWarning,
        stacklevel=stacklevel + 1,
    )


class AliasLoader(importlib.abc.Loader):
    """Loads an old path as the module at its new path."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return None  # a placeholder module, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        moved = importlib.import_module(self.new)
        # stacklevel 2 is the `import` statement: warnings skips importlib's own frames
        warn_moved(module.__name__, self.new)
        sys.modules[module.__name__] = moved  # the import statement returns what sys.modules holds

    def get_code(self, fullname: str) -> CodeType:
        """``python -m <old path>`` (runpy): warn, then run the new module as ``__main__``."""
        source = (
            "import runpy\n"
            "from scimech._moved import warn_moved\n"
            # stacklevel 0: the warning is scimech._moved's, shown under -W default (pytest), not on every run
            f"warn_moved({fullname!r}, {self.new!r}, stacklevel=0)\n"
            f"runpy.run_module({self.new!r}, run_name='__main__', alter_sys=True)\n"
        )
        return compile(source, f"<{fullname}: moved to {self.new}>", "exec")


class OldPaths:
    """The meta path finder of the old paths (importlib's MetaPathFinder protocol)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        try:
            found = importlib.util.find_spec(new)
        except (ModuleNotFoundError, ValueError):  # ValueError: a module in sys.modules without a spec
            found = None
        if found is None:  # no module there: the import fails as for any missing name
            return None
        return ModuleSpec(fullname, AliasLoader(new), origin=found.origin)


def install() -> None:
    """Put :class:`OldPaths` first on :data:`sys.meta_path` (once), so that it answers an old path
    before the path finder searches a moved package's folder for it."""
    if not any(isinstance(f, OldPaths) for f in sys.meta_path):
        sys.meta_path.insert(0, OldPaths())
