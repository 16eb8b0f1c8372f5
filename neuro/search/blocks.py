"""The offline proposer's block library: a program is a *genome* (a dict of block choices)
rendered into readable, self-contained numpy source by :func:`render`.

The genome travels inside the source (``# GENOME: {...}``), so any node's code can be parsed
back (:func:`parse_genome`). Blocks:

- ``readout``: ``rollout`` (a transition function ``x[t+1] = f(x[t], ..., s[t+1])`` fitted one
  step ahead and iterated) | ``direct`` (one linear map per unit from its inputs' last lags and
  the known future stimulus to the whole horizon, the structure of NLinear/TiDE);
- ``order``: activity lags (delays) used as inputs;
- ``recurrence``: which units feed unit ``i``: ``dense`` (all) | ``lowrank`` (itself and the
  first ``rank`` principal components of the population) | ``diagonal`` (itself) | ``masked``
  (the anatomical wiring prior, with Dale's-law signs when ``sign`` is on);
- ``leak``: fit the change from the current state (a leaky integrator around ``x[t]``; for
  ``direct``, NLinear's "subtract the last value") or the state itself;
- ``stim_filter``: ``none`` | ``instant`` | ``exp`` (a bank of exponential filters, ``taus``
  in steps);
- ``oscillator``: add the velocity ``x[t] - x[t-1]`` (second-order, oscillatory dynamics);
- ``nonlin``: ``linear`` | ``tanh`` | ``relu`` applied to the current-state input;
- ``poly``: quadratic and cubic self-terms (expressive, sometimes unstable in rollouts);
- ``loss``: ``l2`` (ridge) | ``l1`` (least absolute deviations by iteratively reweighted least
  squares: the score is an MAE, whose minimiser is the conditional median, and neural activity
  is bursty) with smoothing ``eps`` (z units);
- ``alpha``: ridge penalty.

Genomes written before a block existed parse with that block's default (:data:`DEFAULTS`).
"""

from __future__ import annotations

import json
import re

import numpy as np

__all__ = [
    "TEMPLATE",
    "CHOICES_FREE",
    "CHOICES_PRIOR",
    "DEFAULTS",
    "render",
    "parse_genome",
    "random_genome",
    "complete",
    "canonical",
    "active_blocks",
    "baseline_genomes",
    "mechanism_genomes",
]

