"""Moved to :mod:`scimech.causal.ablation`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.causal import ablation as _moved

warnings.warn(
    "scimech.ablation moved to scimech.causal.ablation; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
