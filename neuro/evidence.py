"""Evidence of the discovery study: the per-seed, per-window errors of its picks, all chosen
on ID validation only, that the findings (:mod:`neuro.findings`) rest on.

:class:`Evidence` holds the best baseline's errors, each search's best program per seed
(:class:`SearchEvidence`, one for the search with wiring priors and one without) and the
study's pick per seed (the best validation score over both searches);
:func:`gather_evidence` builds it from finished searches and baselines;
:func:`evidence_dataset` labels it as ``evidence.nc``. What the study hands to its findings,
planted truth and report (the evidence every study hands on,
:class:`scimech.studies.evidence.Evidence`) is :class:`neuro.run.StudyRun`, which holds it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import xarray as xr

from scimech import __version__

from .tasks import OOD_SUITES

__all__ = ["Evidence", "SearchEvidence", "gather_evidence", "evidence_dataset", "node_arrays", "prior_note"]

LABELS = ("priors", "no priors")


@dataclass
class SearchEvidence:
    """One search label's best program per seed: window errors ``test (S, windows)``, ``ood
    (S, OOD windows)`` (``None`` when a suite is missing), the nodes and their saved arrays."""

    test: np.ndarray
    ood: np.ndarray | None
    nodes: list
    arrays: list[dict]

    def seed_values(self, key: str) -> np.ndarray:
        """A faithfulness score of the best node of every seed (NaN where it was not measured)."""
        return np.array([float(n.faith[key]) if n.faith.get(key) is not None else np.nan for n in self.nodes])


@dataclass
class Evidence:
    """The numbers behind the findings (errors are MAE in z units per forecast window)."""

    seeds: list[int]
    best_baseline: str
    test_trials: np.ndarray
    baseline_test: np.ndarray
    baseline_ood: np.ndarray | None = None
    #: a cluster label per OOD window, one per (suite, trial)
    ood_clusters: np.ndarray | None = None
    priors: SearchEvidence | None = None
    no_priors: SearchEvidence | None = None
    #: the label of the study's pick per seed ("priors" / "no priors")
    picks: list[str] = field(default_factory=list)
    discovered_test: np.ndarray | None = None
    discovered_ood: np.ndarray | None = None
    #: your traces, given no wiring prior: both searches were unconstrained
    no_prior: bool = False
    #: how much of the edge set the wiring prior gives away
    prior_note: str = ""
    #: the long-context table (one row per baseline and discovered program) and its context
    long_table: pd.DataFrame | None = None
    long_context: int | None = None
    #: the classical yardsticks' test-window errors (:data:`neuro.baselines.YARDSTICKS`), first seed
    yardstick_test: dict[str, np.ndarray] = field(default_factory=dict)
    #: what the windows are: "synthetic world (...)" or "your product (...)" (:func:`neuro.competence.world_of`)
    world: str = ""

    def search(self, label: str) -> SearchEvidence | None:
        return self.priors if label == "priors" else self.no_priors


def node_arrays(search, node) -> dict:
    """The arrays a search saved for one node (:meth:`neuro.search.tree.TreeSearch.node_arrays`),
    ``{}`` if none."""
    return search.node_arrays(node)


def _ood_windows(task, per_split: dict) -> tuple[np.ndarray | None, np.ndarray | None]:
    """All OOD windows' errors concatenated, with a cluster label per (suite, trial)."""
    vals, labels = [], []
    for k, s in enumerate(OOD_SUITES):
        v = per_split.get(f"ood_{s}")
        if v is None:
            return None, None
        vals.append(np.asarray(v, float))
        labels.append(1000 * k + np.asarray(task.ood[s].trial))
    return np.concatenate(vals), np.concatenate(labels)


def _search_evidence(task, seeds, searches: dict, label: str):
    """``(SearchEvidence, OOD cluster labels)`` of one label's best program per seed, or
    ``(None, None)`` if a seed's search finished no program with saved window errors."""
    tests, oods, nodes, arrays, clusters = [], [], [], [], None
    for s in seeds:
        ts = searches.get((label, s))
        best = ts.best() if ts is not None else None
        arr = node_arrays(ts, best) if best is not None else {}
        if best is None or "mae_window/test" not in arr:
            return None, None
        per = {k.split("/", 1)[1]: v for k, v in arr.items() if k.startswith("mae_window/")}
        ood, clusters = _ood_windows(task, per)
        tests.append(per["test"])
        oods.append(ood)
        nodes.append(best)
        arrays.append(arr)
    ood = np.stack(oods) if all(o is not None for o in oods) else None
    return SearchEvidence(np.stack(tests), ood, nodes, arrays), clusters


