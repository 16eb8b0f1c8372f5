"""Ablation methods: what replaces a site's activation, and what each method needs.

Miller, Chughtai & Saunders (2024) show that the choice of ablation changes conclusions, so
every method is a small named object stating what it needs and how it draws, and every
result records its name. :func:`resolve_method` checks a request once, with one message
form, for :func:`~scimech.causal.intervene.ablate` and :func:`~scimech.causal.intervene.ablation_sweep`.

All methods act on the canonical view of a site's activation, ``(batch, [window],
*positions, feature)`` (:mod:`scimech.capture.layout`): the reference set is averaged over samples
only, and a resampled sample takes one reference sample whole (every position and window).
Where a sample is several rows of the same mesh (:class:`~scimech.causal.samples.FixedMesh`), the
mean is taken per node and a resampled sample takes a reference sample's rows node for node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from scimech.capture.session import integer_activation
from scimech.causal.samples import mesh_mismatch
from scimech.errors import DataValidationError

__all__ = ["AblationMethod", "Method", "METHODS", "resolve_method", "draw_rows"]

AblationMethod = Literal["resample", "mean", "zero", "scale"]


@dataclass(frozen=True)
class Method:
    """One ablation method. ``needs_reference``: reference activations are recorded first;
    ``needs_factor``: a multiplier is required."""

    name: str
    needs_reference: bool = False
    needs_factor: bool = False
    description: str = ""

    #: whether the method swaps whole samples between the run and the reference (it draws rows)
    draws_rows = False
    #: whether it computes new values (a mean, a product), which integer codes, indices and masks
    #: cannot hold: torch would round them back to the site's dtype
    computes_values = False

    def check_dtype(self, site: str, t: torch.Tensor) -> None:
        """Refuse a method that computes new values on a site that cannot hold them."""
        if self.computes_values and not (t.is_floating_point() or t.is_complex()):
            raise integer_activation(
                f"method={self.name!r}",
                site,
                t,
                f"which cannot hold {'a mean' if self.name == 'mean' else 'a scaled value'}; torch would round it "
                "back (0.5 x True is True, 0.5 x 3 is 1)",
                "Use method='resample' (whole reference samples) or method='zero', or patch the site with "
                "patching_sweep.",
            )

    def draw(self, gen: torch.Generator | None, n_ref: int, n: int, nodes: int = 1) -> torch.Tensor | None:
        """The reference rows this method takes for ``n`` rows (``None``: it takes none), drawn from
        ``gen`` (``None``: torch's default generator); ``nodes``: rows per sample of a fixed mesh (:class:`~scimech.causal.samples.FixedMesh`)."""
        return None

    def replace(
        self,
        current: torch.Tensor,
        ref: torch.Tensor | None,
        factor: float | None,
        rows: torch.Tensor | None,
        nodes: int = 1,
    ) -> torch.Tensor:
        """The replacement of ``current`` (the site's part of the activation).

        ``ref``: reference activations (samples on dim 0); ``rows``: for resampling, the
        reference row drawn for each row (:meth:`draw`); ``nodes``: rows per sample of a
        fixed mesh, row ``k`` of every sample the same node.
        """
        raise NotImplementedError


class _Zero(Method):
    def replace(self, current, ref, factor, rows, nodes=1):
        return torch.zeros_like(current)


class _Scale(Method):
    computes_values = True

    def replace(self, current, ref, factor, rows, nodes=1):
        return current * factor


class _Mean(Method):
    computes_values = True

    def replace(self, current, ref, factor, rows, nodes=1):  # per position and window: samples averaged
        if nodes == 1:
            return ref.mean(dim=0, keepdim=True).expand_as(current).to(current.dtype)
        per_node = by_node(ref, nodes, "reference").mean(dim=0)  # each node over the reference samples
        n = by_node(current, nodes, "run").shape[0]
        return per_node.repeat(n, *([1] * (per_node.dim() - 1))).to(current.dtype)


class _Resample(Method):
    draws_rows = True

    def draw(self, gen, n_ref, n, nodes=1):
        if nodes == 1:
            return draw_rows(gen, n_ref, n)
        for rows, what in ((n_ref, "reference"), (n, "run")):
            _whole_samples(rows, nodes, what)
        picked = draw_rows(gen, n_ref // nodes, n // nodes)  # a reference sample for each sample
        return (picked[:, None] * nodes + torch.arange(nodes)).reshape(-1)  # its rows, node for node

    def replace(self, current, ref, factor, rows, nodes=1):  # whole reference samples
        return ref[rows.to(ref.device)].to(current.dtype)


METHODS: dict[str, Method] = {
    "resample": _Resample(
        "resample", needs_reference=True, description="each sample's activation replaced by a random reference sample's"
    ),
    "mean": _Mean("mean", needs_reference=True, description="the mean activation over the reference set"),
    "zero": _Zero("zero", description="zeros"),
    "scale": _Scale("scale", needs_factor=True, description="multiplied by factor"),
}


def resolve_method(method: str, *, reference, factor: float | None, verb: str) -> Method:
    """The :class:`Method` named ``method``, checked against what it needs (one message form)."""
    m = METHODS.get(method) if isinstance(method, str) else None
    if m is None:
        raise ValueError(f"The 'method' option of {verb} must be one of {tuple(METHODS)}. Got {method!r} instead.")
    if m.needs_factor and (factor is None or isinstance(factor, bool) or not isinstance(factor, (int, float))):
        raise ValueError(
            f"The 'factor' option of {verb} must be a number with method={m.name!r} "
            f"(e.g. 0.5 to halve, 2.0 to double). Got {factor!r} instead."
        )
    if m.needs_reference and reference is None:
        raise ValueError(
            f"method={m.name!r} of {verb} needs reference= (inputs from the data distribution, or "
            "activations recorded from them). Got None instead; or use method='zero'."
        )
    return m


def check_reference(site: str, ref: torch.Tensor, current: torch.Tensor) -> None:
    """Reference activations must be shaped like the run's, sample for sample."""
    if ref.shape[1:] != current.shape[1:]:
        raise DataValidationError(
            f"Reference activations at {site!r} have shape {tuple(ref.shape[1:])} per sample but the run has "
            f"{tuple(current.shape[1:])} (a different sequence length or grid?). Use reference inputs shaped like "
            "the inputs."
        )


def _whole_samples(rows: int, nodes: int, what: str) -> None:
    if rows % nodes:
        raise mesh_mismatch(nodes, rows, f"{what} activation")


def by_node(t: torch.Tensor, nodes: int, what: str) -> torch.Tensor:
    """``(samples * nodes, ...)`` rows as ``(samples, nodes, ...)`` (a fixed mesh's rows, sample by sample)."""
    _whole_samples(t.shape[0], nodes, what)
    return t.reshape(t.shape[0] // nodes, nodes, *t.shape[1:])


def draw_rows(gen: torch.Generator | None, n_ref: int, n: int) -> torch.Tensor:
    """``n`` reference rows drawn uniformly with replacement, on the CPU generator (the same draw
    whatever device the model is on)."""
    return torch.randint(0, n_ref, (n,), generator=gen, device="cpu")
