"""Moved to :mod:`scimech.analysis.dictionary.cli`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import cli as _moved

warnings.warn(
    "scimech.dictionary.cli moved to scimech.analysis.dictionary.cli; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
