"""``scimech dictionary train | score | shift``: the dictionary workflow on saved recordings.

Activations are a netCDF file or zarr store holding a recording (``scimech.capture.record.record(...,
to_zarr=...)`` or ``results.save``): ``--site`` names the variable (default: the only one).
"""

from __future__ import annotations

import json
from pathlib import Path

from scimech.errors import ConfigError, DataValidationError
from scimech.run import options
from scimech.run.options import input_path, number, whole

# the commands import what they run when they run (torch, xarray, matplotlib): `scimech --help` and every
# other command register these too

__all__ = ["register"]


def _open(path: Path, site: str | None):
    import xarray as xr

    ds = xr.open_zarr(path) if path.is_dir() else xr.open_dataset(path)
    names = [str(v) for v in ds.data_vars]
    if site is None:
        if len(names) != 1:
            raise DataValidationError(f"{path} holds {len(names)} variables ({', '.join(names)}); pass --site NAME.")
        site = names[0]
    if site not in names:
        raise DataValidationError(f"{path} has no variable {site!r}; it has {', '.join(names)}.")
    return ds[site]


def _train(args) -> int:
    from scimech.run.results import save

    from .quality import dictionary_quality
    from .train import save_dictionary, train_dictionary

    acts = _open(args.acts, args.site)
    target = None if args.target is None else _open(args.target, args.target_site)
    width = acts.sizes.get(args.feature_dim or acts.dims[-1])
    n_features = args.features or (4 * width if width else None)
    if args.kind != "jumprelu" and n_features is not None and args.k > n_features:
        raise ConfigError(
            f"--k {args.k} active features per row is more than the dictionary's {n_features} features "
            f"(--features{'' if args.features else ', default 4 x width'}); give --k <= --features."
        )
    args.out.mkdir(parents=True, exist_ok=True)
    dic, history = train_dictionary(
        acts,
        kind=args.kind,
        n_features=args.features,
        k=args.k,
        target=target,
        feature_dim=args.feature_dim,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        seed=args.seed,
        checkpoint=args.out / "checkpoint.safetensors",
        device=args.device,
        progress=True,
    )
    save_dictionary(dic, args.out / "dictionary.safetensors")
    quality = dictionary_quality(dic, acts, target=target, feature_dim=args.feature_dim)
    save(history, args.out / "history.nc", config=vars_json(args), seed=args.seed)
    save(quality, args.out / "quality.nc", config=vars_json(args), seed=args.seed)
    print(
        f"{dic.kind} dictionary, {dic.n_features} features: variance explained {float(quality.fve):.3f} "
        f"[{float(quality.fve_ci_low):.3f}, {float(quality.fve_ci_high):.3f}], L0 {float(quality.l0):.1f}, "
        f"dead {float(quality.dead_fraction):.0%}"
    )
    print(f"Saved: {args.out / 'dictionary.safetensors'}")
    return 0


def vars_json(args) -> dict:
    return {k: str(v) for k, v in vars(args).items() if k not in ("func",) and not k.startswith("_")}


def _score(args) -> int:
    import xarray as xr

    from scimech.run.results import save

    from .activations import encode
    from .plots import plot_alignment
    from .quality import dictionary_quality, feature_alignment
    from .train import load_dictionary

    dic = load_dictionary(args.dictionary, args.device)
    acts = _open(args.acts, args.site)
    quality = dictionary_quality(dic, acts, feature_dim=args.feature_dim)
    args.out.mkdir(parents=True, exist_ok=True)
    save(quality, args.out / "quality.nc", config=vars_json(args))
    print(
        f"variance explained {float(quality.fve):.3f} [{float(quality.fve_ci_low):.3f}, "
        f"{float(quality.fve_ci_high):.3f}], L0 {float(quality.l0):.1f}, dead {float(quality.dead_fraction):.0%}"
    )
    if args.variables is not None:
        variables = xr.open_zarr(args.variables) if args.variables.is_dir() else xr.open_dataset(args.variables)
        al = feature_alignment(encode(dic, acts, args.feature_dim), variables)
        save(al, args.out / "alignment.nc", config=vars_json(args))
        plot_alignment(al, args.out / "alignment.png")
        best = abs(al.r).fillna(0).argmax("feature")
        for var in al.variable.values:
            f = int(al.feature[int(best.sel(variable=var))])
            r = al.sel(feature=f, variable=var)
            print(
                f"{var}: feature {f}, r = {float(r.r):+.2f} [{float(r.r_ci_low):+.2f}, {float(r.r_ci_high):+.2f}] "
                f"(shuffled control {float(r.control_r):+.2f})"
            )
    print(f"Saved: {args.out}")
    return 0


