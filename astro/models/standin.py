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

import astropy.units as u
import numpy as np
import torch
from aion import AION
from aion.codecs import GridScalarCodec, LogScalarCodec, ScalarCodec
from aion.fourm.decoder_embeddings import ImageTokenDecoderEmbedding
from aion.fourm.encoder_embeddings import ImageTokenEncoderEmbedding
from aion.fourm.fm import FourM
from aion.fourm.fm_utils import LayerNorm
from aion.fourm.modality_info import MODALITY_INFO
from sklearn.cluster import MiniBatchKMeans
from torch import nn

from scimech.errors import CheckpointError, ConfigError

from .. import constants
from . import aion as aion_adapter  # this package's AION-1 adapter (not the aion package)

__all__ = [
    "StandinAION",
    "PatchTokenizer",
    "StandinConfig",
    "standin_config",
    "fit_codecs",
    "build",
    "train",
    "noisy_views",
    "noisy_catalog",
    "orient_images",
    "code_values",
    "ordinal_init",
    "save",
    "load",
]


class StandinAION(AION):
    """``aion.AION`` with a coarse image token grid (config keys ``image_grid``, ``image_vocab``).

    Config key ``flux_reference`` (a band, e.g. ``"r"``; default none): the flux tokens of the other
    bands quantise their flux *relative to* that band's (a colour), that band's its own flux (the
    brightness); :meth:`astro.models.aion.AIONRedshift.tokenize` reads it as ``model.flux_reference``.
    """

    def __init__(self, config: dict):
        cfg = copy.deepcopy(dict(config))
        reference = cfg.pop("flux_reference", None)
        grid = int(cfg.pop("image_grid", 8))
        vocab = int(cfg.pop("image_vocab", 256))
        cfg.pop("scimech_class", None)
        domains = sorted(set(cfg["domains_in"]) | set(cfg["domains_out"]))
        unknown = [d for d in domains if d not in MODALITY_INFO]
        if unknown:
            raise ConfigError(f"unknown AION modalities {unknown}; choose from {sorted(MODALITY_INFO)[:12]} ...")
        info = {m: dict(MODALITY_INFO[m]) for m in domains}
        if aion_adapter.IMAGE_KEY in info:
            info[aion_adapter.IMAGE_KEY].update(
                input_size=grid,
                patch_size=1,
                vocab_size=vocab,
                encoder_embedding=partial(
                    ImageTokenEncoderEmbedding, vocab_size=vocab, patch_size=1, image_size=(grid, grid)
                ),
                decoder_embedding=partial(
                    ImageTokenDecoderEmbedding, vocab_size=vocab, patch_size=1, image_size=(grid, grid)
                ),
            )
        enc = {m: info[m]["encoder_embedding"]() for m in cfg.pop("domains_in")}
        dec = {m: info[m]["decoder_embedding"](share_embedding=False) for m in cfg.pop("domains_out")}
        norm = partial(LayerNorm, eps=1e-6, bias=cfg.pop("norm_bias"))
        act = getattr(nn, cfg.pop("act_layer"))
        FourM.__init__(
            self,
            encoder_embeddings=enc,
            decoder_embeddings=dec,
            modality_info=info,
            norm_layer=norm,
            act_layer=act,
            **cfg,
        )
        self.flux_reference = reference


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
    flux_reference: str | None = None  # "r": g, i, z flux tokens relative to r (colours); None: absolute


def standin_config(cfg: StandinConfig | None = None, *, image: bool = True) -> dict:
    """The AION config dict of the stand-in (Legacy Survey scalars [+ image] in, tok_z out)."""
    c = cfg or StandinConfig()
    return dict(
        domains_in=[*aion_adapter.LEGACY_SCALARS, *([aion_adapter.IMAGE_KEY] if image else [])],
        domains_out=[aion_adapter.Z_KEY],
        dim=c.dim,
        encoder_depth=c.encoder_depth,
        decoder_depth=c.decoder_depth,
        num_heads=c.num_heads,
        mlp_ratio=c.mlp_ratio,
        qkv_bias=True,
        proj_bias=True,
        mlp_bias=True,
        norm_bias=True,
        act_layer="GELU",
        gated_mlp=False,
        qk_norm=False,
        image_grid=c.image_grid,
        image_vocab=c.image_vocab,
        scimech_class="astro.models.standin.StandinAION",
    ) | ({"flux_reference": c.flux_reference} if c.flux_reference else {})


