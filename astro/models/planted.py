"""A stand-in whose mechanism is planted: the study's answer is known before it runs.

:class:`PlantedAION` is the stand-in (:class:`astro.models.standin.StandinAION`, itself an
``aion.AION``) with two constraints built into its forward pass and its training:

* **the image head** (``route_head``, default 1) of encoder block 0 is the only component
  through which image tokens reach the redshift. Every other head of block 0, every head of
  the later blocks and the decoder's cross-attention see the image tokens as masked keys
  (AION's own key masking, applied per head), so whatever the image adds to the redshift
  (in the ``"degenerate"`` world: the dust / redshift correction read from resolved colours)
  passes through that head's output at the catalogue tokens. Hiding the image (AION's input
  mask) and replacing that head's activation by its photometry-only value give the same
  output, exactly.
* **the inert colour head** (``inert_head``, default 2) of block 0: its columns of the output
  projection ``encoder[0].attn.proj`` are zero and stay zero in training (their gradient is
  masked), so nothing downstream reads it and any intervention on it changes nothing. It is
  trained, through an auxiliary linear read-out that is discarded afterwards
  (:class:`ColourReadout`), to encode the colours g-r, r-i, i-z linearly in its output at the
  catalogue tokens: a probe finds colours there, an ablation finds no effect.

The weights are those of the stand-in (same names and shapes), saved and loaded with
:func:`astro.models.standin.save` / ``load``; the config keys ``route_head`` and
``inert_head`` rebuild the constraints, and :meth:`PlantedAION.planted_truth` states them
(checking that the inert head's projection columns are still zero).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from aion.fourm.fm_utils import Attention, softmax1
from torch import nn

from scimech.errors import CheckpointError, ConfigError

from .. import photoz
from . import aion as aion_adapter  # this package's AION-1 adapter (not the aion package)
from . import standin
from .standin import StandinAION, StandinConfig, ordinal_init, standin_config

__all__ = [
    "PlantedAION",
    "HeadMaskedAttention",
    "ColourReadout",
    "planted_config",
    "build_planted",
    "train_planted",
    "ROUTE_HEAD",
    "INERT_HEAD",
]

#: default planted heads of encoder block 0
ROUTE_HEAD, INERT_HEAD = 1, 2


class HeadMaskedAttention(Attention):
    """aion's self-attention that also takes a key mask per head.

    A 4-D ``mask`` of shape ``(B, heads, 1, N)`` (True = key hidden) masks each head's keys
    separately; any other mask is handled by aion's :class:`Attention` unchanged. The
    parameters (``qkv``, ``proj``) are aion's, so head sites ``encoder.0.attn.heads[h]``
    (the input of ``proj``) read the same tensors.
    """

    def forward(self, x, mask=None):
        if mask is None or mask.dim() != 4:
            return super().forward(x, mask)
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.masked_fill(mask, -torch.finfo(attn.dtype).max)
        attn = softmax1(attn) if self.allow_zero_attn else attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        out = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(out))


class PlantedAION(StandinAION):
    """The stand-in with a planted image head and an inert colour head in encoder block 0.

    Config keys (besides the stand-in's): ``route_head`` (the only head that sees image
    tokens), ``inert_head`` (output-projection columns held at zero).
    """

    def __init__(self, config: dict):
        cfg = dict(config)
        route = int(cfg.pop("route_head", ROUTE_HEAD))
        inert = int(cfg.pop("inert_head", INERT_HEAD))
        super().__init__(cfg)
        heads = int(self.encoder[0].attn.num_heads)
        if aion_adapter.IMAGE_KEY not in self.encoder_embeddings:
            raise ConfigError("a planted stand-in needs image tokens (tok_image) among its inputs.")
        if not (0 <= route < heads and 0 <= inert < heads) or route == inert:
            raise ConfigError(
                f"route_head ({route}) and inert_head ({inert}) must be two different heads of 0..{heads - 1}."
            )
        self.route_head, self.inert_head = route, inert
        self.encoder[0].attn.__class__ = HeadMaskedAttention  # same parameters, per-head key masks
        self._image_keys: torch.Tensor | None = None
        with torch.no_grad():
            self._inert_columns().zero_()
        self.encoder[0].attn.proj.weight.register_hook(self._mask_inert_gradient)

    # -------- the inert head
    def _inert_slice(self) -> slice:
        dh = self.encoder[0].attn.proj.in_features // self.encoder[0].attn.num_heads
        return slice(self.inert_head * dh, (self.inert_head + 1) * dh)

    def _inert_columns(self) -> torch.Tensor:
        return self.encoder[0].attn.proj.weight[:, self._inert_slice()]

    def _mask_inert_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.clone()
        grad[:, self._inert_slice()] = 0
        return grad

    def planted_truth(self) -> dict[str, Any]:
        """What was planted, checked against the weights.

        Raises
        ------
        CheckpointError
            The inert head's output-projection columns are not zero (weights edited or
            trained without the gradient mask): the planted truth no longer holds.
        """
        cols = self._inert_columns().detach()
        if bool(torch.any(cols != 0)):
            raise CheckpointError(
                f"encoder.0.attn.proj columns of inert head {self.inert_head} are not zero "
                f"(max |w| {float(cols.abs().max()):.3g}); the planted truth does not hold. "
                "Retrain with astro.models.planted.train_planted."
            )
        return {
            "block": 0,
            "image_head": self.route_head,
            "inert_colour_head": self.inert_head,
            "image_site": aion_adapter.head_site(0, self.route_head),
            "inert_site": aion_adapter.head_site(0, self.inert_head),
            "image_head_truth": (
                "the only head that sees image tokens: every effect of the image on the redshift passes through it"
            ),
            "inert_head_truth": (
                "output-projection columns zero (no causal effect, exactly); trained to "
                "encode g-r, r-i, i-z linearly at the catalogue tokens"
            ),
        }

    # -------- routing
    def embed_inputs(self, input_dict, mask=None, num_encoder_tokens: int = 256):
        tokens, emb, enc_mask, mod_mask = super().embed_inputs(
            input_dict, mask=mask, num_encoder_tokens=num_encoder_tokens
        )
        if self.num_register_tokens:
            raise ConfigError("the planted stand-in does not support register tokens.")
        # visible image tokens (masked ones carry modality id -1 and are hidden anyway)
        self._image_keys = mod_mask == self.modality_info[aion_adapter.IMAGE_KEY]["id"]
        return tokens, emb, enc_mask, mod_mask

    def _image_key_mask(self, x: torch.Tensor) -> torch.Tensor:
        keys = self._image_keys
        if keys is None or keys.shape != x.shape[:2]:
            raise ConfigError(
                "PlantedAION routes image tokens from the masks of embed_inputs: run it through "
                "forward / _forward / encode, not forward_encoder directly."
            )
        return keys[:, None, :]

    def forward_encoder(self, x: torch.Tensor, encoder_mask: torch.Tensor) -> torch.Tensor:
        hidden = encoder_mask | self._image_key_mask(x)  # (B, 1, N): image keys hidden
        B, _, N = hidden.shape
        first = hidden[:, None].expand(B, self.encoder[0].attn.num_heads, 1, N).clone()
        first[:, self.route_head] = encoder_mask  # the image head sees them
        for i, blk in enumerate(self.encoder):
            x = blk(x, mask=first if i == 0 else hidden)
        return self.encoder_norm(x)

    def forward_decoder(self, y, context, encoder_mask, decoder_attention_mask):
        return super().forward_decoder(y, context, encoder_mask | self._image_key_mask(context), decoder_attention_mask)


def planted_config(
    cfg: StandinConfig | None = None, *, route_head: int = ROUTE_HEAD, inert_head: int = INERT_HEAD
) -> dict:
    """The config dict of a planted stand-in (the stand-in's, plus the planted heads)."""
    return dict(
        standin_config(cfg),
        route_head=int(route_head),
        inert_head=int(inert_head),
        scimech_class="astro.models.planted.PlantedAION",
    )


def build_planted(
    cfg: StandinConfig | None = None,
    seed: int = 0,
    codecs: dict[str, nn.Module] | None = None,
    *,
    route_head: int = ROUTE_HEAD,
    inert_head: int = INERT_HEAD,
) -> PlantedAION:
    """A freshly initialised planted stand-in (seeded; smooth scalar embeddings as :func:`standin.build`)."""
    torch.manual_seed(seed)
    model = PlantedAION(planted_config(cfg, route_head=route_head, inert_head=inert_head))
    if codecs is not None:
        ordinal_init(model, codecs, seed=seed)
    return model


class ColourReadout(nn.Module):
    """Auxiliary linear read-out of the colours from the inert head (training only).

    A forward pre-hook on ``encoder[0].attn.proj`` keeps the inert head's activation,
    averaged over the first ``n_scalar`` (catalogue) tokens, exactly what the study's head
    probes read; :meth:`loss` is the mean squared error of a linear map of it against the
    standardised colours of the batch.
    """

    def __init__(self, model: PlantedAION, colours: np.ndarray, n_scalar: int):
        super().__init__()
        c = np.asarray(colours, np.float32)
        self.target = torch.as_tensor((c - c.mean(0)) / (c.std(0) + 1e-6))
        sl = model._inert_slice()
        self.linear = nn.Linear(sl.stop - sl.start, c.shape[1])
        self._slice, self._n, self._act = sl, int(n_scalar), None
        self._handle = model.encoder[0].attn.proj.register_forward_pre_hook(self._keep)

    def _keep(self, module, args):
        self._act = args[0][:, : self._n, self._slice].mean(1)

    def loss(self, idx: torch.Tensor) -> torch.Tensor:
        return ((self.linear(self._act) - self.target[idx].to(self._act.device)) ** 2).mean()

    def remove(self) -> None:
        self._handle.remove()


def train_planted(
    train,
    *,
    epochs: int,
    batch_size: int = 64,
    seed: int = 0,
    lr: float = 3e-3,
    n_views: int = 10,
    image_features: str = "bands",
    colour_weight: float = 1.0,
    route_head: int = ROUTE_HEAD,
    inert_head: int = INERT_HEAD,
    log=None,
    device: str = "cpu",
):
    """Fit tokenizers on ``train`` and train a :class:`PlantedAION` (as :func:`astro.training.train_standin`,
    plus the colour read-out of the inert head). Returns ``(adapter, history)``."""
    t0 = time.perf_counter()
    codecs = standin.fit_codecs(train.catalog, seed=seed)
    tok = standin.PatchTokenizer(seed=seed, features=image_features).fit(train.images)
    model = build_planted(seed=seed, codecs=codecs, route_head=route_head, inert_head=inert_head)
    ad = aion_adapter.AIONRedshift(model, codecs, tok)
    views = (
        standin.noisy_views(ad, train.catalog, train.images, n_views, seed=seed)
        if n_views > 1
        else ad.tokenize(train.catalog, train.images)
    )
    n_scalar = sum(1 for k in (views[0] if isinstance(views, list) else views) if k in aion_adapter.LEGACY_SCALARS)
    readout = ColourReadout(model, photoz.colour_features(train.catalog)[:, :3], n_scalar)
    try:
        hist = standin.train(
            ad,
            views,
            np.asarray(train.catalog["z"], float),
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            lr=lr,
            aux_loss=lambda idx: colour_weight * readout.loss(idx),
            aux_params=list(readout.parameters()),
            log=log,
            device=device,
        )
    finally:
        readout.remove()
    model.planted_truth()  # the inert columns stayed zero
    hist.update(n_views=int(n_views), planted=True, seconds_total=time.perf_counter() - t0)
    return ad, hist
