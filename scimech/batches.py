"""Moved to :mod:`scimech.capture.batches`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.capture import batches as _moved

warnings.warn(
    "scimech.batches moved to scimech.capture.batches; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
