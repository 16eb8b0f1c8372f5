"""Moved to :mod:`scimech.capture.sites`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import sites as _moved

warnings.warn(
    "scimech.sites moved to scimech.capture.sites; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
