"""The ocean maps figure read from its data: each true term beside its predicted concept, on one shared
symmetric colour scale, each panel with a colour bar and labelled axes; the free concept on q_hidden's scale."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import xarray as xr  # noqa: E402

from ocean import plots  # noqa: E402

CONCEPTS = ["q_surf", "free_0"]
TRUE = ["q_surf", "q_hidden"]


def _unit(seed=0):
    rng = np.random.default_rng(seed)
    ns, ny, nx = 5, 4, 6
    mask = np.ones((ny, nx), np.int8)
    mask[0, 0] = 0
    c_true = rng.normal(0, [[[[50.0]], [[200.0]]]], (ns, 2, ny, nx))
    c_pred = np.stack([c_true[:, 0] * 0.5, -0.01 * c_true[:, 1] + 3.0], 1)  # free_0: q_hidden, sign and scale lost
    y = rng.normal(0, 100.0, (ns, ny, nx))
    return xr.Dataset(
        {
            "y_true": (("sample", "lat", "lon"), y),
            "y_pred": (("sample", "lat", "lon"), y * 0.3),
            "c_true": (("sample", "true_concept", "lat", "lon"), c_true),
            "c_pred": (("sample", "concept", "lat", "lon"), c_pred),
            "mask": (("lat", "lon"), mask),
        },
        coords={
            "time": ("sample", pd.date_range("2001-01-01", periods=ns, freq="MS")),
            "concept": CONCEPTS,
            "true_concept": TRUE,
            "lat": np.linspace(30, 40, ny),
            "lon": np.linspace(-50, -30, nx),
        },
        attrs={"regime": "mixed", "seed": 0},
    )


def _mesh(ax):
    return ax.collections[0]  # the field (the grey land mesh is drawn after it)


def _plotted(ax, mask):
    """The values a panel draws at ocean points."""
    return np.ma.filled(_mesh(ax).get_array(), np.nan).reshape(mask.shape)[mask]


def test_true_and_predicted_concepts_sit_side_by_side_on_one_scale():
    unit = _unit()
    fig = plots.maps_figure(unit, sample=1)
    try:
        ax = np.array([a for a in fig.axes if a.get_title()])  # panels (colour bars have no title)
        titles = [a.get_title() for a in ax]
        for c, t in zip(CONCEPTS, TRUE):
            i, j = titles.index(f"true {t}"), next(k for k, s in enumerate(titles) if s.startswith(f"predicted {c}"))
            left, right = _mesh(ax[i]), _mesh(ax[j])
            assert left.get_clim() == right.get_clim()  # one shared colour scale
            lo, hi = left.get_clim()
            assert lo == -hi and hi > 0  # symmetric about 0 (W m-2 fluxes of either sign)
            ok = unit["mask"].values.astype(bool)
            truth = unit["c_true"].sel(true_concept=t).isel(sample=1).values
            np.testing.assert_allclose(_plotted(ax[i], ok), truth[ok])
            assert hi == pytest.approx(max(np.abs(truth[ok]).max(), np.abs(_plotted(ax[j], ok)).max()))
            for a in (ax[i], ax[j]):
                assert a.get_xlabel() == "lon (°E)" and a.get_ylabel() == "lat (°N)"
                assert _mesh(a).colorbar is not None and _mesh(a).colorbar.ax.get_ylabel() == "W m-2"
        # the free concept fitted to q_hidden: sign and scale restored (it was -0.01 q_hidden + 3)
        ok = unit["mask"].values.astype(bool)
        free = _plotted(ax[titles.index("predicted free_0 (fitted to q_hidden's scale)")], ok)
        hidden = unit["c_true"].sel(true_concept="q_hidden").isel(sample=1).values
        np.testing.assert_allclose(free, hidden[ok], rtol=1e-9, atol=1e-6)
        # the forecast beside the truth, one scale
        assert (
            _mesh(ax[titles.index("true dMLHC/dt 2001-02")]).get_clim()
            == _mesh(ax[titles.index("forecast dMLHC/dt 2001-02")]).get_clim()
        )
    finally:
        plt.close(fig)
