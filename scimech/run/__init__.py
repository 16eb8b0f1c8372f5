"""Running: Dask execution (local, SLURM), options, config files, the ``scimech`` CLI, progress,
results on disk with provenance, and fingerprints for resumption."""

_MODULES = ("cli", "config", "fingerprint", "memory", "options", "parallel", "progress", "results")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.run.cli` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
