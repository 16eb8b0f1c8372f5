"""Moved to :mod:`scimech.analysis.geometry`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis import geometry as _moved

warnings.warn(
    "scimech.geometry moved to scimech.analysis.geometry; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
