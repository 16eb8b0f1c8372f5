"""Synthetic recordings in the neutral traces layout (:mod:`neuro.data`), for tests and the
recording-scale benchmark: ``N`` neurons driven by a low-rank latent linear dynamical system
with stimulus input, plus independent noise, so forecasting beats persistence and a model
that finds the latent subspace beats one that does not.

The conditions follow each other as blocks of equal length (like a light-sheet session's
stimulus protocol); each condition drives the latents through its own input direction.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

__all__ = ["latent_traces"]


def latent_traces(
    n_neurons: int,
    n_steps: int,
    *,
    rank: int = 8,
    conditions=("a", "b", "c", "d"),
    noise: float = 0.5,
    dt: float = 1.0 / 1.0,
    seed: int = 0,
    dtype=np.float32,
) -> xr.Dataset:
    """``activity (time, neuron)`` = ``latents (time, rank) @ loadings (rank, neuron)`` + noise,
    with ``condition (time)`` in consecutive equal blocks and a ``time`` coordinate (s).

    The latents follow ``z[t+1] = A z[t] + b_c + 0.3 e[t]`` (``A``: a rotation scaled to 0.97,
    so slow damped oscillations; ``b_c``: the condition's input). Built in float32 in blocks
    of neurons, so a 10,000 x 5,000 recording costs its own 200 MB and little more."""
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((rank, rank)))
    A = 0.97 * q
    conds = np.asarray(conditions).astype(str)
    drive = 0.3 * rng.standard_normal((len(conds), rank))
    label = conds[np.minimum(np.arange(n_steps) * len(conds) // n_steps, len(conds) - 1)]
    k_of = {c: i for i, c in enumerate(conds)}
    z = np.zeros((n_steps, rank))
    for t in range(1, n_steps):
        z[t] = A @ z[t - 1] + drive[k_of[label[t]]] + 0.3 * rng.standard_normal(rank)
    load = rng.standard_normal((rank, n_neurons)) / np.sqrt(rank)
    X = np.empty((n_steps, n_neurons), dtype)
    for a in range(0, n_neurons, 2048):
        b = min(a + 2048, n_neurons)
        X[:, a:b] = z @ load[:, a:b] + noise * rng.standard_normal((n_steps, b - a))
    return xr.Dataset(
        {"activity": (("time", "neuron"), X), "condition": ("time", label)},
        coords={"time": ("time", np.arange(n_steps) * dt, {"units": "s"}), "neuron": np.arange(n_neurons)},
    )
