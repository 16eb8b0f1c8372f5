"""scimech: mechanistic interpretability for scientific models.

The domain-agnostic core. Record activations at named sites of any ``torch.nn.Module``
(:mod:`scimech.record`), probe them (:mod:`scimech.probe`), ablate and patch them
(:mod:`scimech.intervene`), build concept bottlenecks (:mod:`scimech.concepts`), compare
representations (:mod:`scimech.geometry`), and save labelled results with provenance
(:mod:`scimech.results`). Domain studies live in the sibling packages ``ocean``,
``astro`` and ``neuro``; the core never imports them.
"""

from __future__ import annotations

import sys as _sys
import types as _types
import typing as _typing

try:
    from importlib.metadata import version as _version

    __version__ = _version("scimech")
except Exception:  # pragma: no cover
    __version__ = "0+unknown"

_LAZY = {
    # name: module
    "Recorder": "record", "record": "record", "stack_sites": "record",
    "ablate": "intervene", "patch": "intervene", "ablation_sweep": "intervene",
    "patching_sweep": "intervene",
    "attribution_patching": "atp", "ranking_agreement": "atp",
    "LinearProbe": "probe", "probe_sites": "probe",
    "ConceptLayer": "concepts", "ConceptBottleneck": "concepts",
    "linear_cka": "geometry", "procrustes_distance": "geometry", "principal_angles": "geometry",
    "bootstrap_ci": "stats",
    "attribute": "attribution",
    "save": "results", "load": "results", "UnitStore": "results",
    "Report": "report",
    "get_client": "parallel", "map_units": "parallel",
    "decompose_attention": "attention", "HeadLayout": "sites", "list_sites": "sites",
    "forward_pass": "calls", "FixedMesh": "samples",
    "profile": "model_profile", "ModelProfile": "model_profile",
}

_SUBMODULES = ("ablation", "atp", "attention", "attribution", "batches", "calls", "cli", "concepts", "config",
               "dictionary", "errors", "geometry", "hooks", "intervene", "layout", "metrics", "model_profile", "options",
               "parallel", "prefix_reuse", "probe", "progress", "record", "report", "results", "samples", "sites", "stats",
               "study", "sweep", "validate", "verdicts")

__all__ = ["__version__", *_LAZY]

if _typing.TYPE_CHECKING:  # what `sm.<name>` is, for type checkers and editors (imported lazily at run time)
    from .atp import attribution_patching as attribution_patching
    from .atp import ranking_agreement as ranking_agreement
    from .attention import decompose_attention as decompose_attention
    from .attribution import attribute as attribute
    from .calls import forward_pass as forward_pass
    from .concepts import ConceptBottleneck as ConceptBottleneck
    from .concepts import ConceptLayer as ConceptLayer
    from .geometry import linear_cka as linear_cka
    from .geometry import principal_angles as principal_angles
    from .geometry import procrustes_distance as procrustes_distance
    from .intervene import ablate as ablate
    from .intervene import ablation_sweep as ablation_sweep
    from .intervene import patch as patch
    from .intervene import patching_sweep as patching_sweep
    from .model_profile import ModelProfile as ModelProfile
    from .model_profile import profile as profile
    from .parallel import get_client as get_client
    from .parallel import map_units as map_units
    from .probe import LinearProbe as LinearProbe
    from .probe import probe_sites as probe_sites
    from .record import Recorder as Recorder
    from .record import record as record
    from .record import stack_sites as stack_sites
    from .report import Report as Report
    from .results import UnitStore as UnitStore
    from .results import load as load
    from .results import save as save
    from .samples import FixedMesh as FixedMesh
    from .sites import HeadLayout as HeadLayout
    from .sites import list_sites as list_sites
    from .stats import bootstrap_ci as bootstrap_ci


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(f".{_LAZY[name]}", __name__)
        value = getattr(mod, name)
        globals()[name] = value  # resolved once; later look-ups skip __getattr__
        return value
    if name in _SUBMODULES:  # `import scimech; scimech.metrics.logit_diff(...)` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'scimech' has no attribute {name!r}")


class _Package(_types.ModuleType):
    """The package keeps its API functions when a submodule of the same name is imported.

    The import system binds every imported submodule as an attribute of its package, so
    ``import scimech.record`` (done by any module that uses recording) would turn
    ``scimech.record`` from the function into the module. For the names of the API that are
    also submodule names, that binding is skipped: ``scimech.record`` is always the function,
    and the module stays reachable as ``sys.modules["scimech.record"]`` or by
    ``from scimech.record import ...``.
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _LAZY and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package
