"""Offline proposer: improves programs the way a person would, without an LLM.

Programs are genomes over the block library of :mod:`neuro.search.blocks`. The proposer

- **drafts from the baselines' own structures** first (:func:`~neuro.search.blocks.baseline_genomes`,
  best baseline first when their ID validation scores are given: a program may start as the
  best baseline and then gain mechanism), then from the system's textbook structure (a
  rectified rate network, :func:`~neuro.search.blocks.mechanism_genomes`), then random genomes;
- **improves** the node the tree hands it by mutating one or two of its blocks or recombining
  them with another good node's, and chooses among those candidates with a small Bayesian
  inner loop: a Gaussian process (scikit-learn) on the encoded genomes of every evaluated node
  and their ID validation MAE (log), maximising expected improvement, so hyperparameters
  (ridge penalty, lags, loss smoothing, ranks, filter constants) are tuned on the validation
  score rather than at random. Together with the tree's staged evaluation (a quick fit on a
  quarter of the trials, the full fit only for candidates within ``quick_threshold`` of the
  best: two rungs of successive halving), this is the inner tuning loop;
- **debugs** a failed node from its error text (larger ridge, no polynomial terms, fewer lags).

It sees only what :meth:`neuro.search.tree.Node.view` gives (code, ID validation score, error)
and, through ``history``, the same views of every node so far.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
from scipy.stats import norm
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from .blocks import (
    CHOICES_FREE,
    CHOICES_PRIOR,
    TEMPLATE,
    active_blocks,
    baseline_genomes,
    canonical,
    complete,
    mechanism_genomes,
    parse_genome,
    random_genome,
    render,
)

__all__ = ["OfflineProposer", "render", "parse_genome", "random_genome", "TEMPLATE", "encode", "expected_improvement"]

# baselines whose structure has no counterpart worth drafting (a constant or persistence)
_DRAFT_ORDER = ("tide", "ridge_arx", "nlinear", "stimulus_evoked", "dlinear", "gru", "mean", "last_value")


def _key(g: dict) -> str:
    return json.dumps(canonical(g), sort_keys=True)


def encode(g: dict, choices: dict) -> np.ndarray:
    """A genome as a numeric vector for the surrogate: one-hot for categorical blocks, log
    scale for the ridge penalty, smoothing and rank, the number of lags as is."""
    g = canonical(g)
    out = []
    for k in sorted(choices):
        opts = choices[k]
        v = g.get(k)
        if k in ("alpha", "eps", "rank"):
            out.append(math.log10(float(v)))
        elif k == "order":
            out.append(float(v) / 4.0)
        else:
            uniq = []
            for o in opts:
                if o not in uniq:
                    uniq.append(o)
            if len(uniq) < 2:
                continue
            out += [1.0 if v == o else 0.0 for o in uniq]
    return np.asarray(out, float)


def expected_improvement(mu: np.ndarray, sd: np.ndarray, best: float) -> np.ndarray:
    """Expected improvement below ``best`` of Gaussian predictions ``(mu, sd)`` (minimisation)."""
    sd = np.maximum(sd, 1e-12)
    z = (best - mu) / sd
    return (best - mu) * norm.cdf(z) + sd * norm.pdf(z)


class OfflineProposer:
    """Drafts from baseline structures, improves by surrogate-guided mutation and crossover,
    debugs from the error text.

    Parameters
    ----------
    priors
        Use the wiring-constrained block library (recurrence always the anatomical mask).
    baseline_scores
        ``{baseline name: ID validation MAE}``: drafts start from the best baseline's
        structure. Without it they follow a fixed order (TiDE, ridge ARX, NLinear, ...).
    n_candidates
        Mutants and crossovers scored by the surrogate per improvement.
    context
        The task's context length (steps), when known: a direct readout cannot use more lags
        than the context holds, so such children are the same program as the one with
        ``order = context`` and are not proposed again.
    """

    name = "offline"
    uses_history = True

    def __init__(
        self,
        priors: bool = True,
        baseline_scores: dict | None = None,
        n_candidates: int = 48,
        context: int | None = None,
    ):
        self.priors = priors
        self.context = int(context) if context else None
        self.choices = CHOICES_PRIOR if priors else CHOICES_FREE
        self.n_candidates = int(n_candidates)
        structures = baseline_genomes(priors)
        if baseline_scores:
            known = [n for n in structures if n in baseline_scores and np.isfinite(baseline_scores[n])]
            ranked = sorted(known, key=lambda n: baseline_scores[n])
            best = baseline_scores[ranked[0]] if ranked else np.inf
            # only baselines within 30 % of the best are worth starting from
            self.draft_from = [n for n in ranked if baseline_scores[n] <= 1.3 * best][:3]
        else:
            self.draft_from = [n for n in _DRAFT_ORDER if n in structures][:3]
        self.structures = {**structures, **mechanism_genomes(priors)}
        self.draft_from = self.draft_from + list(mechanism_genomes(priors))

    # ------------------------------------------------------------ helpers
    def _mutate(self, g: dict, rng: np.random.Generator, n_blocks: int) -> dict:
        g = dict(g)
        blocks = [k for k in active_blocks(g) if k in self.choices and len(set(map(str, self.choices[k]))) > 1]
        for k in rng.choice(blocks, size=min(n_blocks, len(blocks)), replace=False):
            v = self.choices[k]
            g[k] = v[int(rng.integers(len(v)))]
        return self._legal(g)

    def _legal(self, g: dict) -> dict:
        g = complete(g)
        if self.context and g["readout"] == "direct" and int(g["order"]) > self.context:
            fits = [o for o in self.choices["order"] if o <= self.context]
            g["order"] = max(fits) if fits else self.context  # the lags the context holds
        if self.priors:
            g["recurrence"] = "masked"
            g["poly"] = False
        else:
            g["sign"] = False
        return canonical(g)

    def _pool(self, parent: dict, others: list[dict], rng: np.random.Generator, seen: set) -> list[dict]:
        """Children of ``parent``: every change of one active block, random two-block changes
        and crossovers with the other good nodes; none already tried (as a program)."""
        pool = []
        for k in active_blocks(parent):
            for v in self.choices.get(k, []):
                if v != parent.get(k):
                    pool.append(self._legal(dict(parent, **{k: v})))
        for _ in range(self.n_candidates // 2):
            pool.append(self._mutate(parent, rng, 2))
        for o in others:
            for _ in range(4):
                child = {k: (o[k] if (k in o and rng.random() < 0.5) else parent[k]) for k in parent}
                pool.append(self._legal(child))
        out, keys = [], set()
        for g in pool:
            kk = _key(g)
            if kk not in seen and kk not in keys:
                keys.add(kk)
                out.append(g)
        return out

    def _choose(self, pool: list[dict], history: list[dict], rng: np.random.Generator) -> dict:
        """The candidate of highest expected improvement under a GP fitted to the history."""
        X, y = [], []
        vals = [
            h["val"]
            for h in history
            if h.get("status") == "ok" and h.get("val") is not None and np.isfinite(h["val"]) and h["val"] > 0
        ]
        worst = math.log(max(vals)) if vals else None
        for h in history:
            g = parse_genome(h.get("code", ""))
            if g is None:
                continue
            if h.get("status") == "ok" and h.get("val") is not None and np.isfinite(h["val"]) and h["val"] > 0:
                X.append(encode(g, self.choices))
                y.append(math.log(h["val"]))
            elif h.get("status") in ("failed", "pruned") and worst is not None:
                X.append(encode(g, self.choices))  # a failure counts as the worst score seen
                y.append(worst)
        if len(set(y)) < 3:  # too little to fit a surrogate: a random child
            return pool[int(rng.integers(len(pool)))]
        kernel = ConstantKernel(1.0, (1e-3, 1e2)) * Matern(
            length_scale=1.0, length_scale_bounds=(0.1, 10.0), nu=2.5
        ) + WhiteKernel(1e-3, (1e-6, 1e-1))
        gp = GaussianProcessRegressor(kernel=kernel, normalize_y=True, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gp.fit(np.array(X), np.array(y))
            Xc = np.array([encode(g, self.choices) for g in pool])
            mu, sd = gp.predict(Xc, return_std=True)
        ei = expected_improvement(mu, sd, min(y))
        ei = ei + 1e-12 * rng.random(len(ei))  # ties broken by the node's own generator
        return pool[int(np.argmax(ei))]

    # ------------------------------------------------------------ propose
    def propose(
        self,
        op: str,
        parent: dict | None,
        other: dict | None,
        rng: np.random.Generator,
        task_info: str = "",
        history: list[dict] | None = None,
    ) -> str:
        """Return the source of a new program.

        ``parent``/``other``/``history`` are proposer views (code, ID validation score,
        error, status): ID information only.
        """
        history = list(history or [])
        seen = {_key(g) for g in (parse_genome(h.get("code", "")) for h in history) if g is not None}
        if op == "draft" or parent is None:
            n_drafts = sum(h.get("op") == "draft" for h in history)
            for name in self.draft_from[n_drafts:]:
                g = self._legal(self.structures[name])
                if _key(g) not in seen:
                    return render(g)
            for _ in range(20):
                g = self._legal(random_genome(rng, self.priors))
                if _key(g) not in seen:
                    break
            return render(g)
        g = parse_genome(parent["code"])
        if g is None:
            g = self._legal(random_genome(rng, self.priors))
        if op == "debug":
            err = parent.get("error", "") or ""
            g["alpha"] = min(float(g.get("alpha", 1.0)) * 100.0, 1000.0)
            g["poly"] = False
            if "finite" in err or "overflow" in err:
                g["order"] = max(1, int(g.get("order", 1)) - 1)
                g["nonlin"] = "tanh"
            if "timed out" in err or "CPU" in err:
                g["order"] = min(int(g.get("order", 2)), 2)
                g["loss"] = "l2"
            return render(self._legal(g))
        ok = [
            h
            for h in history
            if h.get("status") == "ok" and h.get("val") is not None and h.get("id") != parent.get("id")
        ]
        ok.sort(key=lambda h: h["val"])
        others = [o for o in (parse_genome(h["code"]) for h in ok[:3]) if o is not None]
        if other is not None and not others:
            o = parse_genome(other.get("code", ""))
            others = [o] if o is not None else []
        pool = self._pool(g, others, rng, seen)
        if not pool:
            return render(self._mutate(g, rng, 3))
        return render(self._choose(pool, history or [parent], rng))
