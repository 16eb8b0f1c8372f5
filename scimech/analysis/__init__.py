"""Analysis: probes, concept bottlenecks, representation geometry, bootstrap statistics, captum
attribution, and sparse dictionaries (:mod:`scimech.analysis.dictionary`)."""

_MODULES = ("attribution", "concepts", "dictionary", "geometry", "plots", "probe", "stats")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.analysis.attribution` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
