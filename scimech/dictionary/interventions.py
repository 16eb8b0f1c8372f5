"""Moved to :mod:`scimech.analysis.dictionary.interventions`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import interventions as _moved

warnings.warn(
    "scimech.dictionary.interventions moved to scimech.analysis.dictionary.interventions; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
