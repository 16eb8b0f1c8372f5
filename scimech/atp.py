"""Moved to :mod:`scimech.causal.atp`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import atp as _moved

warnings.warn(
    "scimech.atp moved to scimech.causal.atp; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
