"""Moved to :mod:`scimech.capture.attention`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import attention as _moved

warnings.warn(
    "scimech.attention moved to scimech.capture.attention; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
