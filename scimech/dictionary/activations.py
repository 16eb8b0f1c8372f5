"""Moved to :mod:`scimech.analysis.dictionary.activations`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import activations as _moved

warnings.warn(
    "scimech.dictionary.activations moved to scimech.analysis.dictionary.activations; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
