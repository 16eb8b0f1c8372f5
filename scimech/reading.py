"""Moved to :mod:`scimech.studies.reading`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies import reading as _moved

warnings.warn(
    "scimech.reading moved to scimech.studies.reading; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
