"""Moved to :mod:`scimech.studies.report`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies import report as _moved

warnings.warn(
    "scimech.report moved to scimech.studies.report; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
