"""Moved to :mod:`scimech.studies.verdicts`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies import verdicts as _moved

warnings.warn(
    "scimech.verdicts moved to scimech.studies.verdicts; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
