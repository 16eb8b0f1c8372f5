"""Causal: ablation methods (setters), metrics, ``ablate`` / ``patch``, one batch loop for the sweeps,
prefix reuse, attribution patching and what a row (sample) is. The model profile lives in
:mod:`scimech.capture.profile` (``model_profile`` here is its old path)."""

import lazy_loader as _lazy

#: the modules of this folder, each imported when first used (scientific Python's SPEC 1, lazy_loader)
__getattr__, __dir__, __all__ = _lazy.attach(
    __name__,
    submodules=["ablation", "atp", "intervene", "metrics", "prefix_reuse", "samples", "sweep"],
)
