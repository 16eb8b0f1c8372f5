"""Moved to :mod:`scimech.causal.model_profile`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import model_profile as _moved

warnings.warn(
    "scimech.model_profile moved to scimech.causal.model_profile; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
