"""Moved to :mod:`scimech.studies.contract`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies import contract as _moved

warnings.warn(
    "scimech.study moved to scimech.studies.contract; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
