"""Moved to :mod:`scimech.capture.record`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import record as _moved

warnings.warn(
    "scimech.record moved to scimech.capture.record; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
