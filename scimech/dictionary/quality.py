"""Moved to :mod:`scimech.analysis.dictionary.quality`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import quality as _moved

warnings.warn(
    "scimech.dictionary.quality moved to scimech.analysis.dictionary.quality; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
