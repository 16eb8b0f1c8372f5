"""Moved to :mod:`scimech.capture.layout`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import layout as _moved

warnings.warn(
    "scimech.layout moved to scimech.capture.layout; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
