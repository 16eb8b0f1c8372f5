"""Moved to :mod:`scimech.capture.calls`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import calls as _moved

warnings.warn(
    "scimech.calls moved to scimech.capture.calls; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
