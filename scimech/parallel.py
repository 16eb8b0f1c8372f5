"""Moved to :mod:`scimech.run.parallel`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import parallel as _moved

warnings.warn(
    "scimech.parallel moved to scimech.run.parallel; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
