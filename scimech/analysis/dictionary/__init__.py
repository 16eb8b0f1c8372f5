"""Sparse dictionaries of a site's activations: features, their meaning, and their faithfulness.

- :mod:`~scimech.analysis.dictionary.saes`: TopK, BatchTopK and JumpReLU sparse autoencoders and
  transcoders (small torch modules);
- :mod:`~scimech.analysis.dictionary.train`: resumable training on activations in memory or in a
  zarr-backed recording, dead-feature revival, unit-norm decoder rows;
- :mod:`~scimech.analysis.dictionary.activations`: rows in, feature activations out on the
  recording's own dims (grid cell, token, galaxy, neuron, time);
- :mod:`~scimech.analysis.dictionary.quality`: variance explained, L0, dead features; features
  against domain variables with intervals and a shuffled control; top examples;
- :mod:`~scimech.analysis.dictionary.interventions`: splice the reconstruction in, steer a feature or
  direction (in one pass or every step of a rollout), the effect of a steer on a forecast
  step by step, causal fidelity against ablation;
- :mod:`~scimech.analysis.dictionary.plots`: features against variables, and the shift, as figures;
- :mod:`~scimech.analysis.dictionary.shift`: the faithfulness gap under a distribution shift and the
  realignment from unlabelled shifted activations, with no gradient update.

See docs/dictionary.md.
"""

# the names load their modules (torch, matplotlib) on first use: `scimech --help` registers this
# package's commands (scimech.analysis.dictionary.cli) without importing torch
_LAZY = {
    "encode": "activations",
    "rollout_effect": "interventions",
    "splice": "interventions",
    "splice_fidelity": "interventions",
    "steer": "interventions",
    "plot_alignment": "plots",
    "plot_bound": "plots",
    "plot_shift": "plots",
    "dictionary_quality": "quality",
    "feature_alignment": "quality",
    "top_examples": "quality",
    "KINDS": "saes",
    "BatchTopK": "saes",
    "JumpReLU": "saes",
    "SparseDictionary": "saes",
    "TopK": "saes",
    "build": "saes",
    "active_subspace": "shift",
    "add_fidelity": "shift",
    "explained_variance": "shift",
    "faithfulness_gap": "shift",
    "measure_shift": "shift",
    "realign": "shift",
    "realignment_bound": "shift",
    "summary_lines": "shift",
    "load_dictionary": "train",
    "save_dictionary": "train",
    "train_dictionary": "train",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'scimech.analysis.dictionary' has no attribute {name!r}")


__all__ = [
    "SparseDictionary",
    "TopK",
    "BatchTopK",
    "JumpReLU",
    "KINDS",
    "build",
    "train_dictionary",
    "save_dictionary",
    "load_dictionary",
    "encode",
    "dictionary_quality",
    "feature_alignment",
    "top_examples",
    "splice",
    "steer",
    "splice_fidelity",
    "rollout_effect",
    "active_subspace",
    "explained_variance",
    "faithfulness_gap",
    "realign",
    "realignment_bound",
    "measure_shift",
    "add_fidelity",
    "summary_lines",
    "plot_alignment",
    "plot_shift",
    "plot_bound",
]