def build(
    cfg: StandinConfig | None = None,
    seed: int = 0,
    codecs: dict[str, nn.Module] | None = None,
    basis: Literal["code", "value"] = "code",
) -> StandinAION:
    """A freshly initialised stand-in (seeded).

    With ``codecs`` given, the scalar token embeddings and the ``tok_z`` output rows are
    initialised smooth in the code index (:func:`ordinal_init`): codes are quantiles of an
    ordered scalar, and a small training set cannot teach a 1024-row lookup table that
    neighbouring codes mean nearly the same value.
    """
    torch.manual_seed(seed)
    model = StandinAION(standin_config(cfg))
    if codecs is not None:
        ordinal_init(model, codecs, seed=seed, basis=basis)
    return model


def code_values(codecs: dict[str, nn.Module]) -> dict[str, torch.Tensor]:
    """Position of every code of each scalar codec on a common 0..1 scale of its value.

    Flux codes are placed by log flux on one scale shared by the four bands (so differences
    between band tokens are colours); other log codecs by the log of their value, linear
    codecs (e1, e2, EBV, Z) by the value, each on its own min..max.
    """
    raw: dict[str, torch.Tensor] = {}
    for key, codec in codecs.items():
        v = codec.quantizer.decode(torch.arange(codec.quantizer.codebook_size)).double()
        log = key.startswith(("tok_flux", "tok_shape_r"))
        raw[key] = torch.log(v.clamp_min(1e-12)) if log else v
    flux = [k for k in raw if k.startswith("tok_flux")]
    out = {}
    for key, x in raw.items():
        pool = torch.cat([raw[k] for k in flux]) if key in flux else x
        lo, hi = float(pool.min()), float(pool.max())
        out[key] = ((x - lo) / max(hi - lo, 1e-12)).float()
    return out


def ordinal_init(
    model: nn.Module,
    codecs: dict[str, nn.Module],
    *,
    n_basis: int = 12,
    std: float = 0.05,
    seed: int = 0,
    basis: Literal["code", "value"] = "code",
    linear: float = 0.0,
) -> None:
    """Initialise scalar embeddings (and ``tok_z`` logit rows) as smooth functions of the code.

    Row ``k`` of a codebook becomes ``R @ [cos(pi j u_k)]_{j=1..n_basis}`` with ``R`` a seeded
    Gaussian matrix, rescaled to standard deviation ``std``. ``basis="code"``: ``u_k = k / (K - 1)``
    (the quantile of the code); ``"value"``: ``u_k`` from :func:`code_values` (the value the
    code stands for, fluxes on one log scale for all bands).

    ``linear`` > 0 adds to each scalar's embedding rows ``linear * v_k * w``: ``v_k`` the code's value
    (:func:`code_values`) standardised over the codebook, ``w`` a seeded unit vector of its own per
    scalar. Twelve cosines resolve a code to about 1/24 of the codebook (a quarter magnitude of
    flux); the linear term carries the value at the codebook's full resolution, in a direction of
    its own per band, so the first attention layer can form colours as differences.
    """
    g = torch.Generator().manual_seed(seed + 12345)
    values = code_values(codecs) if basis == "value" or linear else {}
    where = values if basis == "value" else {}

    def smooth(key: str, k: int, dim: int) -> torch.Tensor:
        u = (where[key] if key in where else torch.linspace(0, 1, k))[:, None]
        basis = torch.cos(torch.pi * torch.arange(1, n_basis + 1)[None] * u) / torch.arange(1, n_basis + 1) ** 0.5
        w = basis @ torch.randn(n_basis, dim, generator=g)
        return w / w.std() * std

    with torch.no_grad():
        for key, codec in codecs.items():
            k = codec.quantizer.codebook_size
            if key in model.encoder_embeddings:
                emb = model.encoder_embeddings[key].token_emb.weight
                emb[:k] = smooth(key, k, emb.shape[1])
                if linear:
                    v = values[key] - values[key].mean()
                    w = torch.randn(emb.shape[1], generator=g)
                    emb[:k] += linear * (v / v.std().clamp_min(1e-12))[:, None] * (w / w.norm())[None]
            if key in model.decoder_embeddings:
                lin = model.decoder_embeddings[key].to_logits.weight
                lin[:k] = smooth(key, k, lin.shape[1])


