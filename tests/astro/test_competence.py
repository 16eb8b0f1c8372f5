"""The stand-in's competence table: an untrained redshift model reads "not competent", one as good as the
truth "competent", against the template fit and the colour kNN; sigma_NMAD recomputed with astropy."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from astropy.stats import mad_std

from astro.competence import astro_competence, world_of
from scimech.studies.competence import COMPETENT, NOT_COMPETENT


def _predictions(seed=0, n=600):
    rng = np.random.default_rng(seed)
    z = rng.uniform(0.05, 1.2, n)
    one = 1 + z
    return xr.Dataset(
        {
            "z_true": ("sample", z),
            "template": ("sample", z + one * rng.normal(0, 0.06, n)),  # sigma_NMAD ~ 0.06
            "colour_knn": ("sample", z + one * rng.normal(0, 0.05, n)),  # ~ 0.05: the best yardstick
            "photometry": ("sample", rng.uniform(0.0, 1.5, n)),  # untrained: a guess unrelated to z
            "multimodal": ("sample", z + one * rng.normal(0, 0.01, n)),  # near the truth
        },
        attrs={"galaxies": "synthetic"},
    )


def test_an_untrained_model_is_not_competent_and_a_near_perfect_one_is():
    pred = _predictions()
    table = astro_competence(pred, world=world_of(pred), n_resamples=300)
    verdict = dict(zip(table["model"].values, table["verdict"].values))
    assert verdict["photometry-only"] == NOT_COMPETENT
    assert verdict["multimodal"] == COMPETENT
    z = pred["z_true"].values
    for key, label in (("template", "template fit"), ("colour_knn", "colour kNN")):
        dz = (pred[key].values - z) / (1 + z)
        # sigma_NMAD is astropy's normalised median absolute deviation of dz
        assert float(table["value"].sel(model=label, metric="sigma_NMAD")) == pytest.approx(mad_std(dz), rel=1e-3)
        assert float(table["value"].sel(model=label, metric="outlier fraction")) == np.mean(np.abs(dz) > 0.15)
    assert str(table["best_yardstick"].sel(metric="sigma_NMAD").values) == "colour kNN"
    assert table.attrs["world"] == "synthetic world (600 synthetic test galaxies, stand-in photometry and images)"


def test_results_without_a_yardstick_have_no_table():
    assert astro_competence(_predictions().drop_vars("colour_knn"), world="w") is None