TEMPLATE = '''# GENOME: {genome_json}
"""Candidate forecaster (offline proposer): {summary}."""
import numpy as np

G = {genome_py}


def _stim_feats(S, taus):
    """Stimulus features (n, T, K'): none, instantaneous, or exponential filters (taus, steps)."""
    if G["stim_filter"] == "none":
        return S[..., :0]
    if G["stim_filter"] == "instant":
        return S
    out = []
    for tau in taus:
        a = 1.0 / tau
        y = np.zeros_like(S[:, 0])
        ys = []
        for t in range(S.shape[1]):
            y = y + a * (S[:, t] - y)
            ys.append(y)
        out.append(np.stack(ys, 1))
    return np.concatenate([S] + out, -1)


def _phi(x):
    if G["nonlin"] == "tanh":
        return np.tanh(x)
    if G["nonlin"] == "relu":
        return np.maximum(x, 0.0)
    return x


def _solve(A, Y, alpha, loss, eps, columns=False):
    """Weights (d, m) of ridge (loss 'l2') or of least absolute deviations ('l1', iteratively
    reweighted least squares, one weight per sample); the last column of A is the intercept.
    ``columns``: the columns of Y are separate fits that share the inputs A (units of a dense
    network), each with its own reweighting; otherwise one weight per sample for all columns
    (the steps of one unit's horizon)."""
    R = alpha * np.eye(A.shape[1])
    R[-1, -1] = 0.0
    w = np.linalg.solve(A.T @ A + R, A.T @ Y)
    if loss != "l1":
        return w
    A32 = A.astype(np.float32)
    if columns:
        return np.stack([_reweight(A, A32, Y[:, j], w[:, j], R, eps) for j in range(Y.shape[1])], 1)
    return _reweight(A, A32, Y, w, R, eps)


def _reweight(A, A32, Y, w, R, eps):
    """Four reweighting passes of least absolute deviations from the ridge weights w. The
    reweighted Gram matrices are summed in float32 (A32: 2x faster; relative error ~1e-7, far
    below the ridge term) and solved in float64."""
    for _ in range(4):
        r = np.abs(Y - A @ w)
        r = r.mean(1) if r.ndim > 1 else r
        q = 1.0 / np.maximum(r, eps)
        q = q / q.mean()
        gram = (A32 * q.astype(np.float32)[:, None]).T @ A32
        w = np.linalg.solve(gram.astype(float) + R, (A.T * q) @ Y)
    return w


class Model:
    def _setup(self, series, meta):
        """Which units feed each unit (post x pre) and the population projection (lowrank)."""
        N = series.shape[-1]
        self.N = N
        rec = G["recurrence"]
        self.sign = meta["prior_sign"] if (rec == "masked" and G["sign"]) else None
        self.proj = None
        if rec == "masked":
            self.pre = [np.flatnonzero((meta["prior_mask"][i] > 0) | (np.arange(N) == i)) for i in range(N)]
        elif rec in ("diagonal", "lowrank"):
            self.pre = [np.array([i]) for i in range(N)]
        else:
            self.pre = [np.arange(N) for _ in range(N)]
        if rec == "lowrank":
            flat = series.reshape(-1, N)
            _, _, vt = np.linalg.svd(flat - flat.mean(0), full_matrices=False)
            self.proj = vt[: G["rank"]].T          # (N, rank) principal directions
        # dense without self-terms: every unit has the same inputs
        self.shared = rec == "dense" and not G["poly"]

    def _unit_feats(self, lags, i):
        """Inputs of unit i from its presynaptic units' lags [(n, N) at t, t-1, ...]."""
        pre = self.pre[i]
        cols = [_phi(lags[0][:, pre])] + [lags[k][:, pre] for k in range(1, len(lags))]
        if G["oscillator"] and len(lags) > 1:
            cols.append(lags[0][:, pre] - lags[1][:, pre])
        if self.proj is not None:
            cols += [lag @ self.proj for lag in lags]
        if G["poly"]:
            cols.append(np.stack([lags[0][:, i] ** 2, lags[0][:, i] ** 3], 1))
        return cols

    # ------------------------------------------------------------- fitting
    def fit(self, series, stim, meta):
        self._setup(series, meta)
        self.p = max(1, min(G["order"], 8))
        if G["readout"] == "direct":
            return self._fit_direct(series, stim, meta)
        return self._fit_rollout(series, stim)

    def _fit_rollout(self, series, stim):
        n, T, N = series.shape
        p = max(self.p, 2)
        SF = _stim_feats(stim, G["taus"])
        lags = [series[:, p - 1 - k : T - 1 - k].reshape(-1, N) for k in range(p)][: max(self.p, 1)]
        if G["oscillator"] and len(lags) < 2:
            lags.append(series[:, p - 2 : T - 2].reshape(-1, N))
        U = SF[:, p:].reshape(n * (T - p), SF.shape[-1])
        Y = series[:, p:].reshape(-1, N)
        if G["leak"]:
            Y = Y - lags[0]
        self.Wall = None
        if self.shared:   # every unit sees the same inputs: one design, all units at once
            A = np.concatenate(self._unit_feats(lags, 0) + [U, np.ones((len(U), 1))], 1)
            self.Wall = _solve(A, Y, G["alpha"], G["loss"], G["eps"], columns=True)
            self.W = [self.Wall[:, i] for i in range(N)]
        else:
            self.W = []
            for i in range(N):
                A = np.concatenate(self._unit_feats(lags, i) + [U, np.ones((len(U), 1))], 1)
                self.W.append(_solve(A, Y[:, i], G["alpha"], G["loss"], G["eps"]))
        if self.sign is not None:   # Dale's law on the current-state input of other units
            for i in range(N):
                pre = self.pre[i]
                w = self.W[i][: len(pre)]
                bad = (np.sign(w) * self.sign[pre] < 0) & (pre != i)
                w[bad] = 0.0
        return self

    def _windows(self, series, stim, C, H):
        n, T, N = series.shape
        starts = np.arange(0, T - C - H + 1, max(1, (C + H) // 16))
        i = np.repeat(np.arange(n), len(starts))
        s = np.tile(starts, n)
        ctx = series[i[:, None], s[:, None] + np.arange(C)]
        fut = series[i[:, None], s[:, None] + C + np.arange(H)]
        st = stim[i[:, None], s[:, None] + np.arange(C + H)]
        return ctx, st, fut

    def _direct_design(self, ctx, S, i):
        """Inputs of unit i for a direct forecast: its presynaptic units' last lags and the
        stimulus features now and over the horizon (means over blocks of 4 steps)."""
        C = ctx.shape[1]
        lags = [ctx[:, C - 1 - k] for k in range(min(max(self.p, 2 if G["oscillator"] else 1), C))]
        SF = _stim_feats(S, G["taus"])
        fut = SF[:, C : C + self.H]
        fut = fut.reshape(len(fut), self.H // 4, 4, -1).mean(2).reshape(len(fut), -1)
        cols = self._unit_feats(lags, i) + [SF[:, C - 1], fut, np.ones((len(ctx), 1))]
        return np.concatenate(cols, 1)

    def _fit_direct(self, series, stim, meta):
        self.H = 4 * max(1, int(meta.get("horizon_steps", 32)) // 4)
        self.C = min(int(meta.get("context_steps", 4)), series.shape[1] - self.H - 1)
        ctx, S, fut = self._windows(series, stim, self.C, self.H)
        self.W = []
        for i in range(series.shape[-1]):
            Y = fut[:, :, i] - (ctx[:, -1:, i] if G["leak"] else 0.0)
            self.W.append(_solve(self._direct_design(ctx, S, i), Y, G["alpha"], G["loss"], G["eps"]))
        if self.sign is not None:   # Dale's law on the current-state input of other units
            for i in range(self.N):
                pre = self.pre[i]
                w = self.W[i][: len(pre)]
                bad = (np.sign(w) * self.sign[pre][:, None] < 0) & (pre != i)[:, None]
                w[bad] = 0.0
        return self

    # ---------------------------------------------------------- forecasting
    def _step(self, lags, u):
        if self.Wall is not None:
            y = np.concatenate(self._unit_feats(lags, 0) + [u, np.ones((len(u), 1))], 1) @ self.Wall
        else:
            y = np.stack([np.concatenate(self._unit_feats(lags, i) + [u, np.ones((len(u), 1))], 1) @ self.W[i]
                          for i in range(self.N)], 1)
        return lags[0] + y if G["leak"] else y

    def predict(self, context, stim_context, stim_future):
        if G["readout"] == "direct":
            return self._predict_direct(context, stim_context, stim_future)
        S = np.concatenate([stim_context, stim_future], 1)
        SF = _stim_feats(S, G["taus"])
        C = context.shape[1]
        p = max(self.p, 2 if G["oscillator"] else 1)
        lags = [context[:, C - 1 - min(k, C - 1)] for k in range(p)]
        out = []
        for h in range(stim_future.shape[1]):
            # an unstable recurrence stops at +-20 z (as the baselines' rollouts do), not at inf
            x = np.clip(self._step(lags, SF[:, C + h]), -20.0, 20.0)
            out.append(x)
            lags = [x] + lags[:-1]
        return np.stack(out, 1)

    def _predict_direct(self, context, stim_context, stim_future):
        """Whole-horizon forecasts, chained when more than the fitted horizon is asked for."""
        H = stim_future.shape[1]
        hist = context
        S = np.concatenate([stim_context, stim_future], 1)
        C0 = context.shape[1]
        out = []
        done = 0
        while done < H:
            C = hist.shape[1]
            Sw = S[:, C0 + done - C : C0 + done]
            fut = S[:, C0 + done : C0 + done + self.H]
            if fut.shape[1] < self.H:   # pad the last chunk's stimulus with its last value
                fut = np.concatenate([fut, np.repeat(fut[:, -1:], self.H - fut.shape[1], 1)], 1)
            Sx = np.concatenate([Sw, fut], 1)
            y = np.stack([self._direct_design(hist, Sx, i) @ self.W[i] for i in range(self.N)], -1)
            if G["leak"]:
                y = y + hist[:, -1:]
            out.append(y)
            done += self.H
            hist = np.concatenate([hist, y], 1)[:, -C0:]
        return np.concatenate(out, 1)[:, :H]
'''

