"""Moved to :mod:`scimech.capture.hooks`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import hooks as _moved

warnings.warn(
    "scimech.hooks moved to scimech.capture.hooks; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
