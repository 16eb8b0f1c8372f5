"""Studies: the Study contract (:mod:`scimech.studies.contract`), verdicts, reports, what a reader
read (``reading``), and planted-mechanism validation (:mod:`scimech.studies.validate`)."""

_MODULES = ("contract", "reading", "report", "validate", "verdicts")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.studies.contract` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
