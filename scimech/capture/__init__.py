"""Capture: named sites and their layouts (which axis is what), attention split into heads,
the calls of a site per forward, batches, hooks, ``record`` -> xarray, the model profile (what
every verb assumes, measured once) and the session every verb opens on the model (below
``causal``: both use them)."""

import lazy_loader as _lazy

#: the modules of this folder, each imported when first used (scientific Python's SPEC 1, lazy_loader)
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submodules=[
        "attention",
        "batches",
        "calls",
        "hooks",
        "layout",
        "profile",
        "profiling",
        "record",
        "session",
        "sites",
    ],
)
