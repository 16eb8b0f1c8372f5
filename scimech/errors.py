"""Exceptions raised by scimech.

Every error subclasses the builtin it refines, so callers can catch either the
scimech class or the builtin (``except KeyError`` still catches a missing site).
Messages say what was expected, what was got, and how to fix it.
"""

from __future__ import annotations

__all__ = [
    "ScimechError",
    "SiteNotFoundError",
    "SiteCalledTwiceError",
    "SiteNeverRanError",
    "HeadLayoutError",
    "DataValidationError",
    "MissingVariableError",
    "UnitsError",
    "DimensionError",
    "CheckpointError",
    "ConfigError",
    "NotFittedError",  # noqa: F822 - scikit-learn's, resolved lazily by __getattr__
]


def __getattr__(name: str):
    # scikit-learn's NotFittedError, re-exported lazily: importing scikit-learn costs seconds,
    # and every module of scimech imports this one
    if name == "NotFittedError":
        from sklearn.exceptions import NotFittedError

        return NotFittedError
    raise AttributeError(f"module 'scimech.errors' has no attribute {name!r}")


class ScimechError(Exception):
    """Base class of every error scimech raises on purpose."""


class SiteNotFoundError(ScimechError, KeyError):
    """A site name does not match any module of the model."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class SiteCalledTwiceError(ScimechError, RuntimeError):
    """A recorded module ran more than once in one forward pass under ``repeat='error'``."""


class SiteNeverRanError(ScimechError, RuntimeError):
    """A site's module never ran in a forward pass, so nothing was recorded or changed there."""


class HeadLayoutError(ScimechError, ValueError):
    """A head selector was used on a module whose per-head layout is unknown or inconsistent."""


class DataValidationError(ScimechError, ValueError):
    """Input data break a documented contract (NaNs, empty, non-monotonic time, ...)."""


class MissingVariableError(DataValidationError, KeyError):
    """A required variable is absent from a dataset."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class UnitsError(DataValidationError):
    """A variable carries units other than the expected ones."""


class DimensionError(DataValidationError):
    """A variable has dims other than the expected ones."""


class CheckpointError(ScimechError, ValueError):
    """A checkpoint or saved result is missing, partial or corrupt."""


class ConfigError(ScimechError, ValueError):
    """A configuration file or mapping has unknown keys or invalid values."""
