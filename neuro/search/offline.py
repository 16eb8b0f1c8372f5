"""Offline proposer: mutation and crossover over a typed library of model blocks (no LLM).

A program is a *genome* (a dict of block choices) rendered into readable Python source by
:func:`render`; the genome travels inside the source (``# GENOME: {...}``) so any node's
code can be parsed back. Blocks:

- ``order``: activity lags (delays) 1-4;
- ``recurrence``: ``dense`` | ``lowrank`` (rank ``rank``) | ``diagonal`` | ``masked`` (the
  anatomical wiring prior, with Dale's-law signs when ``sign`` is on);
- ``leak``: fit ``x_{t+1} - x_t`` (a leaky integrator around the current state) or ``x_{t+1}``;
- ``stim_filter``: ``none`` | ``instant`` | ``exp`` (a bank of exponential filters, taus in steps);
- ``oscillator``: add the velocity ``x_t - x_{t-1}`` (second-order, oscillatory dynamics);
- ``nonlin``: ``linear`` | ``tanh`` | ``relu`` applied to the recurrent input;
- ``poly``: quadratic self-terms (expressive, sometimes unstable: rollouts can diverge);
- ``alpha``: ridge penalty.

With ``priors=True`` the library is the wiring-constrained one (recurrence always
``masked`` and signed); with ``priors=False`` it is unconstrained.
"""

from __future__ import annotations

import json
import re

import numpy as np

__all__ = ["OfflineProposer", "render", "parse_genome", "random_genome", "TEMPLATE"]

TEMPLATE = '''# GENOME: {genome_json}
"""Candidate transition model (offline proposer): {summary}."""
import numpy as np

G = {genome_py}


def _stim_feats(S, taus):
    """Stimulus features: instantaneous, or exponential filters with time constants (steps)."""
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


class Model:
    def _features(self, lags, s):
        """lags: list of (n, N) activity at t, t-1, ...; s: (n, K) stimulus features at t+1."""
        feats = [_phi(lags[0])] + [lags[k] for k in range(1, G["order"])]
        if G["oscillator"] and len(lags) > 1:
            feats.append(lags[0] - lags[1])
        return feats, s

    def fit(self, series, stim, meta):
        n, T, N = series.shape
        p = max(G["order"], 2)
        self.N = N
        self.mask = meta["prior_mask"] > 0 if G["recurrence"] == "masked" else None
        self.sign = meta["prior_sign"] if (G["recurrence"] == "masked" and G["sign"]) else None
        SF = _stim_feats(stim, G["taus"])
        X_lags = [series[:, p - 1 - k : T - 1 - k].reshape(-1, N) for k in range(p)]
        U = SF[:, p:].reshape(n * (T - p), SF.shape[-1])
        Y = series[:, p:].reshape(-1, N)
        if G["leak"]:
            Y = Y - X_lags[0]
        feats, _ = self._features(X_lags, U)
        self.W = np.zeros((N, len(feats), N))      # post, block, pre
        self.P = np.zeros((N, 2))                   # quadratic self-terms
        self.Bs = np.zeros((N, U.shape[1] + 1))      # stimulus + bias
        for i in range(N):
            if G["recurrence"] == "diagonal":
                pre = np.array([i])
            elif self.mask is not None:
                pre = np.flatnonzero(self.mask[i] | (np.arange(N) == i))
            else:
                pre = np.arange(N)
            cols = [f[:, pre] for f in feats]
            if G["poly"]:
                cols.append(np.stack([X_lags[0][:, i] ** 2, X_lags[0][:, i] ** 3], 1))
            cols.append(U)
            A = np.concatenate(cols + [np.ones((len(U), 1))], 1)
            R = G["alpha"] * np.eye(A.shape[1])
            R[-1, -1] = 0.0
            w = np.linalg.solve(A.T @ A + R, A.T @ Y[:, i])
            k = 0
            for b in range(len(feats)):
                self.W[i, b, pre] = w[k : k + len(pre)]
                k += len(pre)
            if G["poly"]:
                self.P[i] = w[k : k + 2]
                k += 2
            self.Bs[i] = w[k:]
        if self.sign is not None:   # Dale's law on the recurrent block (off-diagonal)
            off = ~np.eye(N, dtype=bool)
            bad = (np.sign(self.W[:, 0]) * self.sign[None, :] < 0) & off
            self.W[:, 0][bad] = 0.0
        if G["recurrence"] == "lowrank":
            u, s_, vt = np.linalg.svd(self.W[:, 0])
            r = G["rank"]
            self.W[:, 0] = (u[:, :r] * s_[:r]) @ vt[:r]
        return self

    def step(self, lags, s):
        feats, _ = self._features(lags, s)
        y = sum(f @ self.W[:, b].T for b, f in enumerate(feats))
        if G["poly"]:
            y = y + self.P[:, 0] * lags[0] ** 2 + self.P[:, 1] * lags[0] ** 3
        y = y + s @ self.Bs[:, :-1].T + self.Bs[:, -1]
        return lags[0] + y if G["leak"] else y

    def predict(self, context, stim_context, stim_future):
        S = np.concatenate([stim_context, stim_future], 1)
        SF = _stim_feats(S, G["taus"])
        C = context.shape[1]
        lags = [context[:, -1 - k] for k in range(max(G["order"], 2))]
        out = []
        for h in range(stim_future.shape[1]):
            x = self.step(lags, SF[:, C + h])
            out.append(x)
            lags = [x] + lags[:-1]
        return np.stack(out, 1)
'''

