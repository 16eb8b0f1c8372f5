"""Moved to :mod:`scimech.run.progress`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import progress as _moved

warnings.warn(
    "scimech.progress moved to scimech.run.progress; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
