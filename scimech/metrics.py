"""Moved to :mod:`scimech.causal.metrics`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import metrics as _moved

warnings.warn(
    "scimech.metrics moved to scimech.causal.metrics; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
