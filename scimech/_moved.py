"""The module paths that moved, served by one alias table per package until scimech 0.3.0.

scimech 0.1 kept its modules flat (``scimech.sites``, ``scimech.study``, ``scimech.dictionary.saes``);
they now live in folders by concern (``scimech.capture.sites``, ...). The ocean study's data layer
(``ocean.stores``, ``ocean.products``, ...) is now the subpackage :mod:`ocean.data`, and the neuro
study's (``neuro.reader``, ``neuro.store``, ...) the subpackage :mod:`neuro.data`, and the astro
study's (``astro.catalog``, ``astro.split``, ...) the subpackage :mod:`astro.data`. No file remains at
an old path: :class:`OldPaths`, a finder on :data:`sys.meta_path` installed by ``import scimech``,
``import ocean``, ``import neuro`` and ``import astro``, reads :data:`TABLES` (:data:`MOVED` for scimech,
:data:`OCEAN_MOVED` for ocean, :data:`NEURO_MOVED` for neuro, :data:`ASTRO_MOVED` for astro) and
answers ``import scimech.sites`` with the module ``scimech.capture.sites`` itself (the same object
under both names, so a monkeypatch through the old path is seen by the new), with one
:class:`DeprecationWarning` naming the new path. A moved package's modules follow it
(``scimech.dictionary.saes`` is ``scimech.analysis.dictionary.saes``), ``python -m <old path>``
runs the new module as a script, and a package's ``__getattr__`` gives a moved module as an
attribute (``ocean.products``) through :func:`moved_attribute`.
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

#: ``{old path under ocean: its new home}``: the data layer, now the subpackage :mod:`ocean.data`
#: (``import ocean.stores`` gives the module ocean.data.stores, with a DeprecationWarning, until 0.3.0)
OCEAN_MOVED = {
    "files": "data.files",
    "gridaxes": "data.gridaxes",
    "products": "data.products",
    "reading": "data.reading",
    "samples": "data.samples",
    "splits": "data.splits",
    "stores": "data.stores",
    "timeaxis": "data.timeaxis",
    "validation": "data.validation",
}

#: ``{old path under neuro: its new home}``: the recording's data layer, now the subpackage :mod:`neuro.data`
#: (``import neuro.reader`` gives the module neuro.data.reading, with a DeprecationWarning, until 0.3.0);
#: the names of the old module ``neuro.data`` itself (``from neuro.data import from_traces``) are the
#: package's own
NEURO_MOVED = {
    "reader": "data.reading",
    "store": "data.stores",
    "suite2p": "data.suite2p",
    "taskstore": "data.taskstore",
    "zapbench": "data.zapbench",
}

#: ``{old path under astro: its new home}``: the galaxies' data layer, now the subpackage :mod:`astro.data`
#: (``import astro.catalog`` gives the module astro.data.catalog, with a DeprecationWarning, until 0.3.0);
#: the split by object under the role name the other studies use (``astro.split`` -> ``astro.data.splits``)
ASTRO_MOVED = {
    "catalog": "data.catalog",
    "cutout_folder": "data.cutout_folder",
    "cutouts": "data.cutouts",
    "files": "data.files",
    "split": "data.splits",
    "sweeps": "data.sweeps",
}

#: ``{package: its table}``: every package whose modules moved, each served by :class:`OldPaths`
TABLES = {"scimech": MOVED, "ocean": OCEAN_MOVED, "neuro": NEURO_MOVED, "astro": ASTRO_MOVED}


def new_path(fullname: str) -> str | None:
    """The new path of the old module path ``fullname`` (``scimech.dictionary.saes`` ->
    ``scimech.analysis.dictionary.saes``, ``ocean.stores`` -> ``ocean.data.stores``), or ``None``
    when it did not move."""
    package, _, rest = fullname.partition(".")
    for old, new in TABLES.get(package, {}).items() if rest else ():
        if rest == old or rest.startswith(old + "."):
            return f"{package}.{new}{rest[len(old) :]}"
    return None


def old_path(module: str) -> str:
    """The old path of the module ``module`` when it moved (``scimech.studies.reading`` ->
    ``scimech.reading``, ``ocean.data.stores.x`` -> ``ocean.stores.x``), else ``module`` itself."""
    package, _, rest = module.partition(".")
    for old, new in TABLES.get(package, {}).items() if rest else ():
        if rest == new or rest.startswith(new + "."):
            return f"{package}.{old}{rest[len(new) :]}"
    return module


def moved_attribute(package: str, name: str) -> ModuleType | None:
    """The module an old path names as an attribute of its package (``scimech.metrics``,
    ``ocean.products``), imported, with the warning of its old path; ``None`` when ``name`` did
    not move. A package's ``__getattr__`` calls it (the warning points at the caller's line); the
    module is then bound to the package, as an import statement binds it, so one old name warns once."""
    new = TABLES.get(package, {}).get(name)
    if new is None:
        return None
    warn_moved(f"{package}.{name}", f"{package}.{new}", stacklevel=3)
    module = importlib.import_module(f"{package}.{new}")
    setattr(sys.modules[package], name, module)
    return module


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
