"""Moved to :mod:`scimech.studies.validate.sparse_features`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import sparse_features as _moved

warnings.warn(
    "scimech.validate.sparse_features moved to scimech.studies.validate.sparse_features; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
