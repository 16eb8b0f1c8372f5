"""Moved to :mod:`scimech.analysis.dictionary.saes`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.analysis.dictionary import saes as _moved

warnings.warn(
    "scimech.dictionary.saes moved to scimech.analysis.dictionary.saes; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
