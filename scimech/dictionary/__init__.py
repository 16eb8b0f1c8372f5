"""Moved to :mod:`scimech.analysis.dictionary`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech._moved import keep_old_submodules
from scimech.analysis import dictionary as _moved

warnings.warn(
    "scimech.dictionary moved to scimech.analysis.dictionary; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
keep_old_submodules(__name__, __path__[0])  # scimech.dictionary.<module> finds its shim too
sys.modules[__name__] = _moved
