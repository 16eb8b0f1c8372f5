"""Moved to :mod:`scimech.run.config`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import config as _moved

warnings.warn(
    "scimech.config moved to scimech.run.config; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
