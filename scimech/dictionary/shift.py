"""Moved to :mod:`scimech.analysis.dictionary.shift`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import shift as _moved

warnings.warn(
    "scimech.dictionary.shift moved to scimech.analysis.dictionary.shift; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
