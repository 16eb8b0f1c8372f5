"""Running: Dask execution (local, SLURM), options, config files, progress, results on disk with
provenance, and fingerprints for resumption (the ``scimech`` command is :mod:`scimech.cli`, on top)."""

_MODULES = ("cli", "config", "fingerprint", "memory", "options", "parallel", "progress", "results")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.run.config` without importing it first (`cli`: the old path, until 0.3.0)
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