def gather_evidence(task, seeds, searches: dict, base_windows: dict, base_val: dict) -> Evidence:
    """Per-seed, per-window errors of the study's picks (all chosen on ID validation only).

    ``searches[(label, seed)] = TreeSearch``; ``base_windows[seed][name][split]``;
    ``base_val[name]`` = mean ID validation MAE over seeds.
    """
    from .baselines import YARDSTICKS
    from .competence import world_of

    best_base = min(base_val, key=base_val.get)
    b_ood = [_ood_windows(task, base_windows[s][best_base])[0] for s in seeds]
    ev = Evidence(
        seeds=list(seeds),
        best_baseline=best_base,
        test_trials=np.asarray(task.test.trial),
        baseline_test=np.stack([base_windows[s][best_base]["test"] for s in seeds]),
        baseline_ood=np.stack(b_ood) if all(o is not None for o in b_ood) else None,
        yardstick_test={
            name: np.asarray(base_windows[seeds[0]][name]["test"], float)
            for name in YARDSTICKS
            if name in base_windows[seeds[0]] and "test" in base_windows[seeds[0]][name]
        },
        world=world_of(task),
    )
    for label in LABELS:
        found, clusters = _search_evidence(task, seeds, searches, label)
        if found is not None:
            setattr(ev, "priors" if label == "priors" else "no_priors", found)
            ev.ood_clusters = clusters
    # the study's pick per seed: the best validation score over both searches
    done = [lab for lab in LABELS if ev.search(lab) is not None]
    if done:
        ev.picks = [min((ev.search(lab).nodes[k].val, lab) for lab in done)[1] for k in range(len(seeds))]
        ev.discovered_test = np.stack([ev.search(lab).test[k] for k, lab in enumerate(ev.picks)])
        if all(ev.search(lab).ood is not None for lab in ev.picks):
            ev.discovered_ood = np.stack([ev.search(lab).ood[k] for k, lab in enumerate(ev.picks)])
    return ev


def prior_note(task) -> tuple[bool, str]:
    """``(no_prior, note)``: whether the task came without a wiring prior (your traces, every
    edge allowed), and how many pairs the prior allows (of them truly wired, when known)."""
    M = task.meta["prior_mask"] > 0
    W = task.true_weights
    off = ~np.eye(len(M), dtype=bool)
    wired = "" if W is None else f", {int(((W != 0) & off).sum())} of them truly wired"
    note = f"{int((M & off).sum())} of {int(off.sum())} pairs{wired}: the edge set is largely given by the prior"
    return bool(W is None and (M | ~off).all()), note


def evidence_dataset(ev: Evidence, config: dict) -> xr.Dataset:
    """The per-seed, per-window errors behind the verdicts, labelled (``evidence.nc``)."""
    data = {"baseline_test": (("seed", "test_window"), ev.baseline_test)}
    if ev.baseline_ood is not None:
        data["baseline_ood"] = (("seed", "ood_window"), ev.baseline_ood)
    for label in LABELS:
        found, key = ev.search(label), label.replace(" ", "_")
        if found is not None:
            data[f"{key}_test"] = (("seed", "test_window"), found.test)
            if found.ood is not None:
                data[f"{key}_ood"] = (("seed", "ood_window"), found.ood)
    if ev.discovered_test is not None:
        data["discovered_test"] = (("seed", "test_window"), ev.discovered_test)
    if ev.discovered_ood is not None:
        data["discovered_ood"] = (("seed", "ood_window"), ev.discovered_ood)
    coords = {"seed": ev.seeds, "test_trial": ("test_window", ev.test_trials)}
    if ev.ood_clusters is not None and any(k.endswith("_ood") for k in data):
        coords["ood_trial"] = ("ood_window", ev.ood_clusters)
    ds = xr.Dataset(data, coords=coords)
    for v in ds.data_vars:
        ds[v].attrs.update(units="z", description="mean absolute error of one forecast window (z-scored activity)")
    ds.attrs.update(
        version=__version__, best_baseline=ev.best_baseline, config=json.dumps(config), picks=json.dumps(ev.picks)
    )
    return ds
