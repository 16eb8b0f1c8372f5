"""Capture: named sites and their layouts (which axis is what), attention split into heads,
the calls of a site per forward, batches, hooks, and ``record`` -> xarray."""

_MODULES = ("attention", "batches", "calls", "hooks", "layout", "record", "sites")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.capture.attention` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
