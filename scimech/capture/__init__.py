"""Capture: named sites and their layouts (which axis is what), attention split into heads,
the calls of a site per forward, batches, hooks, ``record`` -> xarray, the model profile (what
every verb assumes, measured once) and the session every verb opens on the model (below
``causal``: both use them)."""

_MODULES = ("attention", "batches", "calls", "hooks", "layout", "profile", "profiling", "record", "session", "sites")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.capture.attention` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
