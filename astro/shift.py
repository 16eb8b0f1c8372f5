"""A dictionary of the AION stand-in's last encoder block under a shift of the survey.

The stand-in AION (:func:`astro.training.train_standin`) is trained on the standard
synthetic world; a TopK dictionary (:mod:`scimech.analysis.dictionary`) is trained on its last
encoder block's output at every token of the training galaxies. The shifted galaxies are
drawn from the same world but either at higher redshift (``z_scale`` 0.45 -> 0.7: more
galaxies near the top of the Z codec's range) or with shallower imaging (sky noise 1.5 mag
brighter: noisier stamps). Measured on test galaxies, in distribution and shifted:

- the faithfulness gap between the dictionary's span and the shifted active subspace, with
  its sampling control and whether it is beyond it;
- the variance of the block's output the dictionary explains, in distribution, shifted,
  and after gradient-free realignment;
- the splice fidelity (the redshift logits with the block's output replaced by the
  dictionary's reconstruction, against zero and mean ablation of the block), with bootstrap
  intervals over galaxies.

``scimech astro shift --out runs/astro/shift [--shift redshift|depth]`` (or ``python -m astro.shift``) writes
``shift.nc`` and ``shift.png``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import xarray as xr

from scimech.analysis.dictionary import (
    measure_shift,
    plot_shift,
    splice_fidelity,
    train_dictionary,
)
from scimech.capture.record import record
from scimech.run.results import save

from .synthetic import make_galaxies
from .synthetic.worlds import world_config
from .training import train_standin

__all__ = ["run_shift", "SHIFTS"]

#: the shifts: SyntheticConfig fields changed from the standard world
SHIFTS = {"redshift": {"z_scale": 0.7}, "depth": {"depth_offset_mag": -1.5}}


def _acts(adapter, sample, site: str) -> xr.DataArray:
    batch = adapter.batch(adapter.tokenize(sample.catalog, sample.images))
    return record(adapter.model, batch, [site], forward=adapter.forward)[site], batch


def run_shift(
    out: str | Path,
    *,
    shift: str = "redshift",
    n_train: int = 1200,
    n_test: int = 400,
    epochs: int = 20,
    seed: int = 0,
    k: int = 8,
    n_features: int | None = None,
    n_bootstrap: int = 500,
    device: str = "cpu",
) -> xr.Dataset:
    """Train the stand-in and a dictionary of its last block in the standard world; measure the
    gap and the fidelity on galaxies of the ``shift`` world (see the module docstring)."""
    if shift not in SHIFTS:
        raise ValueError(f"shift must be one of {sorted(SHIFTS)}; got {shift!r}.")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    standard = world_config("standard")
    shifted_cfg = dataclasses.replace(standard, **SHIFTS[shift])
    train = make_galaxies(n_train, seed=seed, config=standard)
    tests = {
        "in_distribution": make_galaxies(n_test, seed=seed + 1, config=standard),
        "shifted": make_galaxies(n_test, seed=seed + 1, config=shifted_cfg),
    }
    adapter, _ = train_standin(train, epochs=epochs, seed=seed, device=device)
    adapter.model.eval()
    site = adapter.block_sites()[-1]
    train_acts, _ = _acts(adapter, train, site)
    acts, batches = {}, {}
    for name, sample in tests.items():
        acts[name], batches[name] = _acts(adapter, sample, site)
    width = train_acts.shape[-1]
    dic, _ = train_dictionary(
        train_acts,
        kind="topk",
        n_features=n_features or 4 * width,
        k=k,
        epochs=20,
        batch_size=256,
        lr=3e-3,
        seed=seed,
        checkpoint=out / "dictionary.safetensors",
        device=device,
    )
    gap, _ = measure_shift(
        dic,
        acts["in_distribution"],
        acts["shifted"],
        fidelity=lambda d, which: splice_fidelity(
            adapter.model, batches[which], site, d, forward=adapter.forward, n_bootstrap=n_bootstrap, seed=seed
        ),
    )
    gap.attrs.update(
        {
            "shift": f"{shift}: {SHIFTS[shift]}",
            "site": site,
            "k": k,
            "description": "AION stand-in block dictionary under a survey shift",
        }
    )
    save(
        gap,
        out / "shift.nc",
        config={"shift": shift, "n_train": n_train, "n_test": n_test, "epochs": epochs, "k": k},
        seed=seed,
    )
    plot_shift(gap, out / "shift.png")
    return gap


def main(argv: list[str] | None = None) -> int:
    """``python -m astro.shift``: ``scimech astro shift`` (the same options and run)."""
    import sys

    from scimech.cli import main as scimech_main

    return scimech_main(["astro", "shift", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
