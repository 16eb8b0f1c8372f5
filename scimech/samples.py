"""Moved to :mod:`scimech.causal.samples`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import samples as _moved

warnings.warn(
    "scimech.samples moved to scimech.causal.samples; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
