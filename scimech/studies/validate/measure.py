"""How the suite measures a planted model: the core's own methods, with intervals and decisions.

Every planted case runs the methods a user would run (:func:`scimech.analysis.probe.probe_sites`,
:func:`scimech.causal.intervene.ablation_sweep`, :func:`scimech.causal.intervene.patching_sweep`,
:func:`scimech.analysis.attribution.attribute`) and turns each measured number into a *decision*
the same way: a component is flagged when the lower bound of the 95% bootstrap interval
of its statistic exceeds a threshold stated here. Nothing about the planted truth enters
a measurement, so a broken method gives a wrong decision and the case fails.

The result of one case is an ``xr.Dataset`` over ``(component, technique)``: ``truth``
(what the method should report if it works as specified), ``flagged`` (what it reported),
``estimate``, ``ci_low``, ``ci_high``, ``expected`` (analytic value where one exists),
``threshold``, and ``mechanism`` along ``component`` (whether the component is part of
the planted mechanism the scientist asks about).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
import xarray as xr
from torch import nn

from scimech.analysis.probe import probe_sites
from scimech.analysis.stats import bootstrap_ci
from scimech.capture.record import record
from scimech.causal import metrics
from scimech.causal.intervene import AblationMethod, ablation_sweep, patching_sweep

__all__ = [
    "Settings",
    "PROBE_MIN_SELECTIVITY",
    "EFFECT_MIN_FRACTION",
    "ATTRIBUTION_MIN_FRACTION",
    "FIDELITY_MIN",
    "DICTIONARY_MIN_COSINE",
    "GAP_MIN",
    "REALIGNMENT_MIN_GAIN",
    "METHODS",
    "STATISTICS",
    "interval",
    "decisions",
    "probe_rows",
    "ablation_rows",
    "patching_rows",
    "causal_rows",
    "normal_inputs",
    "case_dataset",
]

# Decision thresholds (the lower end of a 95% interval must exceed them to flag):
PROBE_MIN_SELECTIVITY = 0.1
"""Held-out R2 above the control task: below 0.1 a linear probe explains < 10% of the feature."""
EFFECT_MIN_FRACTION = 0.1
"""Mean |change of the output| under an intervention, as a fraction of the output's standard deviation."""
ATTRIBUTION_MIN_FRACTION = 0.05
"""Mean |attribution| of a feature, as a fraction of the output's standard deviation."""
FIDELITY_MIN = 0.9
"""|Pearson r| between a concept and the process planted in it."""
DICTIONARY_MIN_COSINE = 0.9
"""Cosine between a planted direction and the closest dictionary direction (about 26 degrees)."""
GAP_MIN = 0.1
"""Faithfulness gap (||sin principal angles|| / sqrt(rank)) that counts as a shifted subspace."""
REALIGNMENT_MIN_GAIN = 0.02
"""Fraction of shifted variance explained that realignment must add to count as restoring the fit."""

METHODS = (
    "probe",
    "ablation_zero",
    "ablation_mean",
    "ablation_resample",
    "patching",
    "concept_fidelity",
    "integrated_gradients",
    "gradient_shap",
    "dictionary_recovery",
    "faithfulness_gap",
    "realignment",
)
STATISTICS = {
    "probe": "selectivity: held-out R2 minus control-task R2 of a linear probe for the tested feature",
    "ablation_zero": "mean absolute output change when the component is set to 0 (output units)",
    "ablation_mean": "mean absolute output change when the component is set to its reference mean (output units)",
    "ablation_resample": "mean absolute output change when the component takes a random reference sample's value "
    "(output units)",
    "patching": "mean absolute output change when another input's activation is patched in (noising; output units)",
    "concept_fidelity": "absolute Pearson r between the concept and the process planted in it",
    "integrated_gradients": "mean absolute attribution of the feature, Integrated Gradients from a zero baseline "
    "(output units)",
    "gradient_shap": "mean absolute attribution of the feature, GradientShap (output units)",
    "dictionary_recovery": "cosine between the direction and the closest direction of a TopK dictionary trained on "
    "the site (interval: lowest to highest over training seeds)",
    "faithfulness_gap": "||sin(principal angles)|| / sqrt(rank) between the dictionary's span and the shifted "
    "activations' active subspace",
    "realignment": "fraction of the shifted variance explained after gradient-free realignment minus before",
}


