"""How much redshift information the image adds to the catalogue in each synthetic world.

Not a timing: a yardstick for the stand-in's multimodal advantage. A gradient-boosted
regressor (scikit-learn ``HistGradientBoostingRegressor``) predicts z from the catalogue
(asinh colours, r, log size, e1, e2, MW E(B-V)), then from the catalogue plus six aperture
colours and a concentration measured on the stamps (inner 2x2 and outer ring of the 6x6 grid
of 4x4-pixel patches the stand-in tokenises), and from the catalogue plus the true A_V
(what a perfect dust measurement would give). 3000 training / 1500 test galaxies per world,
seeds 0 / 1000; mean|dz| on the test set, all galaxies and per population.

Run: ``python -m bench.bench_astro_worlds`` (writes bench/results/astro_worlds.md).
"""

from __future__ import annotations

import sys

import numpy as np

from bench.common import write_section

N_TRAIN, N_TEST = 3000, 1500


def _catalogue(s) -> np.ndarray:
    from astro import photoz

    c = s.catalog
    return np.column_stack(
        [photoz.colour_features(c), np.log(c["shape_r"].value), c["shape_e1"], c["shape_e2"], c["ebv"].value]
    )


def _apertures(s) -> np.ndarray:
    from astro import photoz

    n = len(s.images)
    grid = s.images.reshape(n, 4, 6, 4, 6, 4).sum((3, 5)).transpose(0, 2, 3, 1)  # (n, 6, 6, band)
    inner = grid[:, 2:4, 2:4].sum((1, 2))
    outer = grid.sum((1, 2)) - inner
    mi, mo = photoz._asinh_mag(inner), photoz._asinh_mag(outer)
    return np.column_stack([mi[:, :3] - mi[:, 1:], mo[:, :3] - mo[:, 1:], mi[:, 1] - mo[:, 1]])


def world_rows(world: str) -> list[str]:
    from sklearn.ensemble import HistGradientBoostingRegressor

    from astro import photoz, synthetic

    train = synthetic.make_galaxies(N_TRAIN, seed=0, world=world)
    test = synthetic.make_galaxies(N_TEST, seed=1000, world=world)
    z0, z1 = np.asarray(train.catalog["z"], float), np.asarray(test.catalog["z"], float)
    pops = test.populations()
    inputs = {
        "catalogue": _catalogue,
        "catalogue + stamp apertures": lambda s: np.column_stack([_catalogue(s), _apertures(s)]),
        "catalogue + true A_V": lambda s: np.column_stack([_catalogue(s), s.catalog["a_v"].value]),
    }
    rows = []
    for name, feats in inputs.items():
        reg = HistGradientBoostingRegressor(max_iter=300, learning_rate=0.05, random_state=0)
        d = np.abs(photoz.dz(z1, reg.fit(feats(train), z0).predict(feats(test))))
        rows.append(f"| {world} | {name} | " + " | ".join(f"{d[m].mean():.4f}" for m in pops.values()) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    from astro import synthetic

    lines = [
        "mean|dz| of z predicted by gradient boosting (lower is better); the gain of the second row over "
        "the first is what the stamps add beyond the catalogue.",
        "",
        "| world | input | all | extended | compact | dusty | clean |",
        "|---|---|---|---|---|---|---|",
    ]
    for world in synthetic.WORLDS:
        lines += world_rows(world)
    write_section("astro_worlds", "astro: redshift information the image adds, per synthetic world", lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
