"""Moved to :mod:`scimech.run.fingerprint`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.run import fingerprint as _moved

warnings.warn(
    "scimech.fingerprint moved to scimech.run.fingerprint; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