def _table_params(model: nn.Module) -> list[nn.Parameter]:
    """The scalar token-embedding tables and the ``tok_z`` logit rows (smooth at init)."""
    out = [e.token_emb.weight for k, e in model.encoder_embeddings.items() if k in aion_adapter.LEGACY_SCALARS]
    return out + [model.decoder_embeddings[aion_adapter.Z_KEY].to_logits.weight]


# ---------------------------------------------------------------- tokenizers
class PatchTokenizer:
    """k-means tokens of ``patch x patch`` pixel blocks from their per-band fluxes.

    Each image is divided by its (positive) total r-band flux; the per-patch band sums are
    asinh-stretched (softening ``softening``) and the 4-vectors are vector-quantised with
    :class:`sklearn.cluster.MiniBatchKMeans` into ``vocab`` codes.

    ``features="bands"`` quantises the four stretched band fluxes (each standardised);
    they move together with the patch's brightness, so most codes resolve brightness and
    few resolve colour. ``features="colours"`` quantises the stretched r flux and the three
    differences g-r, i-r, z-r of the stretched fluxes (asinh colours), each standardised:
    the codes then resolve a patch's colour as finely as its brightness, which resolved
    colour gradients need.
    """

    #: patches whose distances to every code are held at once (65536 x 1024 codes: 256 MB in float32)
    ROWS = 65536

    def __init__(
        self,
        vocab: int = 256,
        patch: int = 4,
        softening: float = 0.002,
        seed: int = 0,
        features: Literal["bands", "colours"] = "bands",
    ):
        if features not in ("bands", "colours"):
            raise ConfigError(f"features must be 'bands' or 'colours'; got {features!r}.")
        self.vocab, self.patch, self.softening, self.seed, self.features = vocab, patch, softening, seed, features

    def _features(self, images: np.ndarray) -> np.ndarray:
        x = np.asarray(images, np.float32)
        if x.ndim != 4 or x.shape[1] != len(constants.BANDS) or x.shape[2] % self.patch or x.shape[3] % self.patch:
            raise ConfigError(f"images must be (N, 4, H, W) with H, W multiples of {self.patch}; got {x.shape}.")
        n, b, h, w = x.shape
        norm = np.maximum(x[:, 1].sum(axis=(1, 2)), 1e-3)[:, None, None, None]
        p = (x / norm).reshape(n, b, h // self.patch, self.patch, w // self.patch, self.patch).sum(axis=(3, 5))
        f = np.arcsinh(p / self.softening)  # (n, b, gh, gw)
        f = f.transpose(0, 2, 3, 1).reshape(-1, b)
        if self.features == "colours":  # r, then g-r, i-r, z-r
            f = np.column_stack([f[:, 1], f[:, 0] - f[:, 1], f[:, 2] - f[:, 1], f[:, 3] - f[:, 1]])
        return f

    def fit(self, images: np.ndarray) -> PatchTokenizer:
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
        c2 = (self.centers_**2).sum(1)[None]
        codes = np.empty(len(f), np.int64)
        for i in range(0, len(f), self.ROWS):  # a patch-by-code distance block of ROWS rows at a time
            part = f[i : i + self.ROWS]
            codes[i : i + self.ROWS] = ((part**2).sum(1)[:, None] - 2 * part @ self.centers_.T + c2).argmin(1)
        return torch.as_tensor(codes.reshape(n, -1), dtype=torch.long)

    def save(self, path: Path) -> None:
        np.savez(
            path,
            mean=self.mean_,
            scale=self.scale_,
            centers=self.centers_,
            params=json.dumps(
                dict(
                    vocab=self.vocab, patch=self.patch, softening=self.softening, seed=self.seed, features=self.features
                )
            ),
        )

    @classmethod
    def load(cls, path: Path) -> PatchTokenizer:
        if not Path(path).is_file():
            raise CheckpointError(f"missing image tokenizer {path}; it is written by astro.models.standin.save.")
        d = np.load(path)
        tok = cls(**json.loads(str(d["params"])))
        tok.mean_, tok.scale_, tok.centers_ = d["mean"], d["scale"], d["centers"]
        return tok


def fit_codecs(
    catalog,
    reservoir_size: int = 4096,
    seed: int = 0,
    codebook_size: int = 128,
    z_codebook_size: int = 256,
    flux_reference: str | None = None,
) -> dict[str, nn.Module]:
    """aion scalar codecs (reservoir quantizers filled from ``catalog``) plus the Z grid codec.

    By default the stand-in uses smaller codebooks than AION-1 (1024): 128 quantile codes per
    scalar (about 0.04 mag per code in flux) and 256 linear z buckets on 0..1 (spacing 0.004).
    ``flux_reference`` (a band): the other bands' codecs quantise their flux relative to that band's
    (as :meth:`astro.models.aion.AIONRedshift.tokenize` gives it for a model with that ``flux_reference``).
    """
    torch.manual_seed(seed)
    out: dict[str, nn.Module] = {}
    values = aion_adapter.scalar_values(catalog, flux_reference)
    for key, (mod_name, _col, _unit) in aion_adapter.LEGACY_SCALARS.items():
        name = aion_adapter._modality(mod_name).name
        v = torch.as_tensor(values[key])
        res = int(min(reservoir_size, len(v)))
        codec = (
            LogScalarCodec(name, codebook_size=codebook_size, reservoir_size=res)
            if key.startswith(("tok_flux", "tok_shape_r"))
            else ScalarCodec(name, codebook_size=codebook_size, reservoir_size=res)
        )
        codec.train()
        codec.quantizer(v[torch.randperm(len(v))[:res]])  # fills the reservoir -> CDF codebook
        out[key] = codec.eval()
    out[aion_adapter.Z_KEY] = GridScalarCodec("Z", codebook_size=z_codebook_size).eval()
    return out


# ---------------------------------------------------------------- training
def _soft_targets(z: torch.Tensor, buckets: torch.Tensor, vocab: int, width: float = 0.01) -> torch.Tensor:
    sig = width * (1 + z)[:, None]
    logp = -0.5 * ((buckets[None] - z[:, None]) / sig) ** 2
    p = torch.softmax(logp, dim=1)
    out = torch.zeros(len(z), vocab)
    out[:, : buckets.numel()] = p
    return out


def _optimiser(model: nn.Module, aux_params, *, lr: float, table_lr: float, weight_decay: float, steps: int):
    """AdamW over the model (the embedding tables at ``lr * table_lr``, frozen at 0) and the extra
    parameters, with a one-cycle schedule of ``steps`` steps."""
    tables = {id(p) for p in _table_params(model)}
    groups = [{"params": [p for p in model.parameters() if id(p) not in tables] + list(aux_params), "lr": lr}]
    if table_lr > 0:
        groups.append({"params": [p for p in model.parameters() if id(p) in tables], "lr": lr * table_lr})
    else:
        for p in model.parameters():
            if id(p) in tables:
                p.requires_grad_(False)
    opt = torch.optim.AdamW(groups, lr=lr, weight_decay=weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[gr["lr"] for gr in groups], total_steps=steps, pct_start=0.1
    )
    return opt, sched


def train(
    adapter: aion_adapter.AIONRedshift,
    tokens: dict[str, torch.Tensor] | list[dict[str, torch.Tensor]],
    z: np.ndarray,
    *,
    mode: Literal["both", "phot", "multi"] = "both",
    epochs: int = 20,
    batch_size: int = 128,
    lr: float = 2e-3,
    weight_decay: float = 0.01,
    seed: int = 0,
    z_weight: float = 0.0,
    target_width: float = 0.01,
    val_fraction: float = 0.0,
    table_lr: float = 1.0,
    aux_loss=None,
    aux_params=(),
    log=None,
    device: str | torch.device = "cpu",
) -> dict[str, Any]:
    """Train the stand-in on ``tokens`` (dict from :meth:`AIONRedshift.tokenize`) and truth ``z``.

    Parameters
    ----------
    tokens
        One token dict, or a list of *views* of the same galaxies (e.g. fluxes redrawn within
        their errors, :func:`noisy_views`); epoch ``e`` trains on view ``e % len(views)``, the
        validation split is scored on the first view.
    mode
        ``"both"``: image hidden for a random half of each batch; ``"phot"``: always hidden;
        ``"multi"``: always shown.
    z_weight
        Weight of an extra ``mean|dz|`` term on the expected redshift (0: cross-entropy only).
    target_width
        Width of the soft redshift target, ``target_width (1 + z)``.
    val_fraction
        Hold out this fraction (seeded) and keep the epoch with the lowest validation
        ``mean|dz|`` (mean of photometry-only and multimodal); 0: keep the last epoch.
    table_lr
        Learning-rate factor of the scalar embedding tables and the ``tok_z`` logit rows
        (0 freezes them at their smooth initialisation).
    aux_loss, aux_params
        An extra term ``aux_loss(rows)`` added to each step's loss, called right after the
        forward pass with the batch's row numbers in ``z`` (e.g. a read-out of a recorded
        activation, :class:`astro.models.planted.ColourReadout`), and the extra parameters
        it trains (optimised with the model, not part of it).
    device
        Torch device of the training (``--device``): the model and the extra parameters move
        there, each batch follows them; the trained model is left on it.

    Returns
    -------
    dict
        ``loss`` per epoch, ``seconds``, ``steps``.
    """
    model = adapter.model.to(device)
    for p in aux_params:
        p.data = p.data.to(device)
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    zt = torch.as_tensor(np.asarray(z, np.float32))
    buckets = adapter.buckets()
    vocab = model.decoder_embeddings[aion_adapter.Z_KEY].to_logits.out_features
    views = list(tokens) if isinstance(tokens, (list, tuple)) else [tokens]
    val = None
    rows = torch.arange(len(zt))
    if val_fraction > 0:
        order = torch.randperm(len(zt), generator=torch.Generator().manual_seed(seed + 777))
        n_val = max(1, int(round(val_fraction * len(zt))))
        vi, ti = order[:n_val], order[n_val:]
        rows = ti
        val = ({k: v[vi] for k, v in views[0].items()}, zt[vi])
        views, zt = [{k: v[ti] for k, v in t.items()} for t in views], zt[ti]
    n = len(zt)
    if n < batch_size:  # the epoch loop takes whole batches only: nothing would be trained
        raise ConfigError(
            f"{n} training galaxies (after the validation split) are fewer than batch_size="
            f"{batch_size}: not one training step would be taken. Lower the batch size (--batch-size) "
            "to at most the number of training galaxies, or give more galaxies."
        )
    steps = epochs * max(1, n // batch_size)
    opt, sched = _optimiser(model, aux_params, lr=lr, table_lr=table_lr, weight_decay=weight_decay, steps=steps)
    has_img = aion_adapter.IMAGE_KEY in views[0]
    hist, t0, step = [], time.perf_counter(), 0
    vals: list[float] = []
    best: tuple[float, int, Any] = (np.inf, -1, None)
    model.train()
    for ep in range(epochs):
        perm = torch.randperm(n, generator=g)
        tokens = views[ep % len(views)]
        tot = 0.0
        for s in range(0, n - batch_size + 1, batch_size):
            idx = perm[s : s + batch_size]
            tb = {k: v[idx] for k, v in tokens.items()}
            batch = aion_adapter.AIONRedshift.batch(tb)
            if has_img:
                if mode == "phot":
                    hide = torch.ones(len(idx), dtype=torch.bool)
                elif mode == "multi":
                    hide = torch.zeros(len(idx), dtype=torch.bool)
                else:
                    hide = torch.rand(len(idx), generator=g) < 0.5
                mk = aion_adapter.MASK_PREFIX + aion_adapter.IMAGE_KEY
                batch[mk] = hide[:, None].expand_as(batch[mk]).clone()
            logits = adapter.forward(model, batch)
            target = _soft_targets(zt[idx].to(device), buckets.to(device), vocab, width=target_width)
            loss = -(target * torch.log_softmax(logits, dim=-1)).sum(1).mean()
            if aux_loss is not None:
                loss = loss + aux_loss(rows[idx])
            if z_weight:
                zb = zt[idx].to(device)
                loss = loss + z_weight * (torch.abs(adapter.expected_z(logits) - zb) / (1 + zb)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step < steps - 1:
                sched.step()
            step += 1
            tot += float(loss.detach()) * len(idx)
        hist.append(tot / max(1, (n // batch_size) * batch_size))
        if val is not None:
            vals.append(_val_score(adapter, *val, has_img))
            if vals[-1] < best[0]:
                best = (vals[-1], ep, copy.deepcopy(model.state_dict()))
            model.train()
        if log:
            log(f"epoch {ep + 1}/{epochs} loss {hist[-1]:.4f}" + (f" val {vals[-1]:.4f}" if vals else ""))
    if val is not None:
        model.load_state_dict(best[2])
    for p in model.parameters():
        p.requires_grad_(True)
    model.eval()
    out = {"loss": hist, "seconds": time.perf_counter() - t0, "steps": step, "mode": mode}
    if val is not None:
        out.update(val_mean_abs_dz=vals, best_epoch=best[1] + 1, n_val=len(val[1]))
    return out


def noisy_catalog(catalog, rng: np.random.Generator, *, shapes: bool = True):
    """A copy of ``catalog`` with each band's flux redrawn within its error (Gaussian,
    standard deviation ``1 / sqrt(flux_ivar)`` [nmgy]); with ``shapes``, (e1, e2) rotated by a
    random position angle (orientation carries no redshift; |e| is kept) and ``shape_r`` and
    ``ebv`` scaled by log-normal factors of scatter :data:`SHAPE_SCATTER`, :data:`EBV_SCATTER`."""
    cat = catalog.copy(copy_data=True)
    for b in constants.BANDS:
        iv = u.Quantity(cat[f"flux_ivar_{b}"]).to_value(u.nmgy**-2)
        sig = np.where(iv > 0, 1 / np.sqrt(np.maximum(iv, 1e-30)), 0.0)
        cat[f"flux_{b}"] = cat[f"flux_{b}"] + rng.normal(0, 1, len(cat)) * sig * u.nmgy
    if shapes:
        phi = rng.uniform(0, np.pi, len(cat))
        e1, e2 = np.asarray(cat["shape_e1"], float), np.asarray(cat["shape_e2"], float)
        c, s_ = np.cos(2 * phi), np.sin(2 * phi)
        cat["shape_e1"], cat["shape_e2"] = c * e1 - s_ * e2, s_ * e1 + c * e2
        cat["shape_r"] = cat["shape_r"] * np.exp(rng.normal(0, SHAPE_SCATTER, len(cat)))
        cat["ebv"] = cat["ebv"] * np.exp(rng.normal(0, EBV_SCATTER, len(cat)))
    return cat


#: relative scatter of the size and of the MW E(B-V) in the noisy training views (typical
#: measurement errors: Legacy Survey half-light radii ~10%, SFD reddening ~10-16%)
SHAPE_SCATTER, EBV_SCATTER = 0.1, 0.1


def orient_images(images: np.ndarray, i: int) -> np.ndarray:
    """``images`` (N, B, H, W) in the ``i % 8``-th of the 8 orientations of the square
    (``i % 4`` quarter turns, mirrored when ``(i // 4) % 2``); orientation carries no redshift."""
    x = np.rot90(np.asarray(images), k=i % 4, axes=(2, 3))
    return np.ascontiguousarray(x[..., ::-1] if (i // 4) % 2 else x)


def noisy_views(
    adapter: aion_adapter.AIONRedshift,
    catalog,
    images,
    n_views: int,
    seed: int = 0,
    shapes: bool = True,
    rotate_images: bool = True,
) -> list[dict[str, torch.Tensor]]:
    """Token dicts of ``catalog`` with the fluxes redrawn within their errors, ``n_views`` in all.

    View 0 is the catalogue as measured; view ``i`` is :func:`noisy_catalog` with seed
    ``seed + i`` (fluxes redrawn within their errors; with ``shapes`` also (e1, e2) rotated and
    size / MW E(B-V) jittered), re-tokenised; with ``rotate_images`` the stamps of view ``i``
    are turned / mirrored (:func:`orient_images`) and re-tokenised, else shared. Without
    this the stand-in memorises its training galaxies: e1, e2 and E(B-V) together are a
    galaxy's fingerprint.
    """
    base = adapter.tokenize(catalog, images)
    out = [base]
    for i in range(1, int(n_views)):
        cat = noisy_catalog(catalog, np.random.default_rng(seed + i), shapes=shapes)
        view = adapter.tokenize(cat)
        if aion_adapter.IMAGE_KEY in base:
            view[aion_adapter.IMAGE_KEY] = (
                torch.as_tensor(adapter.image_tokenizer(orient_images(images, i))).long()
                if rotate_images
                else base[aion_adapter.IMAGE_KEY]
            )
        out.append(view)
    return out


@torch.no_grad()
def _val_score(
    adapter: aion_adapter.AIONRedshift, tokens: dict[str, torch.Tensor], z: torch.Tensor, has_img: bool
) -> float:
    """Mean of mean|dz| photometry-only and (with images) multimodal on a validation split."""
    adapter.model.eval()
    zs = z.numpy().astype(float)
    modes = [[aion_adapter.IMAGE_KEY], []] if has_img else [[]]
    scores = [np.mean(np.abs(adapter.predict_z(adapter.batch(tokens, masked=m)) - zs) / (1 + zs)) for m in modes]
    return float(np.mean(scores))


def save(adapter: aion_adapter.AIONRedshift, folder: str | Path, config: dict | None = None) -> Path:
    """Save model, codecs and the image tokenizer in the AION folder layout."""
    folder = Path(folder)
    codecs = dict(adapter.codecs)
    tok = adapter.image_tokenizer
    if isinstance(tok, aion_adapter.ImageCodecTokenizer):  # an aion ImageCodec: saved as codecs/image/
        codecs[aion_adapter.IMAGE_KEY] = tok.codec
    aion_adapter.save_checkpoint(adapter.model, folder, config=config, codecs=codecs)
    if isinstance(tok, PatchTokenizer):
        tok.save(folder / "image_tokenizer.npz")
    return folder


def load(folder: str | Path) -> aion_adapter.AIONRedshift:
    """Load a stand-in saved by :func:`save` (strict weights, codecs, image tokenizer)."""
    folder = Path(folder)
    tok = PatchTokenizer.load(folder / "image_tokenizer.npz")
    return aion_adapter.AIONRedshift.from_folder(folder, image_tokenizer=tok)
