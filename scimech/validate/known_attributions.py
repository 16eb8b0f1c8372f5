"""Moved to :mod:`scimech.studies.validate.known_attributions`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import known_attributions as _moved

warnings.warn(
    "scimech.validate.known_attributions moved to scimech.studies.validate.known_attributions; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
