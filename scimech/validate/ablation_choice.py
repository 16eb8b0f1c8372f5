"""Moved to :mod:`scimech.studies.validate.ablation_choice`; this path is kept until scimech 0.3.0."""

import sys
import warnings

from scimech.studies.validate import ablation_choice as _moved

warnings.warn(
    "scimech.validate.ablation_choice moved to scimech.studies.validate.ablation_choice; the old path will be removed in scimech 0.3.0",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = _moved
