"""Counter-based Gaussian process noise: a trial's noise is a function of (key, step, column).

Every trial holds a 64-bit key (drawn from the simulator's generator when its state is made);
the standard normals of columns ``2k`` and ``2k + 1`` of step ``n`` come from Marsaglia's
polar method on the two 32-bit halves of SplitMix64 (Steele, Lea & Flood 2014) hashes of the
counter ``(n * n_pairs + k) * 64 + j``, attempt ``j`` = 0, 1, ... until the point falls in
the unit disc (probability pi / 4 per attempt; 64 failures in a row, p ~ 1e-43, would fall
back to the last attempt's Box-Muller). Because nothing is carried from one draw to the next, the
numpy reference and the compiled path (:mod:`neuro.sim.compiled`, same formulas) produce the
same numbers, trials can run on any number of threads, and a trial's noise does not depend
on which other trials share its batch.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GOLDEN", "ATTEMPTS", "normals", "n_pairs", "draw_keys"]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW = np.uint64(0xFFFFFFFF)
_TWO_M31 = 2.0**-31
ATTEMPTS = 64


def n_pairs(n_cols: int) -> int:
    """Counters per step: one per pair of columns."""
    return (n_cols + 1) // 2


def draw_keys(rng: np.random.Generator, batch: int) -> np.ndarray:
    """One uniformly random 64-bit key per trial."""
    return rng.integers(0, np.iinfo(np.uint64).max, size=batch, dtype=np.uint64, endpoint=True)


def _mix(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _unit_pair(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two uniforms in (-1, 1) (never 0) from the halves of 64-bit hashes."""
    # both halves are < 2**32, so the int64 view is exact (and converts to float much faster)
    u = ((x >> np.uint64(32)).view(np.int64) + 0.5) * _TWO_M31 - 1.0
    v = ((x & _LOW).view(np.int64) + 0.5) * _TWO_M31 - 1.0
    return u, v


def normals(keys: np.ndarray, first_step: int, steps: int, n_cols: int) -> np.ndarray:
    """Standard normals ``(steps, B, n_cols)`` for steps ``first_step ... first_step + steps - 1``."""
    keys = np.asarray(keys, np.uint64)
    P = n_pairs(n_cols)
    step = np.arange(first_step, first_step + steps, dtype=np.uint64)[:, None, None]
    pair = np.arange(P, dtype=np.uint64)[None, None, :]
    base = (step * np.uint64(P) + pair) * np.uint64(ATTEMPTS)
    with np.errstate(over="ignore"):
        u, v = _unit_pair(_mix(keys[None, :, None] + (base + np.uint64(1)) * GOLDEN))
    s = u * u + v * v
    bad = s >= 1.0
    s[bad] = 0.5
    f = np.sqrt(-2.0 * np.log(s) / s)
    z0, z1 = u * f, v * f
    idx = np.nonzero(bad)
    for j in range(1, ATTEMPTS):  # the ~21 % of pairs outside the disc try again
        if not len(idx[0]):
            break
        with np.errstate(over="ignore"):
            x = _mix(keys[idx[1]] + (base[idx[0], 0, idx[2]] + np.uint64(j + 1)) * GOLDEN)
        u, v = _unit_pair(x)
        s = u * u + v * v
        ok = s < 1.0
        if j == ATTEMPTS - 1:  # never in practice (p ~ 1e-43): Box-Muller on the last attempt
            r = np.sqrt(-2.0 * np.log(0.5 * (u + 1.0)))
            u, v = np.where(ok, u, r * np.cos(np.pi * v)), np.where(ok, v, r * np.sin(np.pi * v))
            s = np.where(ok, s, np.exp(-0.5))  # f = 1
            ok = np.ones_like(ok)
        s = np.where(ok, s, 0.5)
        f = np.sqrt(-2.0 * np.log(s) / s)
        sel = tuple(i[ok] for i in idx)
        z0[sel] = u[ok] * f[ok]
        z1[sel] = v[ok] * f[ok]
        idx = tuple(i[~ok] for i in idx)
    z = np.empty((steps, len(keys), 2 * P))
    z[..., 0::2] = z0
    z[..., 1::2] = z1
    return z[..., :n_cols]
