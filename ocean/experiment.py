"""The OceanCBM study's Python interface in one import (``from ocean import experiment``).

The study lives in one module per step (:mod:`ocean.study` says which); this module gathers
the names scripts and notebooks call: :class:`StudyConfig` and :func:`load_config`
(:mod:`ocean.plan`), :func:`train_unit` and :func:`budget_weights` (:mod:`ocean.training`),
:func:`prepare_data`, :func:`study_fingerprint` and :func:`run_units` (:mod:`ocean.run`),
:func:`analyse` and :data:`SEASONS` (:mod:`ocean.evidence`), :func:`ocean_competence` and
:func:`yardstick_forecasts` (:mod:`ocean.competence`: the model against climatology, persistence and
damped persistence). ``run_study``, the old name of :func:`run_units`, is served with a
DeprecationWarning until scimech 0.3.0 (the whole study from Python is :func:`ocean.run_study`).
"""

from __future__ import annotations

from scimech._moved import warn_moved

from .competence import ocean_competence, yardstick_forecasts
from .evidence import SEASONS, analyse
from .plan import StudyConfig, load_config
from .run import prepare_data, run_units, study_fingerprint
from .training import budget_weights, train_unit

__all__ = [
    "StudyConfig",
    "load_config",
    "prepare_data",
    "study_fingerprint",
    "train_unit",
    "run_units",
    "analyse",
    "SEASONS",
    "budget_weights",
    "ocean_competence",
    "yardstick_forecasts",
]


def __getattr__(name: str):
    if name == "run_study":  # the unit runner's old name
        warn_moved(f"{__name__}.run_study", f"{__name__}.run_units")
        return run_units
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
