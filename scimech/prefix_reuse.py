"""Moved to :mod:`scimech.causal.prefix_reuse`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import prefix_reuse as _moved

warnings.warn(
    "scimech.prefix_reuse moved to scimech.causal.prefix_reuse; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
