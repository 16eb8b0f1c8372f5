"""A dictionary of OceanCBM's encoder under a shift: a stronger hidden eddy flux.

OceanCBM is trained (mixed supervision, one seed) on the synthetic ocean; a TopK dictionary
(:mod:`scimech.analysis.dictionary`) is trained on its encoder's activations at every grid cell of
the training windows. The shifted ocean is the same ocean (same seed, grid, weather) with
the hidden eddy heat flux ``shift`` times stronger: the process only the free concept can
carry. Its fields are normalised as the training ocean's (the model's input pipeline does not
change with the world; normalising each ocean by itself would hide part of the shift). Measured (:func:`run_shift`), each on the test windows:

- the faithfulness gap between the dictionary's span and the shifted encoder's active
  subspace, with its sampling control (two halves of the in-distribution activations);
- the variance of the encoder's activations the dictionary explains, in distribution,
  shifted, and after gradient-free realignment on the shifted activations;
- the splice fidelity (the forecast with the encoder's output replaced by the dictionary's
  reconstruction, against zero and mean ablation of the encoder), in distribution, shifted
  and realigned, with bootstrap intervals over samples.

``scimech ocean shift --out runs/ocean/shift`` (or ``python -m ocean.shift``) writes ``shift.nc`` and ``shift.png``.
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

from . import data as odata
from .plan import StudyConfig
from .synthetic import SynthConfig, generate
from .training import train_model

__all__ = ["run_shift", "SITE"]

SITE = "encoder"  # the UNet's output: (batch, width, lat, lon), channels first


def run_shift(
    out: str | Path,
    *,
    shift: float = 3.0,
    seed: int = 0,
    k: int = 8,
    n_features: int = 64,
    dict_epochs: int = 20,
    cfg: StudyConfig | None = None,
    n_bootstrap: int = 500,
    device: str = "cpu",
) -> xr.Dataset:
    """Train OceanCBM and a dictionary of its encoder in distribution; measure the gap and the
    fidelity on the ocean with a ``shift`` times stronger hidden flux (see the module docstring)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg or StudyConfig.quick()
    syn = {**dataclasses.asdict(SynthConfig()), **cfg.synth, "seed": seed}
    stores = {}
    for name, coeff in (("in_distribution", syn["hidden_coeff"]), ("shifted", syn["hidden_coeff"] * shift)):
        stores[name] = odata.write_zarr(
            generate(SynthConfig(**{**syn, "hidden_coeff": coeff})), out / f"{name}.zarr", time_chunk=cfg.time_chunk
        )
    trained = train_model(
        cfg, stores["in_distribution"], seed=seed, checkpoint_dir=out / "checkpoints", device=device, progress_bar=False
    )
    model, _forecast = trained.model, trained.forecast
    train_x = trained.inputs("train").to(device)
    test = {name: trained.inputs("test", path).to(device) for name, path in stores.items()}
    acts = {name: record(model, x, [SITE], forward=_forecast)[SITE] for name, x in (("train", train_x), *test.items())}
    dic, _ = train_dictionary(
        acts["train"],
        kind="topk",
        n_features=n_features,
        k=k,
        epochs=dict_epochs,
        batch_size=256,
        lr=3e-3,
        seed=seed,
        feature_dim="channel" if "channel" in acts["train"].dims else None,
        checkpoint=out / "dictionary.safetensors",
        device=device,
    )
    fdim = "channel" if "channel" in acts["train"].dims else None
    gap, _ = measure_shift(
        dic,
        acts["in_distribution"],
        acts["shifted"],
        feature_dim=fdim,
        fidelity=lambda d, which: splice_fidelity(
            model, test[which], SITE, d, forward=_forecast, n_bootstrap=n_bootstrap, seed=seed
        ),
    )
    gap.attrs.update(
        {
            "shift": f"hidden eddy flux x {shift}",
            "site": SITE,
            "k": k,
            "n_features": n_features,
            "description": "OceanCBM encoder dictionary under a stronger hidden flux",
        }
    )
    save(
        gap,
        out / "shift.nc",
        config={"shift": shift, "k": k, "n_features": n_features, **dataclasses.asdict(cfg)},
        seed=seed,
    )
    plot_shift(gap, out / "shift.png")
    return gap


def main(argv: list[str] | None = None) -> int:
    """``python -m ocean.shift``: ``scimech ocean shift`` (the same options and run)."""
    import sys

    from scimech.cli import main as scimech_main

    return scimech_main(["ocean", "shift", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    raise SystemExit(main())
