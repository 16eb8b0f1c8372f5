"""Moved to :mod:`scimech.analysis.attribution`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis import attribution as _moved

warnings.warn(
    "scimech.attribution moved to scimech.analysis.attribution; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