@dataclass(frozen=True)
class Settings:
    """Sizes of one validation run.

    Parameters
    ----------
    quick
        The small sizes of ``scimech validate --quick`` (seconds on one core).
    seed
        Seed of the data, the training of the concept bottleneck, the resampling draws
        and the bootstrap.
    n
        Samples measured per case.
    n_reference
        Reference samples for mean and resample ablation (drawn independently of ``n``, from
        :attr:`reference_seed`).
    cv, probe_seeds
        Folds and fold-shuffle seeds of the probes.
    n_bootstrap
        Bootstrap resamples of every interval.
    epochs
        Training epochs of the concept bottleneck case.
    confidence
        Level of every interval.
    """

    quick: bool = True
    seed: int = 0
    n: int = 512
    n_reference: int = 256
    cv: int = 5
    probe_seeds: tuple[int, ...] = (0, 1, 2)
    n_bootstrap: int = 500
    epochs: int = 20
    confidence: float = 0.95

    @classmethod
    def of(cls, quick: bool = True, seed: int = 0) -> Settings:
        """The quick or the full sizes."""
        if quick:
            return cls(quick=True, seed=seed)
        return cls(
            quick=False, seed=seed, n=2048, n_reference=1024, probe_seeds=(0, 1, 2, 3, 4), n_bootstrap=2000, epochs=40
        )

    @property
    def reference_seed(self) -> int:
        """Seed of the reference draw: apart from ``seed``, so reference and measured samples are
        independent."""
        return self.seed + 10_000

    def as_dict(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}


def interval(values: np.ndarray, settings: Settings, statistic=np.mean) -> tuple[float, float, float]:
    """Estimate and BCa bootstrap interval of a statistic of ``values`` (exact zeros give [0, 0])."""
    values = np.asarray(values, float).ravel()
    return bootstrap_ci(
        values, statistic, n_resamples=settings.n_bootstrap, confidence=settings.confidence, seed=settings.seed
    )


def decisions(components: Sequence[str], method: str, est, lo, hi, threshold: float) -> xr.Dataset:
    """Rows of one method: estimates, intervals and the decision ``flagged = ci_low > threshold``."""
    lo = np.asarray(lo, float)
    return xr.Dataset(
        {
            "estimate": (("component",), np.asarray(est, float)),
            "ci_low": (("component",), lo),
            "ci_high": (("component",), np.asarray(hi, float)),
            "flagged": (("component",), (lo > threshold).astype(float)),
            "threshold": (("component",), np.full(len(components), float(threshold))),
        },
        coords={"component": list(components)},
    ).expand_dims(technique=[method])


def probe_rows(
    model: nn.Module, x: torch.Tensor, sites: Mapping[str, str], target: np.ndarray, settings: Settings
) -> xr.Dataset:
    """Linear probes (:func:`scimech.analysis.probe.probe_sites`) for ``target`` at each component's site.

    The decision statistic is the selectivity (held-out R2 minus the control task's R2)
    over folds x seeds; its bootstrap interval must clear :data:`PROBE_MIN_SELECTIVITY`.
    """
    acts = record(model, x, list(sites.values()))
    feats = {comp: acts[site].values for comp, site in sites.items()}
    res = probe_sites(
        feats, np.asarray(target, float), cv=settings.cv, seeds=settings.probe_seeds, n_bootstrap=0, dim="component"
    )
    est, lo, hi = zip(*(interval(res.selectivity.sel(component=c).values, settings) for c in sites), strict=True)
    return decisions(list(sites), "probe", est, lo, hi, PROBE_MIN_SELECTIVITY)


def _effect_rows(
    effect: xr.DataArray, components: Sequence[str], method: str, threshold: float, settings: Settings
) -> xr.Dataset:
    stats = [interval(np.abs(effect.isel(site=i).values), settings) for i in range(len(components))]
    est, lo, hi = zip(*stats, strict=True)
    return decisions(components, method, est, lo, hi, threshold)


