"""Moved to :mod:`scimech.run.cli`; this path is kept until scimech 0.3.0."""

import sys
import warnings

if __name__ == "__main__":  # `python -m scimech.cli` runs scimech.run.cli as a script
    import runpy

    runpy.run_module("scimech.run.cli", run_name="__main__", alter_sys=True)
else:
    from scimech.run import cli as _moved

    warnings.warn(
        "scimech.cli moved to scimech.run.cli; the old path will be removed in scimech 0.3.0",
        DeprecationWarning,
        stacklevel=2,
    )
    sys.modules[__name__] = _moved
