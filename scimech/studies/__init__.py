"""Studies: the Study contract (:mod:`scimech.studies.contract`), a study run from Python
(:func:`run_study`, :func:`plan_study`: :mod:`scimech.studies.running`), verdicts, reports, what a
reader read (``reading``), and planted-mechanism validation (:mod:`scimech.studies.validate`)."""

from __future__ import annotations

import typing as _typing

__all__ = ["run_study", "plan_study", "study_options", "StudyResult"]

_MODULES = ("contract", "reading", "report", "running", "validate", "verdicts")

if _typing.TYPE_CHECKING:
    from .running import StudyResult as StudyResult
    from .running import plan_study as plan_study
    from .running import run_study as run_study
    from .running import study_options as study_options


def __getattr__(name: str):
    import importlib

    if name in _MODULES:  # `scimech.studies.contract` without importing it first
        return importlib.import_module(f".{name}", __name__)
    if name in __all__:  # run_study and its kin, imported when first used
        return getattr(importlib.import_module(".running", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
