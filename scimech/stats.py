"""Moved to :mod:`scimech.analysis.stats`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis import stats as _moved

warnings.warn(
    "scimech.stats moved to scimech.analysis.stats; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
