"""Analysis: probes, concept bottlenecks, representation geometry, bootstrap statistics, captum
attribution, and sparse dictionaries (:mod:`scimech.analysis.dictionary`)."""

import lazy_loader as _lazy

#: the modules of this folder, each imported when first used (scientific Python's SPEC 1, lazy_loader)
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__, submodules=["attribution", "concepts", "dictionary", "geometry", "plots", "probe", "stats"]
)
