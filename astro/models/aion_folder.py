"""AION-1 model folders with random weights, in the real layout, for tests and benchmarks.

:func:`write_random_aion` writes what ``polymathic-ai/aion-base`` holds after download (see
:mod:`astro.models.aion`)::

    config.json, model.safetensors              # aion.AION at the chosen shape, random weights
    codecs/<NAME>/config.json, model.safetensors # FLUX_G..Z, SHAPE_R, SHAPE_E1/E2, EBV, Z, image

Everything is built from the installed package's own classes: the transformer is ``aion.AION``
(``aion.fourm.fm.FM`` with a config dict), each codec the class
``aion.codecs.config.MODALITY_CODEC_MAPPING`` names for its modality. Shapes (:data:`SHAPES`):

* ``"base"``: AION-1-B as the package defines it (``aion.fourm.fm.fm_base_12e_12d_swiglu_qknorm_nobias``:
  12 encoder + 12 decoder blocks, width 768, 12 heads, MLP ratio 4, SwiGLU, QK-norm, no biases),
  every modality of ``aion.fourm.modality_info.MODALITY_INFO`` in and out (about 300 M
  parameters, as in the AION-1 paper), scalar codecs of 1024 codes and the image codec of
  ``ImageCodec``'s defaults (MagViT, 512 hidden channels, 2 compressions of 4 residual layers,
  5-dimensional FSQ bottleneck with levels 7, 5, 5, 5, 5 = 4375 codes, the vocabulary of
  ``tok_image``): a (N, 4, 96, 96) cut-out gives 24 x 24 = 576 image tokens.
* ``"tiny"``: 2 + 1 blocks, width 32, 4 heads, only the study's modalities, an image codec of
  the same layout (2 compressions, 576 tokens) 8 channels wide: for tests, seconds on a CPU.

The scalar codecs' quantiles (reservoir quantizers) are not weights: they are filled from a
synthetic galaxy sample, as AION-1's were from its training data. :func:`write_galaxies`
writes a Legacy Survey catalogue and (N, 4, 96, 96) cut-outs to study such a folder on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import astropy.units as u
import numpy as np
import torch
from aion import AION
from aion.codecs import ImageCodec
from aion.codecs.config import MODALITY_CODEC_MAPPING
from aion.fourm.modality_info import MODALITY_INFO
from torch import nn

from scimech.errors import ConfigError

from . import aion as aion_adapter

__all__ = ["SHAPES", "write_random_aion", "write_galaxies", "model_config", "n_parameters"]

_STUDY_DOMAINS = [*aion_adapter.LEGACY_SCALARS, aion_adapter.IMAGE_KEY]

#: shape name -> (transformer config without domains, image codec config, scalar codebook size, all modalities)
SHAPES: dict[str, dict] = {
    "base": dict(
        model=dict(
            dim=768,
            encoder_depth=12,
            decoder_depth=12,
            num_heads=12,
            mlp_ratio=4.0,
            qkv_bias=False,
            proj_bias=False,
            mlp_bias=False,
            norm_bias=False,
            act_layer="SiLU",
            gated_mlp=True,
            qk_norm=True,
        ),
        image=dict(
            quantizer_levels=[7, 5, 5, 5, 5],
            hidden_dims=512,
            multisurvey_projection_dims=54,
            n_compressions=2,
            num_consecutive=4,
            embedding_dim=5,
        ),
        codebook=1024,
        all_modalities=True,
    ),
    "tiny": dict(
        model=dict(
            dim=32,
            encoder_depth=2,
            decoder_depth=1,
            num_heads=4,
            mlp_ratio=2.0,
            qkv_bias=True,
            proj_bias=True,
            mlp_bias=True,
            norm_bias=True,
            act_layer="GELU",
            gated_mlp=False,
            qk_norm=False,
        ),
        image=dict(
            quantizer_levels=[7, 5, 5, 5, 5],
            hidden_dims=8,
            multisurvey_projection_dims=12,
            n_compressions=2,
            num_consecutive=1,
            embedding_dim=5,
        ),
        codebook=64,
        all_modalities=False,
    ),
}


def _shape(shape: str) -> dict:
    if shape not in SHAPES:
        raise ConfigError(f"unknown AION shape {shape!r}; choose one of {sorted(SHAPES)}.")
    return SHAPES[shape]


def model_config(shape: str = "tiny") -> dict:
    """The ``config.json`` of the transformer at ``shape`` (``aion.AION(config)`` builds it)."""
    s = _shape(shape)
    domains = (
        sorted(k for k, v in MODALITY_INFO.items() if v.get("type") == "img")
        if s["all_modalities"]
        else list(_STUDY_DOMAINS)
    )
    out = sorted(set(domains) | {aion_adapter.Z_KEY}) if s["all_modalities"] else [aion_adapter.Z_KEY]
    return dict(domains_in=domains, domains_out=out, **s["model"])


def n_parameters(model: nn.Module) -> int:
    """Number of parameters of a model."""
    return sum(p.numel() for p in model.parameters())


def _scalar_codecs(catalog, codebook: int, seed: int) -> dict[str, nn.Module]:
    """The study's scalar codecs (class from the aion mapping) with quantiles from ``catalog``, and Z's."""
    gen = torch.Generator().manual_seed(seed)
    out: dict[str, nn.Module] = {}
    for key, (mod_name, col, unit) in aion_adapter.LEGACY_SCALARS.items():
        mod = aion_adapter._modality(mod_name)
        v = u.Quantity(catalog[col]).to_value(u.Unit(unit)) if unit else np.asarray(catalog[col], float)
        v = torch.as_tensor(np.asarray(v, np.float32))
        codec = MODALITY_CODEC_MAPPING[mod](mod.name, codebook_size=codebook, reservoir_size=len(v))
        codec.train()
        codec.quantizer(v[torch.randperm(len(v), generator=gen)])  # fills the reservoir -> quantile codebook
        out[key] = codec.eval()
    z_mod = aion_adapter._modality_for_key(aion_adapter.Z_KEY)
    out[aion_adapter.Z_KEY] = MODALITY_CODEC_MAPPING[z_mod](z_mod.name, codebook_size=1024).eval()
    return out


def write_random_aion(
    folder: str | Path, shape: str = "tiny", seed: int = 0, *, image_codec: bool = True, n_quantile_galaxies: int = 2000
) -> Path:
    """Write an AION-1 folder with random weights at ``shape`` (:data:`SHAPES`) and return its path.

    Parameters
    ----------
    folder
        Where to write (created; files of the layout are overwritten).
    shape
        ``"tiny"`` (tests) or ``"base"`` (AION-1-B, about 1.2 GB of float32 weights).
    seed
        Seed of the weights and of the galaxies the scalar codecs' quantiles come from.
    image_codec
        Also write ``codecs/image/`` (without it the study runs on photometry tokens only).
    n_quantile_galaxies
        Synthetic galaxies whose photometry fills the scalar codecs' quantiles.
    """
    from ..synthetic import make_galaxies  # lazy: astropy / scipy

    s = _shape(shape)
    cfg = model_config(shape)
    torch.manual_seed(seed)
    model = AION(cfg).eval()
    codecs = _scalar_codecs(make_galaxies(n_quantile_galaxies, seed=seed, images=False).catalog, s["codebook"], seed)
    if image_codec:
        torch.manual_seed(seed + 1)
        codecs[aion_adapter.IMAGE_KEY] = ImageCodec(**s["image"]).eval()
    return aion_adapter.save_checkpoint(model, folder, config=cfg, codecs=codecs)


def write_galaxies(folder: str | Path, n: int, seed: int = 0, *, stamp: int = 96, world: str = "standard") -> Path:
    """Write ``n`` synthetic galaxies as your data would come: ``folder/catalog.fits`` (a Legacy
    Survey DR10 table with Z and AV, :func:`astro.data.catalog.write_legacy_survey`) and
    ``folder/images.npy`` ((n, 4, stamp, stamp) g, r, i, z cut-outs [nanomaggy per pixel] at
    0.262"/pixel). Returns ``folder`` (``scimech astro study --data folder`` reads both)."""
    from ..data.catalog import write_legacy_survey  # lazy: astropy
    from ..synthetic import make_galaxies, world_config

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg = dataclasses.replace(world_config(world), image_size=int(stamp))
    sample = make_galaxies(int(n), seed=seed, config=cfg)
    write_legacy_survey(folder / "catalog.fits", sample.catalog)
    np.save(folder / "images.npy", sample.images.astype(np.float32))
    return folder
