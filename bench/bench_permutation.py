"""Calibration of the grouped permutation test: p-values on clustered null data, and power.

Run: ``python -m bench.bench_permutation``. Writes ``bench/results/permutation.md``.

200 null datasets of 12 groups x 8 rows: both the features and the labels carry a random
effect per group (a recording's windows share its state) and the labels vary within groups;
the features carry no information about the labels. A valid p-value of 19 permutations has
mean ~0.5 and P(p <= k/20) <= k/20. Then 20 datasets with the label planted in one feature
(coefficient 2): the fraction found at p <= 0.05 is the power. The grouped scheme moves each
group's labels as one block to a group of the same size; a free permutation of the labels,
shown for comparison, breaks their dependence within groups.
"""

from __future__ import annotations

import numpy as np

from bench.common import write_section
from scimech.analysis import probe
from scimech.analysis.probe import permutation_test


def clustered(seed: int, signal: float = 0.0, n_groups: int = 12, per: int = 8, d: int = 5):
    r = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_groups), per)
    y = r.normal(size=n_groups)[g] + 0.5 * r.normal(size=len(g))
    X = r.normal(size=(n_groups, d))[g] + r.normal(size=(len(g), d))
    X[:, 0] += signal * y
    return X, y, g


def calibration(n_null: int = 200, n_planted: int = 20) -> dict[str, float]:
    ps = np.array(
        [
            permutation_test(X, y, groups=g, n_permutations=19, seed=s)[1]
            for s in range(n_null)
            for X, y, g in [clustered(s)]
        ]
    )
    planted = np.array(
        [
            permutation_test(X, y, groups=g, n_permutations=19, seed=s)[1]
            for s in range(n_planted)
            for X, y, g in [clustered(s, 2.0)]
        ]
    )
    return {
        "mean p": ps.mean(),
        "P(p<=0.05)": (ps <= 0.05).mean(),
        "P(p<=0.25)": (ps <= 0.25).mean(),
        "P(p<=0.5)": (ps <= 0.5).mean(),
        "power at 0.05": (planted <= 0.05).mean(),
    }


def main() -> None:
    grouped = calibration()
    block = probe._permute
    probe._permute = lambda y, groups, rng: rng.permutation(y)  # the free permutation, for comparison
    try:
        free = calibration()
    finally:
        probe._permute = block
    lines = ["| permutation of the labels | " + " | ".join(grouped) + " |", "|---" * (len(grouped) + 1) + "|"]
    for name, row in (("whole groups' blocks (scimech)", grouped), ("free (rows exchanged)", free)):
        lines.append(f"| {name} | " + " | ".join(f"{v:.3f}" for v in row.values()) + " |")
    lines += [
        "",
        "200 null datasets of 12 groups x 8 rows (labels varying within groups, a random effect per group "
        "in features and labels), 19 permutations each; power on 20 datasets with the label planted in one "
        "feature. A valid test has mean p ~0.5 and P(p <= k/20) <= k/20.",
    ]
    write_section("permutation", "Grouped permutation test: calibration on clustered null data", lines)


if __name__ == "__main__":
    main()
