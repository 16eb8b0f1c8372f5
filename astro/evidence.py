"""The study's evidence: the four measurements of :mod:`astro.measures` run in order on one
model and one pair of samples, returned as named datasets (``advantage``, ``layers``,
``head_probes``, ``radial``, ``interventions``, ``bias``, ``predictions``), the input of
:mod:`astro.findings` and :mod:`astro.report`.

"Photometry only" runs hide the image tokens with AION's input mask (same token positions
as the multimodal run, so heads can be patched between the two).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import xarray as xr

from scimech.studies.evidence import Evidence
from scimech.studies.verdicts import PlantedTruthRow

from .measures import (
    attenuation_bias,
    head_probes,
    head_radial_structure,
    intervention_chunks,
    layer_probes,
    localised_block,
    multimodal_advantage,
    site_profile_dataset,
    study_inputs,
    summarise_interventions,
)
from .models.aion import AIONRedshift

__all__ = ["gather_evidence", "planted_attrs", "AstroEvidence"]


@dataclass
class AstroEvidence(Evidence):
    """What a run of the astro study hands to its findings and report (the evidence every study
    hands on, :class:`scimech.studies.evidence.Evidence`): the named datasets of
    :func:`gather_evidence` and the seconds each phase took."""

    results: dict[str, xr.Dataset]
    timings: dict[str, float] = field(default_factory=dict)

    def measurements(self) -> dict[str, xr.Dataset]:
        """The named datasets of :func:`gather_evidence` (``advantage``, ``layers``, ...)."""
        return dict(self.results)

    def planted_rows(self) -> list[PlantedTruthRow] | None:
        """The planted model's facts (:func:`astro.recovery.planted_recovery`; empty for a model with
        none planted); ``None`` for a study of your catalogue (real galaxies have no planted truth)."""
        from .recovery import planted_recovery

        if "predictions" in self.results and self.results["predictions"].attrs.get("galaxies") == "catalog":
            return None
        return planted_recovery(self.results)

    def phase_seconds(self) -> dict[str, float]:
        return dict(self.timings)


def gather_evidence(
    adapter: AIONRedshift,
    train,
    test,
    *,
    n_bootstrap: int = 300,
    seed: int = 0,
    block: int | None = None,
    log=None,
    chunk_size: int | None = None,
    intervene: Callable[[int], xr.Dataset] | None = None,
) -> dict[str, xr.Dataset]:
    """All four steps; returns named datasets (``advantage``, ``layers``, ``head_probes``,
    ``radial``, ``interventions``, ``bias``, ``predictions``, and ``site_profile``: what the
    verbs of the head study assumed about the model, :mod:`astro.measures.assumptions`, where
    the intervention chunks carry it).

    The head study (head probes, radial maps, interventions and the attenuation bias with a head
    ablated) runs in every encoder block, each dataset with a ``block`` dimension
    (:func:`astro.measures.at_block` reads one); ``block`` restricts it to that one block (faster).
    ``attrs["block"]``: the block findings 3 and 4 read, the one the layer probes localise the gain
    to (or ``block``).

    ``intervene(blocks)`` may supply the concatenated :func:`~astro.measures.intervention_chunk`
    results of the head study (:mod:`astro.run` maps the chunks over Dask workers and a
    resumable store); by default the chunks of ``chunk_size`` galaxies run here.
    """
    say = log or (lambda *_: None)
    say("inputs and classical photo-z")
    inp = study_inputs(adapter, train, test)
    z_multi = adapter.predict_z(inp.multi)
    z_phot = adapter.predict_z(inp.phot)
    preds = {"photometry": z_phot, "multimodal": z_multi, "template": inp.z_template, "colour_knn": inp.z_colour}
    say("advantage")
    adv = multimodal_advantage(inp.z, preds, inp.populations, n_bootstrap=n_bootstrap, seed=seed)
    say("layer probes")
    layers = layer_probes(adapter, inp, n_bootstrap=min(n_bootstrap, 200))
    blk = localised_block(layers) if block is None else block
    blocks = list(range(adapter.num_blocks)) if block is None else [int(block)]
    say(f"head study in blocks {blocks} (findings 3 and 4 read block {blk}, the layer probes' choice)")
    hp = _along_blocks([head_probes(adapter, inp, b, n_bootstrap=min(n_bootstrap, 200)) for b in blocks], blocks, blk)
    rad = _along_blocks([head_radial_structure(adapter, inp, b) for b in blocks], blocks, blk)
    raw = (
        intervention_chunks(adapter, inp, blocks, seed=seed, chunk_size=chunk_size)
        if intervene is None
        else intervene(blocks)
    )
    iv = summarise_interventions(raw, inp.z, inp.populations, n_bootstrap=n_bootstrap, seed=seed)
    iv.attrs.update(block=int(blk), blocks=blocks)
    site_profile = site_profile_dataset(raw)
    iv.attrs.update(planted_attrs(adapter))
    base_preds = {"photometry": z_phot, "multimodal": z_multi, "template": inp.z_template}
    biases = []
    for b in blocks:
        bias_preds = dict(base_preds)
        for h in range(adapter.num_heads):
            bias_preds[f"multimodal_ablate_h{h}"] = iv["z_ablated"].sel(intervention="resample", block=b, head=h).values
        biases.append(attenuation_bias(inp.z, inp.a_v, inp.colours, bias_preds, inp.populations, seed=seed))
    bias = _along_blocks(biases, blocks, blk)
    pred_ds = xr.Dataset(
        {k: ("sample", v) for k, v in preds.items()}
        | {"z_true": ("sample", inp.z), "a_v": ("sample", inp.a_v)}
        | {f"pop_{k}": ("sample", v) for k, v in inp.populations.items()},
        attrs={"description": "redshift predictions on the test set"},
    )
    res = {
        "advantage": adv,
        "layers": layers,
        "head_probes": hp,
        "radial": rad,
        "interventions": iv,
        "bias": bias,
        "predictions": pred_ds,
    }
    return res if site_profile is None else res | {"site_profile": site_profile}


def _along_blocks(parts: list[xr.Dataset], blocks: list[int], studied: int) -> xr.Dataset:
    """One dataset per encoder block, stacked along ``block``; ``attrs["block"]``: the block findings 3
    and 4 read (:func:`astro.measures.at_block`), ``attrs["blocks"]``: every block studied."""
    out = xr.concat(
        [p.assign_coords(block=b) for p, b in zip(parts, blocks)],
        "block",
        coords="different",
        compat="equals",
        combine_attrs="override",
    )
    out.attrs.update(block=int(studied), blocks=list(blocks))
    one = f"encoder block {blocks[0]}"  # the first part's description names its block; the stack holds them all
    if len(blocks) > 1 and one in str(out.attrs.get("description", "")):
        every = ", ".join(map(str, blocks))
        out.attrs["description"] = out.attrs["description"].replace(one, f"encoder blocks {every} (dim block)")
    return out


def planted_attrs(adapter: AIONRedshift) -> dict[str, Any]:
    """What the model says was planted in it (:meth:`astro.models.planted.PlantedAION.planted_truth`), as
    netCDF attributes; ``planted = 0`` for a model without a planted mechanism (stand-in, AION-1)."""
    truth = getattr(adapter.model, "planted_truth", None)
    if truth is None:
        return {"planted": 0}
    t = truth()
    return {
        "planted": 1,
        "planted_block": int(t["block"]),
        "planted_image_head": int(t["image_head"]),
        "planted_inert_head": int(t["inert_colour_head"]),
        "planted_image_truth": t["image_head_truth"],
        "planted_inert_truth": t["inert_head_truth"],
    }
