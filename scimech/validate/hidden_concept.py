"""Moved to :mod:`scimech.studies.validate.hidden_concept`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import hidden_concept as _moved

warnings.warn(
    "scimech.validate.hidden_concept moved to scimech.studies.validate.hidden_concept; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
