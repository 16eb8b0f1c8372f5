"""Moved to :mod:`scimech.analysis.concepts`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis import concepts as _moved

warnings.warn(
    "scimech.concepts moved to scimech.analysis.concepts; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
