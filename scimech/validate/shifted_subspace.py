"""Moved to :mod:`scimech.studies.validate.shifted_subspace`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import shifted_subspace as _moved

warnings.warn(
    "scimech.validate.shifted_subspace moved to scimech.studies.validate.shifted_subspace; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
