"""Moved to :mod:`scimech.studies.validate.suite`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import suite as _moved

warnings.warn(
    "scimech.validate.suite moved to scimech.studies.validate.suite; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
