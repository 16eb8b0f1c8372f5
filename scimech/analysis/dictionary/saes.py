"""Sparse dictionaries: TopK, BatchTopK and JumpReLU sparse autoencoders, and transcoders.

A dictionary writes an activation ``x`` (width ``d_in``) as a sparse, non-negative code
``z`` over ``n_features`` learned directions (the rows of ``W_dec``, kept at unit norm)::

    pre = (x / scale - b_pre) @ W_enc + b_enc
    z   = activation(pre)                      # sparse, >= 0
    x^  = scale * (z @ W_dec + b_dec)

``scale`` is fixed from the training data so that the mean squared norm of ``x / scale``
is ``d_in`` (sizes and learning rates then transfer between sites). A *transcoder* is the
same module with an output width of its own: it reads one site and predicts another
(``x^`` is the output site's activation).

The three activations:

- :class:`TopK` (Gao et al. 2024): the ``k`` largest pre-activations of each row, ReLU'd.
- :class:`BatchTopK` (Bussmann et al. 2024): in training, the ``k * batch`` largest
  pre-activations over the whole batch (rows use as many features as they need); in use,
  a threshold learned in training (the running mean of the smallest kept value).
- :class:`JumpReLU` (Rajamanoharan et al. 2024): ``z = pre * (pre > theta)`` with a
  learned threshold per feature, trained through straight-through estimators with a
  rectangle kernel of bandwidth ``bandwidth`` and an L0 penalty.

These are small torch modules rather than a library's classes: SAELens 6 pins
TransformerLens 3 (scimech supports TransformerLens 4) and pulls a language-model stack;
sparsify ships only TopK and does not build here; dictionary_learning pins a CUDA torch.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn

__all__ = ["SparseDictionary", "TopK", "BatchTopK", "JumpReLU", "KINDS", "build"]


class SparseDictionary(nn.Module):
    """A dictionary of ``n_features`` unit-norm directions (see the module docstring).

    Parameters
    ----------
    d_in
        Width of the activations read.
    n_features
        Number of dictionary features (directions).
    d_out
        Width of the activations written (a transcoder's output site); default ``d_in``.
    k
        Mean number of active features per row (TopK, BatchTopK); ignored by JumpReLU.
    seed
        Seed of the initial directions.
    """

    kind: ClassVar[str] = ""
    #: on a dictionary moved by :func:`scimech.analysis.dictionary.realign`: the map it was moved with
    realignment: str
    # buffers (register_buffer), typed for the type checker
    b_pre: torch.Tensor
    scale: torch.Tensor
    scale_out: torch.Tensor

    def __init__(
        self, d_in: int, n_features: int, *, d_out: int | None = None, k: int = 8, seed: int = 0, **extra: Any
    ):
        super().__init__()
        if d_in < 1 or n_features < 1:
            raise ValueError(f"d_in and n_features must be >= 1; got {d_in} and {n_features}.")
        if not 1 <= k <= n_features:
            raise ValueError(f"k must be between 1 and n_features ({n_features}); got {k}.")
        self.d_in, self.n_features, self.d_out, self.k = int(d_in), int(n_features), int(d_out or d_in), int(k)
        gen = torch.Generator().manual_seed(seed)
        dec = torch.randn(n_features, self.d_out, generator=gen)
        dec = dec / dec.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(dec)
        # tied initialisation (Gao et al.): the encoder starts as the decoder's transpose
        enc = dec.T.clone() if self.d_out == self.d_in else torch.randn(d_in, n_features, generator=gen) / d_in**0.5
        self.W_enc = nn.Parameter(enc)
        self.b_enc = nn.Parameter(torch.zeros(n_features))
        self.b_dec = nn.Parameter(torch.zeros(self.d_out))
        self.register_buffer("b_pre", torch.zeros(self.d_in))
        self.register_buffer("scale", torch.ones(()))
        self.register_buffer("scale_out", torch.ones(()))

    @property
    def transcoder(self) -> bool:
        return self.d_out != self.d_in

    def config(self) -> dict[str, Any]:
        """What :func:`build` needs to make this dictionary again (saved with its weights)."""
        return {"kind": self.kind, "d_in": self.d_in, "n_features": self.n_features, "d_out": self.d_out, "k": self.k}

    def pre_activation(self, x: torch.Tensor) -> torch.Tensor:
        return (x / self.scale - self.b_pre) @ self.W_enc + self.b_enc

    def activate(self, pre: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``(..., n_features)`` of activations ``(..., d_in)``."""
        lead = x.shape[:-1]
        z = self.activate(self.pre_activation(x.reshape(-1, self.d_in)))
        return z.reshape(*lead, self.n_features)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """The activation ``(..., d_out)`` written by feature activations ``z``."""
        return (z @ self.W_dec + self.b_dec) * self.scale_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The reconstruction (a transcoder: the prediction of the output site) of ``x``."""
        return self.decode(self.encode(x))

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Unit-norm decoder rows (feature directions); the encoder's columns take the norm,
        so the map from activations to reconstructions is unchanged."""
        norm = self.W_dec.norm(dim=1).clamp_min(1e-12)
        self.W_dec.div_(norm[:, None])
        self.W_enc.mul_(norm[None, :])
        self.b_enc.mul_(norm)
        self._rescaled(norm)

    def _rescaled(self, norm: torch.Tensor) -> None:
        """Hook for activations with per-feature state in pre-activation units."""

    @torch.no_grad()
    def remove_parallel_gradient(self) -> None:
        """Drop the part of the decoder's gradient along its rows (Gao et al.): the step then
        moves directions, not their (fixed, unit) norms."""
        if self.W_dec.grad is not None:
            g = self.W_dec.grad
            g.sub_((g * self.W_dec).sum(1, keepdim=True) * self.W_dec)

    def sparsity_loss(self, pre: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """Extra training loss of the activation (JumpReLU's L0 penalty); 0 for TopK kinds."""
        return pre.new_zeros(())


class TopK(SparseDictionary):
    """The ``k`` largest pre-activations of each row, ReLU'd (Gao et al. 2024)."""

    kind = "topk"

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        vals, idx = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter(-1, idx, vals.relu())


class BatchTopK(SparseDictionary):
    """The ``k * rows`` largest pre-activations of the batch in training; a learned threshold
    in use (Bussmann et al. 2024)."""

    kind = "batchtopk"
    threshold: torch.Tensor  # a buffer

    def __init__(self, *args, threshold_momentum: float = 0.01, **kw):
        super().__init__(*args, **kw)
        self.threshold_momentum = float(threshold_momentum)
        self.register_buffer("threshold", torch.tensor(float("nan")))

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        pre = pre.relu()
        if not self.training:
            if torch.isnan(self.threshold):
                raise RuntimeError(
                    "This BatchTopK dictionary was never trained: it has no threshold for use. "
                    "Train it (scimech.analysis.dictionary.train_dictionary) or use kind='topk'."
                )
            return pre * (pre > self.threshold)
        flat = pre.flatten()
        keep = min(self.k * pre.shape[0], flat.numel())
        vals, idx = flat.topk(keep)
        z = torch.zeros_like(flat).scatter(0, idx, vals).reshape(pre.shape)
        positive = vals[vals > 0]
        if positive.numel():
            with torch.no_grad():
                low = positive.min()
                m = self.threshold_momentum
                self.threshold.copy_(low if torch.isnan(self.threshold) else (1 - m) * self.threshold + m * low)
        return z

    def _rescaled(self, norm: torch.Tensor) -> None:
        pass  # one threshold for all features: pre-activations of unit-norm rows keep their scale in use


class _JumpReLUFn(torch.autograd.Function):
    """``x * (x > theta)``; gradient to ``theta`` through a rectangle kernel (straight-through)."""

    @staticmethod
    def forward(ctx, x, theta, bandwidth):
        ctx.save_for_backward(x, theta)
        ctx.bandwidth = bandwidth
        return x * (x > theta)

    @staticmethod
    def backward(ctx, grad):
        x, theta = ctx.saved_tensors
        eps = ctx.bandwidth
        kernel = ((x - theta).abs() < eps / 2).to(x.dtype) / eps
        return grad * (x > theta), (-(theta * kernel) * grad).sum(0), None


class _StepFn(torch.autograd.Function):
    """``x > theta`` as 0/1; gradient to ``theta`` through a rectangle kernel (the L0 penalty)."""

    @staticmethod
    def forward(ctx, x, theta, bandwidth):
        ctx.save_for_backward(x, theta)
        ctx.bandwidth = bandwidth
        return (x > theta).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        x, theta = ctx.saved_tensors
        eps = ctx.bandwidth
        kernel = ((x - theta).abs() < eps / 2).to(x.dtype) / eps
        return None, (-kernel * grad).sum(0), None


class JumpReLU(SparseDictionary):
    """``z = pre * (pre > theta)``, a learned threshold per feature, an L0 penalty
    (Rajamanoharan et al. 2024). ``l0_coefficient`` weighs the mean number of active
    features against the reconstruction error; ``bandwidth`` is the straight-through
    kernel's width in pre-activation units; ``initial_threshold`` the starting threshold.
    Pre-activations are in units where a row's mean squared norm is ``d_in``: the defaults
    (0.05, 0.1, 0.5) recover a planted 3-sparse dictionary of 48 directions in 32 dims from
    6000 rows in 20 epochs (``tests/scimech/test_dictionary.py``)."""

    kind = "jumprelu"

    def __init__(
        self, *args, l0_coefficient: float = 0.05, bandwidth: float = 0.1, initial_threshold: float = 0.5, **kw
    ):
        super().__init__(*args, **kw)
        self.l0_coefficient, self.bandwidth = float(l0_coefficient), float(bandwidth)
        self.log_threshold = nn.Parameter(
            torch.full((self.n_features,), float(torch.log(torch.tensor(initial_threshold))))
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "l0_coefficient": self.l0_coefficient, "bandwidth": self.bandwidth}

    def activate(self, pre: torch.Tensor) -> torch.Tensor:
        return _JumpReLUFn.apply(pre.relu(), self.log_threshold.exp(), self.bandwidth)

    def sparsity_loss(self, pre: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        l0 = _StepFn.apply(pre.relu(), self.log_threshold.exp(), self.bandwidth).sum(-1).mean()
        return self.l0_coefficient * l0

    def _rescaled(self, norm: torch.Tensor) -> None:
        self.log_threshold.add_(norm.log())  # the threshold is in pre-activation units, which scaled by norm


KINDS: dict[str, type[SparseDictionary]] = {c.kind: c for c in (TopK, BatchTopK, JumpReLU)}


def build(kind: str, d_in: int, n_features: int, **kw: Any) -> SparseDictionary:
    """A dictionary of ``kind`` (``"topk"``, ``"batchtopk"`` or ``"jumprelu"``)."""
    if kind not in KINDS:
        raise ValueError(f"Unknown dictionary kind {kind!r}; choose from {', '.join(KINDS)}.")
    return KINDS[kind](d_in, n_features, **kw)