DEFAULTS = dict(
    readout="rollout",
    loss="l2",
    eps=0.05,
    order=2,
    recurrence="dense",
    rank=4,
    leak=False,
    stim_filter="instant",
    oscillator=False,
    nonlin="linear",
    poly=False,
    sign=False,
    alpha=1.0,
    taus=[4, 16],
)
CHOICES_FREE = dict(
    readout=["rollout", "direct"],
    loss=["l2", "l1"],
    eps=[0.02, 0.05, 0.1, 0.2],
    order=[1, 2, 3, 4, 6, 8],
    recurrence=["dense", "lowrank", "diagonal"],
    rank=[2, 4, 8, 16],
    leak=[True, False],
    stim_filter=["none", "instant", "exp"],
    oscillator=[True, False],
    nonlin=["linear", "tanh", "relu"],
    poly=[False, False, True],
    sign=[False],
    alpha=[0.01, 0.1, 1.0, 10.0, 100.0, 1000.0],
    taus=[[2], [4, 16], [8, 32]],
)
CHOICES_PRIOR = dict(CHOICES_FREE, recurrence=["masked"], sign=[True, False], poly=[False])


def complete(genome: dict) -> dict:
    """A genome with every block (missing ones at :data:`DEFAULTS`)."""
    return {**DEFAULTS, **genome}


