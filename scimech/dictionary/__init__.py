"""Sparse dictionaries of a site's activations: features, their meaning, and their faithfulness.

- :mod:`~scimech.dictionary.saes`: TopK, BatchTopK and JumpReLU sparse autoencoders and
  transcoders (small torch modules);
- :mod:`~scimech.dictionary.train`: resumable training on activations in memory or in a
  zarr-backed recording, dead-feature revival, unit-norm decoder rows;
- :mod:`~scimech.dictionary.activations`: rows in, feature activations out on the
  recording's own dims (grid cell, token, galaxy, neuron, time);
- :mod:`~scimech.dictionary.quality`: variance explained, L0, dead features; features
  against domain variables with intervals and a shuffled control; top examples;
- :mod:`~scimech.dictionary.interventions`: splice the reconstruction in, steer a feature or
  direction (in one pass or every step of a rollout), the effect of a steer on a forecast
  step by step, causal fidelity against ablation;
- :mod:`~scimech.dictionary.plots`: features against variables, and the shift, as figures;
- :mod:`~scimech.dictionary.shift`: the faithfulness gap under a distribution shift and the
  realignment from unlabelled shifted activations, with no gradient update.

See docs/dictionary.md.
"""

from .activations import encode
from .interventions import rollout_effect, splice, splice_fidelity, steer
from .plots import plot_alignment, plot_bound, plot_shift
from .quality import dictionary_quality, feature_alignment, top_examples
from .saes import KINDS, BatchTopK, JumpReLU, SparseDictionary, TopK, build
from .shift import (
           active_subspace,
           add_fidelity,
           explained_variance,
           faithfulness_gap,
           measure_shift,
           realign,
           realignment_bound,
           summary_lines,
)
from .train import load_dictionary, save_dictionary, train_dictionary

__all__ = ["SparseDictionary", "TopK", "BatchTopK", "JumpReLU", "KINDS", "build", "train_dictionary",
           "save_dictionary", "load_dictionary", "encode", "dictionary_quality", "feature_alignment", "top_examples",
           "splice", "steer", "splice_fidelity", "rollout_effect", "active_subspace", "explained_variance",
           "faithfulness_gap", "realign", "realignment_bound", "measure_shift", "add_fidelity", "summary_lines",
           "plot_alignment", "plot_shift", "plot_bound"]