def _shift(args) -> int:
    from scimech.run.results import atomic_write_text, provenance, save

    from .plots import plot_shift
    from .shift import measure_shift
    from .train import load_dictionary, save_dictionary

    dic = load_dictionary(args.dictionary, args.device)
    x_in, x_out = _open(args.acts, args.site), _open(args.shifted, args.site)
    gap, fixed = measure_shift(dic, x_in, x_out, energy=args.energy, feature_dim=args.feature_dim)
    args.out.mkdir(parents=True, exist_ok=True)
    save(gap, args.out / "shift.nc", config=vars_json(args))
    plot_shift(gap, args.out / "shift.png")
    summary = {k: float(gap[k]) for k in ("gap", "control_gap", "fve_in", "fve_shifted", "fve_realigned")}
    atomic_write_text(args.out / "shift.json", json.dumps({**summary, **provenance()}, indent=1))
    print(
        f"faithfulness gap {summary['gap']:.3f} (sampling control {summary['control_gap']:.3f}); variance "
        f"explained {summary['fve_in']:.3f} in distribution, {summary['fve_shifted']:.3f} shifted, "
        f"{summary['fve_realigned']:.3f} after realignment"
    )
    if bool(gap.beyond_sampling):
        save_dictionary(fixed, args.out / "realigned.safetensors")
        print(f"Realigned dictionary: {args.out / 'realigned.safetensors'}")
    else:
        print(
            "The gap is within what sampling alone gives: no shift to realign for (no realigned.safetensors written; "
            "realigning without a shift rotates the dictionary away from the data)."
        )
    print(f"Saved: {args.out}")
    return 0


def register(subparsers) -> None:
    """Add ``scimech dictionary`` to the ``scimech`` parser."""
    p = subparsers.add_parser(
        "dictionary",
        help="sparse dictionaries of recorded activations: train, score, shift",
        description="Sparse autoencoders / transcoders on a recording (netCDF or zarr), their "
        "quality, their features against domain variables, and their faithfulness under a shift.",
    )
    sub = p.add_subparsers(dest="dictionary_command", metavar="COMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 0)[1])

    recording = input_path("netcdf", "zarr")

    def common(q, acts_help):
        q.add_argument("--acts", type=recording, required=True, metavar="PATH", help=acts_help)
        q.add_argument("--site", default=None, help="the recording's variable (default: its only one)")
        q.add_argument("--feature-dim", default=None, help="the axis the dictionary reads (default: the last dim)")
        options.add(q, "out", required=True)
        options.add(q, "device", default="cpu")

    t = sub.add_parser("train", help="train a dictionary (resumable: a checkpoint in --out)")
    common(t, "activations to train on (netCDF or zarr)")
    t.add_argument("--kind", choices=("topk", "batchtopk", "jumprelu"), default="topk")
    t.add_argument("--features", type=whole(1), default=None, help="dictionary size (default: 4 x width)")
    t.add_argument("--k", type=whole(1), default=8, help="active features per row (TopK kinds)")
    t.add_argument(
        "--target",
        type=recording,
        default=None,
        metavar="PATH",
        help="a transcoder's output-site recording (netCDF or zarr)",
    )
    t.add_argument("--target-site", default=None, help="with --target: its variable (default: its only one)")
    options.add(t, "epochs", default=10)
    options.add(t, "batch_size", default=256)
    t.add_argument("--lr", type=number(0.0), default=1e-3, help="learning rate (default 1e-3)")
    options.add(t, "seed", default=0)
    t.set_defaults(func=_train)
    options.needs(
        t,
        "--target-site",
        lambda a: a.target is not None,
        "--target PATH (a transcoder's output)",
        ("--target-site", "mlp_out"),
    )

    s = sub.add_parser("score", help="quality, and features against domain variables")
    common(s, "activations to score on")
    s.add_argument(
        "--dictionary",
        type=input_path("state", "torch"),
        required=True,
        metavar="FILE",
        help="a dictionary.safetensors written by `scimech dictionary train`",
    )
    s.add_argument(
        "--variables",
        type=recording,
        default=None,
        metavar="PATH",
        help="netCDF/zarr of domain variables on the recording's positions",
    )
    s.set_defaults(func=_score)

    h = sub.add_parser("shift", help="faithfulness gap under a shift, and the realigned dictionary")
    common(h, "in-distribution activations")
    h.add_argument(
        "--shifted",
        type=recording,
        required=True,
        metavar="PATH",
        help="shifted activations (same site; netCDF or zarr)",
    )
    h.add_argument(
        "--dictionary",
        type=input_path("state", "torch"),
        required=True,
        metavar="FILE",
        help="a dictionary.safetensors written by `scimech dictionary train`",
    )
    h.add_argument(
        "--energy",
        type=number(0.0, maximum=1.0),
        default=0.95,
        help="share of E[x x^T] the active subspace holds (default 0.95)",
    )
    h.set_defaults(func=_shift)
