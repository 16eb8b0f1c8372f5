"""Running: Dask execution (local, SLURM), options, config files, progress, results on disk with
provenance, and fingerprints for resumption (the ``scimech`` command is :mod:`scimech.cli`, on top)."""

import lazy_loader as _lazy

#: the modules of this folder, each imported when first used (scientific Python's SPEC 1, lazy_loader)
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__, submodules=["config", "fingerprint", "memory", "options", "parallel", "progress", "results"]
)