CHOICES_FREE = dict(order=[1, 2, 3, 4], recurrence=["dense", "lowrank", "diagonal"], rank=[2, 4, 8, 16],
                    leak=[True, False], stim_filter=["none", "instant", "exp"], oscillator=[True, False],
                    nonlin=["linear", "tanh", "relu"], poly=[False, False, True], sign=[False],
                    alpha=[0.01, 0.1, 1.0, 10.0, 100.0], taus=[[2], [4, 16], [8, 32]])
CHOICES_PRIOR = dict(CHOICES_FREE, recurrence=["masked"], sign=[True, False], poly=[False])


def random_genome(rng: np.random.Generator, priors: bool) -> dict:
    ch = CHOICES_PRIOR if priors else CHOICES_FREE
    return {k: v[int(rng.integers(len(v)))] for k, v in ch.items()}


def render(genome: dict) -> str:
    gj = json.dumps(genome, sort_keys=True)
    summary = ", ".join(f"{k}={genome[k]}" for k in ("recurrence", "order", "stim_filter", "nonlin", "leak"))
    return TEMPLATE.format(genome_json=gj, genome_py=repr(dict(sorted(genome.items()))), summary=summary)


def parse_genome(code: str) -> dict | None:
    m = re.search(r"^# GENOME: (\{.*\})$", code or "", re.M)
    if not m:
        return None
    try:
        return json.loads(m.group(1))
    except json.JSONDecodeError:
        return None


class OfflineProposer:
    """Draft = random genome; improve = mutate 1-2 blocks (or cross over with the second-best
    node); debug = repair from the error text (stabilise: larger ridge, no poly, fewer lags).

    Parameters
    ----------
    priors
        Use the wiring-constrained block library.
    """

    name = "offline"

    def __init__(self, priors: bool = True):
        self.priors = priors
        self.choices = CHOICES_PRIOR if priors else CHOICES_FREE

    def propose(self, op: str, parent: dict | None, other: dict | None, rng: np.random.Generator,
                task_info: str = "") -> str:
        """Return the source of a new program. ``parent``/``other`` are proposer views
        (code, val score, error): ID information only."""
        if op == "draft" or parent is None:
            return render(random_genome(rng, self.priors))
        g = parse_genome(parent["code"]) or random_genome(rng, self.priors)
        g = dict(g)
        if op == "debug":
            err = parent.get("error", "") or ""
            g["alpha"] = min(float(g.get("alpha", 1.0)) * 100.0, 1000.0)
            g["poly"] = False
            if "finite" in err or "overflow" in err:
                g["order"] = max(1, int(g.get("order", 1)) - 1)
                g["nonlin"] = "tanh"
            return render(g)
        # improve: crossover with probability 0.3 when another good node exists
        o = parse_genome(other["code"]) if other else None
        if o is not None and rng.random() < 0.3:
            for k in g:
                if k in o and rng.random() < 0.5:
                    g[k] = o[k]
        for k in rng.choice(list(self.choices), size=int(rng.integers(1, 3)), replace=False):
            v = self.choices[k]
            g[k] = v[int(rng.integers(len(v)))]
        return render(g)
