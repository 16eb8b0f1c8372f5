"""scimech: mechanistic interpretability for scientific models.

The domain-agnostic core, in subpackages by concern: :mod:`scimech.capture` (named sites,
layouts, hooks, ``record`` -> xarray, the model profile and the verb session), :mod:`scimech.causal`
(ablation and patching, the sweeps, attribution patching), :mod:`scimech.analysis` (probes, concept
bottlenecks, geometry, statistics, sparse dictionaries), :mod:`scimech.studies` (the Study
contract, verdicts, reports, planted-mechanism validation) and :mod:`scimech.run` (Dask, options,
config, labelled results with provenance), with :mod:`scimech.cli` (the ``scimech`` command) on top.
``import scimech as sm`` gives the verbs (``sm.record``, ``sm.ablate``, ...), imported lazily;
``dir(sm)`` lists them. Domain studies live in the sibling packages ``ocean``, ``astro`` and
``neuro``; the core never imports them. The module paths of scimech 0.1 (``scimech.sites``,
``scimech.study``, ...) are served by one alias table (:mod:`scimech._moved`) until scimech 0.3.0.
"""

from __future__ import annotations

import sys as _sys
import types as _types
import typing as _typing

from ._moved import install as _install_old_paths
from ._moved import moved_attribute as _moved_attribute

_install_old_paths()  # `import scimech.sites` (a path of scimech 0.1): scimech.capture.sites, with a warning

try:
    from importlib.metadata import version as _version

    __version__ = _version("scimech")
except Exception:  # pragma: no cover
    __version__ = "0+unknown"

_LAZY = {
    # name: module
    "Recorder": "capture.record",
    "record": "capture.record",
    "stack_sites": "capture.record",
    "ablate": "causal.intervene",
    "patch": "causal.intervene",
    "ablation_sweep": "causal.intervene",
    "patching_sweep": "causal.intervene",
    "attribution_patching": "causal.atp",
    "ranking_agreement": "causal.atp",
    "LinearProbe": "analysis.probe",
    "probe_sites": "analysis.probe",
    "ConceptLayer": "analysis.concepts",
    "ConceptBottleneck": "analysis.concepts",
    "linear_cka": "analysis.geometry",
    "procrustes_distance": "analysis.geometry",
    "principal_angles": "analysis.geometry",
    "bootstrap_ci": "analysis.stats",
    "attribute": "analysis.attribution",
    "save": "run.results",
    "load": "run.results",
    "UnitStore": "run.results",
    "Report": "studies.report",
    "get_client": "run.parallel",
    "map_units": "run.parallel",
    "decompose_attention": "capture.attention",
    "HeadLayout": "capture.sites",
    "list_sites": "capture.sites",
    "forward_pass": "capture.calls",
    "FixedMesh": "causal.samples",
    "profile": "capture.profiling",
    "ModelProfile": "capture.profile",
    "show_versions": "run.versions",
    "set_progress": "run.progress",
    "layer_head_map": "analysis.plots",
    "probe_curve": "analysis.plots",
    "feature_vs_variable": "analysis.plots",
}

_SUBPACKAGES = ("analysis", "capture", "causal", "cli", "errors", "run", "studies")

__all__ = ["__version__", *_LAZY]

if _typing.TYPE_CHECKING:  # what `sm.<name>` is, for type checkers and editors (imported lazily at run time)
    from .analysis.attribution import attribute as attribute
    from .analysis.concepts import ConceptBottleneck as ConceptBottleneck
    from .analysis.concepts import ConceptLayer as ConceptLayer
    from .analysis.geometry import linear_cka as linear_cka
    from .analysis.geometry import principal_angles as principal_angles
    from .analysis.geometry import procrustes_distance as procrustes_distance
    from .analysis.plots import feature_vs_variable as feature_vs_variable
    from .analysis.plots import layer_head_map as layer_head_map
    from .analysis.plots import probe_curve as probe_curve
    from .analysis.probe import LinearProbe as LinearProbe
    from .analysis.probe import probe_sites as probe_sites
    from .analysis.stats import bootstrap_ci as bootstrap_ci
    from .capture.attention import decompose_attention as decompose_attention
    from .capture.calls import forward_pass as forward_pass
    from .capture.profile import ModelProfile as ModelProfile
    from .capture.profiling import profile as profile
    from .capture.record import Recorder as Recorder
    from .capture.record import record as record
    from .capture.record import stack_sites as stack_sites
    from .capture.sites import HeadLayout as HeadLayout
    from .capture.sites import list_sites as list_sites
    from .causal.atp import attribution_patching as attribution_patching
    from .causal.atp import ranking_agreement as ranking_agreement
    from .causal.intervene import ablate as ablate
    from .causal.intervene import ablation_sweep as ablation_sweep
    from .causal.intervene import patch as patch
    from .causal.intervene import patching_sweep as patching_sweep
    from .causal.samples import FixedMesh as FixedMesh
    from .run.parallel import get_client as get_client
    from .run.parallel import map_units as map_units
    from .run.progress import set_progress as set_progress
    from .run.results import UnitStore as UnitStore
    from .run.results import load as load
    from .run.results import save as save
    from .run.versions import show_versions as show_versions
    from .studies.report import Report as Report


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(f".{_LAZY[name]}", __name__)
        value = getattr(mod, name)
        globals()[name] = value  # resolved once; later look-ups skip __getattr__
        return value
    if name in _SUBPACKAGES:  # `import scimech; scimech.causal.metrics.logit_diff(...)` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    moved = _moved_attribute(__name__, name)  # `scimech.metrics`: the moved module, with its old path's warning
    if moved is not None:
        return moved
    raise AttributeError(f"module 'scimech' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API and the subpackages (``dir(sm)``, tab completion in IPython and Jupyter)."""
    return sorted({*__all__, *_SUBPACKAGES})


class _Package(_types.ModuleType):
    """The package keeps its API functions when a submodule of the same name is imported.

    The import system binds every imported submodule as an attribute of its package, so
    ``import scimech.record`` (the old path of :mod:`scimech.capture.record`, a shim until
    scimech 0.3.0) would turn ``scimech.record`` from the function into the module. For the names of the API that are
    also submodule names, that binding is skipped: ``scimech.record`` is always the function,
    and the module is :mod:`scimech.capture.record`.
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
