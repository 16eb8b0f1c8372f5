"""The measurements of the astro study, one module per step, in the order the study takes them:
:mod:`~astro.measures.inputs` (the tokenised test galaxies and the classical yardsticks),
:mod:`~astro.measures.advantage` (1: the multimodal advantage), :mod:`~astro.measures.probes`
(2: layer probes; 3: head probes and radial maps), :mod:`~astro.measures.interventions` (3:
head ablation and patching; :mod:`~astro.measures.assumptions`: what those verbs assumed about the
model), :mod:`~astro.measures.bias` (4: attenuation bias). Each works on
the :class:`~astro.models.aion.AIONRedshift` adapter, so the same code runs on the stand-in
and on AION-1; :mod:`astro.evidence` runs them in order. Their public names are importable
from here.
"""

from __future__ import annotations

from .advantage import CONTRASTS, multimodal_advantage
from .assumptions import measure_site_profile, site_profile_dataset, site_profile_table
from .bias import attenuation_bias, colour_cells
from .inputs import StudyInputs, study_batches, study_inputs
from .interventions import (
    HEAD_STUDY,
    at_block,
    chunk_bounds,
    chunk_seed,
    head_interventions,
    intervention_chunk,
    intervention_chunks,
    slice_batch,
    summarise_interventions,
)
from .probes import head_probes, head_radial_structure, layer_probes, localised_block, record_blocks

__all__ = [
    "StudyInputs",
    "study_inputs",
    "study_batches",
    "multimodal_advantage",
    "CONTRASTS",
    "record_blocks",
    "layer_probes",
    "localised_block",
    "head_probes",
    "head_radial_structure",
    "chunk_bounds",
    "chunk_seed",
    "slice_batch",
    "intervention_chunk",
    "intervention_chunks",
    "summarise_interventions",
    "head_interventions",
    "at_block",
    "HEAD_STUDY",
    "colour_cells",
    "attenuation_bias",
    "measure_site_profile",
    "site_profile_dataset",
    "site_profile_table",
]
