"""The OceanCBM study's Python interface in one import (``from ocean import experiment``).

The study lives in one module per step (:mod:`ocean.study` says which); this module gathers
the names scripts and notebooks call: :class:`StudyConfig` and :func:`load_config`
(:mod:`ocean.plan`), :func:`train_unit` and :func:`budget_weights` (:mod:`ocean.training`),
:func:`prepare_data`, :func:`study_fingerprint` and :func:`run_study` (:mod:`ocean.run`),
:func:`analyse` and :data:`SEASONS` (:mod:`ocean.evidence`), :func:`ocean_competence` and
:func:`yardstick_forecasts` (:mod:`ocean.competence`: the model against climatology, persistence and
damped persistence).
"""

from __future__ import annotations

from .competence import ocean_competence, yardstick_forecasts
from .evidence import SEASONS, analyse
from .plan import StudyConfig, load_config
from .run import prepare_data, run_study, study_fingerprint
from .training import budget_weights, train_unit

__all__ = [
    "StudyConfig",
    "load_config",
    "prepare_data",
    "study_fingerprint",
    "train_unit",
    "run_study",
    "analyse",
    "SEASONS",
    "budget_weights",
    "ocean_competence",
    "yardstick_forecasts",
]