# blocks that only matter when another block has a given value (conditional hyperparameters)
_CONDITIONS = {
    "rank": ("recurrence", "lowrank"),
    "taus": ("stim_filter", "exp"),
    "eps": ("loss", "l1"),
    "sign": ("recurrence", "masked"),
}


def active_blocks(genome: dict) -> list[str]:
    """Blocks that change the program (e.g. ``rank`` only with a low-rank recurrence)."""
    g = complete(genome)
    return [k for k in sorted(g) if k not in _CONDITIONS or g[_CONDITIONS[k][0]] == _CONDITIONS[k][1]]


def canonical(genome: dict) -> dict:
    """The genome with every inactive block at its default: two genomes that are the same
    program have the same canonical form."""
    g = complete(genome)
    act = set(active_blocks(g))
    return {k: (v if k in act else DEFAULTS[k]) for k, v in g.items()}


def random_genome(rng: np.random.Generator, priors: bool) -> dict:
    ch = CHOICES_PRIOR if priors else CHOICES_FREE
    return {k: v[int(rng.integers(len(v)))] for k, v in ch.items()}


def render(genome: dict) -> str:
    g = complete(genome)
    gj = json.dumps(g, sort_keys=True)
    summary = ", ".join(
        f"{k}={g[k]}" for k in ("readout", "recurrence", "order", "stim_filter", "nonlin", "leak", "loss")
    )
    return TEMPLATE.format(genome_json=gj, genome_py=repr(dict(sorted(g.items()))), summary=summary)


def parse_genome(code: str) -> dict | None:
    """The genome in a program's ``# GENOME:`` header (missing blocks at their defaults), or None."""
    m = re.search(r"^# GENOME: (\{.*\})$", code or "", re.M)
    if not m:
        return None
    try:
        g = json.loads(m.group(1))
    except json.JSONDecodeError:
        return None
    return complete(g) if isinstance(g, dict) else None


def baseline_genomes(priors: bool) -> dict[str, dict]:
    """The forecasting baselines' own structures as genomes (name -> genome).

    ``ridge_arx``: a VAR(2) with stimulus input, rolled out; ``nlinear``: per-unit direct map
    from its own last values, around the last value; ``dlinear``-like: the same on its own
    lags without the leak; ``tide``: a direct map of every unit's context and the future
    stimulus, trained on absolute error (TiDE is trained with an MAE loss); ``stimulus_evoked``:
    the stimulus only, filtered. With ``priors`` the recurrence is the wiring prior (the
    baseline's structure plus the anatomy), signs free.
    """
    out = {
        "ridge_arx": dict(DEFAULTS, readout="rollout", order=2, recurrence="dense", stim_filter="instant", alpha=1.0),
        "nlinear": dict(
            DEFAULTS, readout="direct", order=4, recurrence="diagonal", leak=True, stim_filter="none", alpha=0.01
        ),
        "dlinear": dict(
            DEFAULTS, readout="direct", order=4, recurrence="diagonal", leak=False, stim_filter="none", alpha=0.01
        ),
        "tide": dict(
            DEFAULTS, readout="direct", order=4, recurrence="dense", stim_filter="instant", loss="l1", alpha=10.0
        ),
        "stimulus_evoked": dict(
            DEFAULTS, readout="direct", order=1, recurrence="diagonal", stim_filter="exp", taus=[8, 32], alpha=10.0
        ),
    }
    if priors:
        out = {k: dict(g, recurrence="masked", sign=False) for k, g in out.items()}
    return out


def mechanism_genomes(priors: bool) -> dict[str, dict]:
    """Drafts from the textbook structure of the system rather than from a forecasting model
    (name -> genome): ``rate_network``, a rectified rate network rolled out step by step
    (``x[t+1] = f(W relu(x[t]) + ... + B s[t+1])``: the form of the simulated circuit's own
    rate units, ``F(x) = tanh(max(x - theta, 0))``), trained on absolute error like the
    forecasting drafts. With ``priors`` its recurrence is the wiring prior."""
    g = dict(
        DEFAULTS,
        readout="rollout",
        order=2,
        recurrence="dense",
        nonlin="relu",
        stim_filter="instant",
        loss="l1",
        alpha=10.0,
    )
    if priors:
        g = dict(g, recurrence="masked", sign=False)
    return {"rate_network": g}
