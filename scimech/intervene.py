"""Moved to :mod:`scimech.causal.intervene`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import intervene as _moved

warnings.warn(
    "scimech.intervene moved to scimech.causal.intervene; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
