"""Moved to :mod:`scimech.analysis.probe`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis import probe as _moved

warnings.warn(
    "scimech.probe moved to scimech.analysis.probe; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
