"""Moved to :mod:`scimech.run.options`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import options as _moved

warnings.warn(
    "scimech.options moved to scimech.run.options; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
