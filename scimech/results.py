"""Moved to :mod:`scimech.run.results`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import results as _moved

warnings.warn(
    "scimech.results moved to scimech.run.results; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
