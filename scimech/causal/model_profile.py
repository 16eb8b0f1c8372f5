"""The model profile's old home: it lives in :mod:`scimech.capture.profile`, below both capture
and causal, which both use it (every name importable from here as before)."""

from scimech.capture.profile import *  # noqa: F403 - re-exported: the profile's old import path
from scimech.capture.profile import ROWS_RTOL, __all__  # noqa: F401
from scimech.capture.profiling import ProfileTable, profile, rows_interact  # noqa: F401, E402 - shown to the user
