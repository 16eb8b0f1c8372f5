"""Causal: ablation methods (setters), metrics, ``ablate`` / ``patch``, one batch loop for the sweeps,
prefix reuse, attribution patching and what a row (sample) is. The model profile lives in
:mod:`scimech.capture.profile` (``model_profile`` here is its old path)."""

_MODULES = ("ablation", "atp", "intervene", "metrics", "model_profile", "prefix_reuse", "samples", "sweep")


def __getattr__(name: str):
    if name in _MODULES:  # `scimech.causal.ablation` without importing it first
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
