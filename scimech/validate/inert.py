"""Moved to :mod:`scimech.studies.validate.inert`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import inert as _moved

warnings.warn(
    "scimech.validate.inert moved to scimech.studies.validate.inert; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