def ablation_rows(
    model: nn.Module,
    x: torch.Tensor,
    reference: torch.Tensor,
    sites: Mapping[str, str],
    method: AblationMethod,
    threshold: float,
    settings: Settings,
) -> xr.Dataset:
    """Ablate each component (:func:`scimech.causal.intervene.ablation_sweep`) and measure mean |output change|."""
    res = ablation_sweep(
        model, x, list(sites.values()), metrics.output(), method=method, reference=reference, seed=settings.seed
    )
    return _effect_rows(res.effect, list(sites), f"ablation_{method}", threshold, settings)


def normal_inputs(n: int, n_features: int, seed: int) -> torch.Tensor:
    """(n, n_features) standard-normal inputs from a seeded generator."""
    return torch.randn(n, n_features, generator=torch.Generator().manual_seed(seed))


def causal_rows(
    model: nn.Module, x: torch.Tensor, reference: torch.Tensor, components: Sequence[str], settings: Settings
) -> list[xr.Dataset]:
    """Zero, mean and resample ablation and noising patching of each component (named by its
    site), each flagged against ``EFFECT_MIN_FRACTION`` x the output's standard deviation."""
    sites = {c: c for c in components}
    with torch.no_grad():
        tau = EFFECT_MIN_FRACTION * float(model(x).std())
    methods: tuple[AblationMethod, ...] = ("zero", "mean", "resample")
    rows = [ablation_rows(model, x, reference, sites, m, tau, settings) for m in methods]
    rows.append(patching_rows(model, x, sites, tau, settings))
    return rows


def patching_rows(
    model: nn.Module, x: torch.Tensor, sites: Mapping[str, str], threshold: float, settings: Settings
) -> xr.Dataset:
    """Noising patching (:func:`scimech.causal.intervene.patching_sweep`): each input gets the activation
    of another, randomly paired input at one component; mean |output change|."""
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(settings.seed + 1))
    res = patching_sweep(model, x, x[perm], list(sites.values()), metrics.output(), direction="noising")
    return _effect_rows(res.effect, list(sites), "patching", threshold, settings)


def case_dataset(
    rows: Sequence[xr.Dataset],
    truth: Mapping[str, Mapping[str, bool]],
    mechanism: Mapping[str, bool],
    expected: Mapping[tuple[str, str], float] | None = None,
    *,
    name: str,
    title: str,
    planted: str,
    lesson: str,
) -> xr.Dataset:
    """Join a case's measured rows with its planted truth.

    Parameters
    ----------
    rows
        Datasets from :func:`probe_rows`, :func:`ablation_rows`, ... (one method each).
    truth
        ``truth[method][component]``: should this method, working as specified, flag the
        component? Every measured row needs one.
    mechanism
        ``mechanism[component]``: is the component part of the planted mechanism?
    expected
        ``{(method, component): value}`` analytic values of the statistic, where known.
    name, title, planted, lesson
        The case's short name, its title, its planted truth in words, and what it shows.
    """
    ds = xr.merge(rows, join="outer", compat="no_conflicts")
    order = []
    for r in rows:
        order += [c for c in r.component.values.tolist() if c not in order]
    ds = ds.reindex(component=order)
    comps = order
    meths = list(ds.technique.values)
    tr = np.full((len(meths), len(comps)), np.nan)
    ex = np.full_like(tr, np.nan)
    for i, m in enumerate(meths):
        for j, c in enumerate(comps):
            if np.isfinite(ds.estimate.values[i, j]):
                try:
                    tr[i, j] = float(truth[m][c])
                except KeyError:
                    raise KeyError(f"case {name!r}: no planted truth for method {m!r}, component {c!r}.") from None
            if expected and (m, c) in expected:
                ex[i, j] = expected[(m, c)]
    ds["truth"] = (("technique", "component"), tr)
    ds["expected"] = (("technique", "component"), ex)
    ds = ds.assign_coords(mechanism=("component", [float(mechanism[c]) for c in comps]))
    ds["order"] = ("component", np.arange(len(comps), dtype=float))
    ds.attrs.update({"case": name, "title": title, "planted": planted, "lesson": lesson})
    return ds
