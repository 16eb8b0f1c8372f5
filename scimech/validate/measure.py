"""Moved to :mod:`scimech.studies.validate.measure`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import measure as _moved

warnings.warn(
    "scimech.validate.measure moved to scimech.studies.validate.measure; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
