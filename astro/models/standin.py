"""A small AION built from the package's own classes, trainable on 2 CPU cores.

:class:`StandinAION` subclasses ``aion.AION`` and changes one thing: ``tok_image`` is a
coarse ``image_grid x image_grid`` token grid (default 8x8 from 32x32-pixel stamps, 4x4
pixels per token, as AION-1's 24x24 tokens from 96x96 crops) with a small vocabulary.
Width and depth come from the usual AION config keys. Everything else (embeddings,
encoder blocks ``encoder[l].attn.qkv / .proj``, decoder, ``tok_z`` head) is aion code, so
the adapter and analysis run unchanged on the real checkpoint.

Tokenizers fitted on the synthetic training set:

* scalars: aion's ``LogScalarCodec`` (fluxes, shape_r) and ``ScalarCodec`` (e1, e2, EBV)
  with reservoir quantizers filled from the training values; ``tok_z``: aion's
  ``GridScalarCodec`` (1024 linear buckets on 0..1);
* images: :class:`PatchTokenizer`, k-means codes of the per-patch band fluxes (asinh
  stretched, relative to the galaxy's r-band flux), i.e. the patch's brightness and colour.

Training (:func:`train`) minimises cross-entropy of the ``tok_z`` logits against a
Gaussian-smoothed one-hot target; ``mode="both"`` hides the image for a random half of
each batch (modality dropout, as AION-1's random input masking), so one model serves
both the photometry-only and the photometry + image runs.
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from aion import AION
from torch import nn

from scimech.errors import CheckpointError, ConfigError

from .. import constants as C
from . import aion as A

__all__ = ["StandinAION", "PatchTokenizer", "StandinConfig", "standin_config", "fit_codecs", "build",
           "train", "save", "load"]


class StandinAION(AION):
    """``aion.AION`` with a coarse image token grid (config keys ``image_grid``, ``image_vocab``)."""

    def __init__(self, config: dict):
        from aion.fourm.decoder_embeddings import ImageTokenDecoderEmbedding
        from aion.fourm.encoder_embeddings import ImageTokenEncoderEmbedding
        from aion.fourm.fm import FourM
        from aion.fourm.fm_utils import LayerNorm
        from aion.fourm.modality_info import MODALITY_INFO

        cfg = copy.deepcopy(dict(config))
        grid = int(cfg.pop("image_grid", 8))
        vocab = int(cfg.pop("image_vocab", 256))
        cfg.pop("scimech_class", None)
        domains = sorted(set(cfg["domains_in"]) | set(cfg["domains_out"]))
        unknown = [d for d in domains if d not in MODALITY_INFO]
        if unknown:
            raise ConfigError(f"unknown AION modalities {unknown}; choose from {sorted(MODALITY_INFO)[:12]} ...")
        info = {m: dict(MODALITY_INFO[m]) for m in domains}
        if A.IMAGE_KEY in info:
            info[A.IMAGE_KEY].update(
                input_size=grid, patch_size=1, vocab_size=vocab,
                encoder_embedding=partial(ImageTokenEncoderEmbedding, vocab_size=vocab, patch_size=1,
                                          image_size=(grid, grid)),
                decoder_embedding=partial(ImageTokenDecoderEmbedding, vocab_size=vocab, patch_size=1,
                                          image_size=(grid, grid)))
        enc = {m: info[m]["encoder_embedding"]() for m in cfg.pop("domains_in")}
        dec = {m: info[m]["decoder_embedding"](share_embedding=False) for m in cfg.pop("domains_out")}
        norm = partial(LayerNorm, eps=1e-6, bias=cfg.pop("norm_bias"))
        act = getattr(nn, cfg.pop("act_layer"))
        FourM.__init__(self, encoder_embeddings=enc, decoder_embeddings=dec, modality_info=info,
                       norm_layer=norm, act_layer=act, **cfg)


@dataclass
class StandinConfig:
    """Width/depth of the stand-in and its tokenizers."""

    dim: int = 32
    encoder_depth: int = 3
    decoder_depth: int = 1
    num_heads: int = 4
    image_grid: int = 6
    image_vocab: int = 256
    mlp_ratio: float = 2.0


def standin_config(cfg: StandinConfig | None = None, *, image: bool = True) -> dict:
    """The AION config dict of the stand-in (Legacy Survey scalars [+ image] in, tok_z out)."""
    c = cfg or StandinConfig()
    return dict(domains_in=[*A.LEGACY_SCALARS, *([A.IMAGE_KEY] if image else [])], domains_out=[A.Z_KEY],
                dim=c.dim, encoder_depth=c.encoder_depth, decoder_depth=c.decoder_depth, num_heads=c.num_heads,
                mlp_ratio=c.mlp_ratio, qkv_bias=True, proj_bias=True, mlp_bias=True, norm_bias=True,
                act_layer="GELU", gated_mlp=False, qk_norm=False, image_grid=c.image_grid,
                image_vocab=c.image_vocab, scimech_class="astro.models.standin.StandinAION")


def build(cfg: StandinConfig | None = None, seed: int = 0, codecs: dict[str, nn.Module] | None = None) -> StandinAION:
    """A freshly initialised stand-in (seeded).

    With ``codecs`` given, the scalar token embeddings and the ``tok_z`` output rows are
    initialised smooth in the code index (:func:`ordinal_init`): codes are quantiles of an
    ordered scalar, and a small training set cannot teach a 1024-row lookup table that
    neighbouring codes mean nearly the same value.
    """
    torch.manual_seed(seed)
    model = StandinAION(standin_config(cfg))
    if codecs is not None:
        ordinal_init(model, codecs, seed=seed)
    return model


def ordinal_init(model: nn.Module, codecs: dict[str, nn.Module], *, n_basis: int = 12, std: float = 0.05,
                 seed: int = 0) -> None:
    """Initialise scalar embeddings (and ``tok_z`` logit rows) as smooth functions of the code.

    Row ``k`` of a codebook of size ``K`` becomes ``R @ [cos(pi j k / (K - 1))]_{j=1..n_basis}``
    with ``R`` a seeded Gaussian matrix, rescaled to standard deviation ``std``.
    """
    g = torch.Generator().manual_seed(seed + 12345)

    def smooth(k: int, dim: int) -> torch.Tensor:
        u = torch.linspace(0, 1, k)[:, None]
        basis = torch.cos(torch.pi * torch.arange(1, n_basis + 1)[None] * u) / torch.arange(1, n_basis + 1) ** 0.5
        w = basis @ torch.randn(n_basis, dim, generator=g)
        return w / w.std() * std

    with torch.no_grad():
        for key, codec in codecs.items():
            k = codec.quantizer.codebook_size
            if key in model.encoder_embeddings:
                emb = model.encoder_embeddings[key].token_emb.weight
                emb[:k] = smooth(k, emb.shape[1])
            if key in model.decoder_embeddings:
                lin = model.decoder_embeddings[key].to_logits.weight
                lin[:k] = smooth(k, lin.shape[1])


# ---------------------------------------------------------------- tokenizers
class PatchTokenizer:
    """k-means tokens of ``patch x patch`` pixel blocks from their per-band fluxes.

    Each image is divided by its (positive) total r-band flux; the per-patch band sums are
    asinh-stretched (softening ``softening``) and the 4-vectors are vector-quantised with
    :class:`sklearn.cluster.MiniBatchKMeans` into ``vocab`` codes.
    """

    def __init__(self, vocab: int = 256, patch: int = 4, softening: float = 0.002, seed: int = 0):
        self.vocab, self.patch, self.softening, self.seed = vocab, patch, softening, seed

    def _features(self, images: np.ndarray) -> np.ndarray:
        x = np.asarray(images, np.float32)
        if x.ndim != 4 or x.shape[1] != len(C.BANDS) or x.shape[2] % self.patch or x.shape[3] % self.patch:
            raise ConfigError(f"images must be (N, 4, H, W) with H, W multiples of {self.patch}; got {x.shape}.")
        n, b, h, w = x.shape
        norm = np.maximum(x[:, 1].sum(axis=(1, 2)), 1e-3)[:, None, None, None]
        p = (x / norm).reshape(n, b, h // self.patch, self.patch, w // self.patch, self.patch).sum(axis=(3, 5))
        f = np.arcsinh(p / self.softening)                      # (n, b, gh, gw)
        return f.transpose(0, 2, 3, 1).reshape(-1, b)

    def fit(self, images: np.ndarray) -> PatchTokenizer:
        from sklearn.cluster import MiniBatchKMeans

        f = self._features(images)
        self.mean_, self.scale_ = f.mean(0), f.std(0) + 1e-6
        km = MiniBatchKMeans(self.vocab, random_state=self.seed, n_init=1, batch_size=4096, max_iter=50)
        km.fit((f - self.mean_) / self.scale_)
        self.centers_ = km.cluster_centers_.astype(np.float32)
        return self

    def __call__(self, images: np.ndarray) -> torch.Tensor:
        if not hasattr(self, "centers_"):
            raise ConfigError("PatchTokenizer is not fitted; call fit(train_images) first.")
        n = len(images)
        f = ((self._features(images) - self.mean_) / self.scale_).astype(np.float32)
        d = (f**2).sum(1)[:, None] - 2 * f @ self.centers_.T + (self.centers_**2).sum(1)[None]
        return torch.as_tensor(d.argmin(1).reshape(n, -1), dtype=torch.long)

    def save(self, path: Path) -> None:
        np.savez(path, mean=self.mean_, scale=self.scale_, centers=self.centers_,
                 params=json.dumps(dict(vocab=self.vocab, patch=self.patch, softening=self.softening, seed=self.seed)))

    @classmethod
    def load(cls, path: Path) -> PatchTokenizer:
        if not Path(path).is_file():
            raise CheckpointError(f"missing image tokenizer {path}; it is written by astro.models.standin.save.")
        d = np.load(path)
        tok = cls(**json.loads(str(d["params"])))
        tok.mean_, tok.scale_, tok.centers_ = d["mean"], d["scale"], d["centers"]
        return tok


def fit_codecs(catalog, reservoir_size: int = 4096, seed: int = 0, codebook_size: int = 128,
               z_codebook_size: int = 256) -> dict[str, nn.Module]:
    """aion scalar codecs (reservoir quantizers filled from ``catalog``) plus the Z grid codec.

    The stand-in uses smaller codebooks than AION-1 (1024): 128 quantile codes per scalar
    (about 0.04 mag per code in flux) and 256 linear z buckets on 0..1 (spacing 0.004).
    """
    import astropy.units as u
    from aion.codecs import GridScalarCodec, LogScalarCodec, ScalarCodec

    torch.manual_seed(seed)
    out: dict[str, nn.Module] = {}
    for key, (mod_name, col, unit) in A.LEGACY_SCALARS.items():
        name = A._modality(mod_name).name
        v = u.Quantity(catalog[col]).to_value(u.Unit(unit)) if unit else np.asarray(catalog[col], float)
        v = torch.as_tensor(np.asarray(v, np.float32))
        res = int(min(reservoir_size, len(v)))
        codec = (LogScalarCodec(name, codebook_size=codebook_size, reservoir_size=res)
                 if key.startswith(("tok_flux", "tok_shape_r"))
                 else ScalarCodec(name, codebook_size=codebook_size, reservoir_size=res))
        codec.train()
        codec.quantizer(v[torch.randperm(len(v))[:res]])     # fills the reservoir -> CDF codebook
        out[key] = codec.eval()
    out[A.Z_KEY] = GridScalarCodec("Z", codebook_size=z_codebook_size).eval()
    return out


# ---------------------------------------------------------------- training
def _soft_targets(z: torch.Tensor, buckets: torch.Tensor, vocab: int, width: float = 0.01) -> torch.Tensor:
    sig = width * (1 + z)[:, None]
    logp = -0.5 * ((buckets[None] - z[:, None]) / sig) ** 2
    p = torch.softmax(logp, dim=1)
    out = torch.zeros(len(z), vocab)
    out[:, : buckets.numel()] = p
    return out


def train(adapter: A.AIONRedshift, tokens: dict[str, torch.Tensor], z: np.ndarray, *,
          mode: Literal["both", "phot", "multi"] = "both", epochs: int = 20, batch_size: int = 128,
          lr: float = 2e-3, weight_decay: float = 0.01, seed: int = 0, log=None) -> dict[str, Any]:
    """Train the stand-in on ``tokens`` (dict from :meth:`AIONRedshift.tokenize`) and truth ``z``.

    Parameters
    ----------
    mode
        ``"both"``: image hidden for a random half of each batch; ``"phot"``: always hidden;
        ``"multi"``: always shown.

    Returns
    -------
    dict
        ``loss`` per epoch, ``seconds``, ``steps``.
    """
    model = adapter.model
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    zt = torch.as_tensor(np.asarray(z, np.float32))
    buckets = adapter.buckets()
    vocab = model.decoder_embeddings[A.Z_KEY].to_logits.out_features
    n = len(zt)
    steps = epochs * max(1, n // batch_size)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    has_img = A.IMAGE_KEY in tokens
    hist, t0, step = [], time.perf_counter(), 0
    model.train()
    for ep in range(epochs):
        perm = torch.randperm(n, generator=g)
        tot = 0.0
        for s in range(0, n - batch_size + 1, batch_size):
            idx = perm[s:s + batch_size]
            tb = {k: v[idx] for k, v in tokens.items()}
            batch = A.AIONRedshift.batch(tb)
            if has_img:
                if mode == "phot":
                    hide = torch.ones(len(idx), dtype=torch.bool)
                elif mode == "multi":
                    hide = torch.zeros(len(idx), dtype=torch.bool)
                else:
                    hide = torch.rand(len(idx), generator=g) < 0.5
                mk = A.MASK_PREFIX + A.IMAGE_KEY
                batch[mk] = hide[:, None].expand_as(batch[mk]).clone()
            logits = adapter.forward(model, batch)
            target = _soft_targets(zt[idx], buckets, vocab)
            loss = -(target * torch.log_softmax(logits, dim=-1)).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step < steps - 1:
                sched.step()
            step += 1
            tot += float(loss.detach()) * len(idx)
        hist.append(tot / max(1, (n // batch_size) * batch_size))
        if log:
            log(f"epoch {ep + 1}/{epochs} loss {hist[-1]:.4f}")
    model.eval()
    return {"loss": hist, "seconds": time.perf_counter() - t0, "steps": step, "mode": mode}


def save(adapter: A.AIONRedshift, folder: str | Path, config: dict | None = None) -> Path:
    """Save model, codecs and the image tokenizer in the AION folder layout."""
    folder = Path(folder)
    codecs = dict(adapter.codecs)
    tok = adapter.image_tokenizer
    if isinstance(tok, A.ImageCodecTokenizer):      # an aion ImageCodec: saved as codecs/image/
        codecs[A.IMAGE_KEY] = tok.codec
    A.save_checkpoint(adapter.model, folder, config=config, codecs=codecs)
    if isinstance(tok, PatchTokenizer):
        tok.save(folder / "image_tokenizer.npz")
    return folder


def load(folder: str | Path) -> A.AIONRedshift:
    """Load a stand-in saved by :func:`save` (strict weights, codecs, image tokenizer)."""
    folder = Path(folder)
    tok = PatchTokenizer.load(folder / "image_tokenizer.npz")
    return A.AIONRedshift.from_folder(folder, image_tokenizer=tok)
