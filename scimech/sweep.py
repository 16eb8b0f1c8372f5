"""Moved to :mod:`scimech.causal.sweep`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import sweep as _moved

warnings.warn(
    "scimech.sweep moved to scimech.causal.sweep; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
