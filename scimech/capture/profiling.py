"""The model profile shown to the user, and asked from outside a verb: :func:`profile` (``scimech.profile``:
what every verb assumes about a model, as a table) and :func:`rows_interact`.

Both measure through a verb session (:mod:`scimech.capture.session`, in eval mode as the verbs measure),
which is built on :mod:`scimech.capture.profile`: they live here, above both, so the profile never
imports the session back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import torch
from torch import nn

from scimech.capture.batches import is_graph_batch
from scimech.capture.profile import ModelProfile, measure, profile_of, tolerance
from scimech.capture.session import Session

__all__ = ["profile", "rows_interact", "ProfileTable"]


class ProfileTable(pd.DataFrame):
    """The profile as a table: a DataFrame whose repr shows every column (a notebook's first look)."""

    @property
    def _constructor(self):
        return ProfileTable

    def __repr__(self) -> str:
        return self.to_string()


def _samples_text(samples: Any, batch: Any, prof: ModelProfile) -> str:
    if samples is None:
        if is_graph_batch(batch):
            return "graphs of the batch (its batch vector)"
        if prof.rows_interact is None:
            return "not checked"
        return "rows independent" if not prof.rows_interact else f"rows interact: {prof.rows_interact}"
    if isinstance(samples, torch.Tensor):
        return f"declared: {int(samples.unique().numel())} samples in {samples.shape[0]} rows"
    return f"declared: {samples!r}"


def profile(
    model: nn.Module,
    inputs: Any,
    sites: str | Sequence[str],
    *,
    forward: Callable | None = None,
    samples: Any = None,
    layouts=None,
    axes=None,
):
    """What every verb assumes about ``model`` on ``inputs``, as a table (one row per site).

    Measured on the first batch of ``inputs`` (at most three forward passes, none where the
    facts are cached already; later verbs on the same model, ``forward=`` and input signature
    pay nothing for them).

    Parameters
    ----------
    model
        The model.
    inputs
        One batch, or an iterable of batches (the first is measured).
    sites
        Site strings (:mod:`scimech.capture.sites`).
    forward, samples, layouts, axes
        As the verbs take them.

    Returns
    -------
    ProfileTable
        A pandas DataFrame (its repr shows every column) indexed by ``site``: ``calls`` (per forward pass), ``shapes`` (of each call, the model's
        own layout), ``dtype``, ``tolerance`` (how far two passes may differ, relative),
        ``layout`` (its axes) and ``layout_from`` (``declared`` / ``inferred``), ``samples``
        (what a row is), ``repeatable``, ``needs_grad``, ``in_place`` (the model writes into
        the site's output), ``packing`` (for a declared ``batch*window`` layout: whether the rows
        are packed sample by sample, checked on a half batch). ``.attrs["profile"]`` is the :class:`ModelProfile`.

    Examples
    --------
    >>> model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    >>> table = profile(model, torch.randn(8, 3), ["0", "2"])
    >>> list(table.index)
    ['0', '2']
    >>> int(table.loc["0", "calls"]), table.loc["0", "shapes"], table.loc["0", "layout"]  # 8 rows of 4 features
    (1, [(8, 4)], 'batch feature')
    >>> table.loc["2", "shapes"], bool(table.loc["2", "repeatable"]), bool(table.loc["2", "needs_grad"])
    ([(8, 1)], True, False)
    """
    from scimech.capture.batches import is_one_batch, iter_batches
    from scimech.capture.sites import resolve_site

    names = [sites] if isinstance(sites, str) else list(sites)
    batch = inputs if is_one_batch(inputs) else next(iter(b for _, b in iter_batches(inputs, 1 << 30)))
    resolved = [resolve_site(model, s, layouts, axes) for s in names]
    prof = profile_of(model, batch, forward)
    needs = {"repeatable", "rows", "grad", "sites", "packing"} - ({"rows"} if samples is not None else set())
    with Session(model, "profile", batch, forward=forward, samples=samples):  # in eval mode, as the verbs measure
        measure(
            model,
            batch,
            forward,
            prof,
            needs,
            [
                s
                for s in resolved
                if s.name not in prof.sites
                or (prof.sites[s.name].packing_layout != str(s.axes) and s.axes is not None and s.axes.packed)
            ],
        )
    rows = []
    for s in names:
        f = prof.sites[s]
        rows.append(
            {
                "site": s,
                "calls": f.calls,
                "shapes": f.shapes if f.changing_shape else f.shapes[:1],
                "dtype": f.dtype,
                "tolerance": tolerance(getattr(torch, f.dtype, None)),
                "layout": f.layout,
                "layout_from": f.layout_from,
                "samples": _samples_text(samples, batch, prof),
                "repeatable": prof.repeatable,
                "needs_grad": prof.needs_grad,
                "in_place": f.in_place,
                "packing": f.packing or "-",
            }
        )
    table = ProfileTable(pd.DataFrame(rows).set_index("site"))
    table.attrs["profile"] = prof
    return table


def rows_interact(model: nn.Module, batch: Any, forward: Callable | None = None) -> str | None:
    """Why the rows of ``batch`` are not independent samples, or ``None`` if the first half of
    its rows alone gives the outputs it gives within the whole batch (from the model's profile)."""

    with Session(model, "rows_interact", batch, forward=forward):  # in eval mode, as the verbs measure
        prof = profile_of(model, batch, forward)
        measure(model, batch, forward, prof, {"rows"})
    return prof.rows_interact or None
