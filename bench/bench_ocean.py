"""Ocean benchmarks: loader throughput, memory as the store grows, seconds per epoch.

Run ``python -m bench.bench_ocean``; prints a markdown section and writes
``bench/results/ocean.md``.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("SCIMECH_QUIET", "1")

import numpy as np  # noqa: E402

import scimech  # noqa: E402

HERE = Path(__file__).resolve().parent

CHILD = r"""
import resource, sys, time
import numpy as np
from ocean import data
path, n_items = sys.argv[1], int(sys.argv[2])
ds = data.open_zarr(path)
s = data.chronological_split(ds.sizes["time"], window=6, lead=1)
norm = data.fit_normalizer(ds, s.train, window=6, lead=1)
wd = data.WindowDataset(ds, s.train, norm, window=6, lead=1, patch=(16, 16), max_blocks=4)
idx = np.linspace(0, len(wd) - 1, min(n_items, len(wd))).astype(int)
for i in idx:
    wd[int(i)]
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, ds.nbytes / 2**20)
"""


def _store(tmp: Path, repeats: int, base) -> Path:
    """A store holding ``repeats`` copies of ``base`` one after another in time (appended
    chunk by chunk, so the whole store is never in memory)."""
    from ocean import data

    path = tmp / f"grow{repeats}.zarr"
    data.write_zarr(base, path, time_chunk=12)
    nt = base.sizes["time"]
    for r in range(1, repeats):
        part = base.assign_coords(time=base["time"].values + np.timedelta64(int(r * nt * 31), "D"))
        part = part.drop_vars("mask")
        for v in part.data_vars:
            part[v].encoding = {}
        part.chunk({"time": 12}).to_zarr(path, append_dim="time", consolidated=False, zarr_format=3)
    return path


def bench_loader(tmp: Path, base) -> dict:
    import xarray as xr

    from ocean import data
    from ocean.synthetic import INPUTS

    path = data.write_zarr(base, tmp / "loader.zarr", time_chunk=12)
    ds = data.open_zarr(path)
    s = data.chronological_split(ds.sizes["time"], window=6, lead=1)
    norm = data.fit_normalizer(ds, s.train, window=6, lead=1)
    wd = data.WindowDataset(ds, s.train, norm, window=6, lead=1, patch=(16, 16), max_blocks=8)
    n = min(400, len(wd))
    t0 = time.perf_counter()
    for i in range(n):
        wd[i]
    loader = n / (time.perf_counter() - t0)
    raw = xr.open_zarr(path, consolidated=False)
    t0 = time.perf_counter()
    m = min(60, n)
    for i in range(m):
        mem, t, (iy, ix, py, px) = wd.items[i]
        sub = raw[list(INPUTS) + ["dmlhc_dt"]].isel(
            member=mem, time=slice(t - 5, t + 2), lat=slice(iy, iy + py), lon=slice(ix, ix + px)
        )
        _ = sub.to_array().values
    plain = m / (time.perf_counter() - t0)
    return {"loader": loader, "plain": plain, "n": n, "grid": (base.sizes["lat"], base.sizes["lon"])}


def bench_memory(tmp: Path, base) -> list[tuple[float, float]]:
    rows = []
    for rep in (1, 2, 4, 8):
        path = _store(tmp, rep, base)
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(path), "300"], capture_output=True, text=True, cwd=HERE.parent, check=True
        )
        rss, size = map(float, out.stdout.split()[-2:])
        rows.append((size, rss))
    return rows


def bench_epoch() -> dict:
    import dataclasses

    import torch

    from ocean.plan import StudyConfig
    from ocean.run import prepare_data
    from ocean.training import train_unit

    torch.set_num_threads(1)
    cfg = StudyConfig(epochs=2, seeds=[0], regimes=["mixed"])
    with tempfile.TemporaryDirectory() as d:
        path = prepare_data(cfg, Path(d))
        t0 = time.perf_counter()
        u = train_unit(dataclasses.asdict(cfg), "mixed", 0, str(path), str(Path(d) / "ck"))
        total = time.perf_counter() - t0
    return {
        "seconds_per_epoch": total / cfg.epochs,
        "epochs": cfg.epochs,
        "width": cfg.width,
        "samples": int(u.sizes["sample"]),
        "synth": cfg.synth,
    }


def main() -> int:
    from ocean import synthetic

    t_all = time.perf_counter()
    base = synthetic.generate(n_members=2, years=6, ny=32, nx=48, seed=0).drop_vars("period_days")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        lo = bench_loader(tmp, base)
        mem = bench_memory(tmp, base)
    ep = bench_epoch()
    lines = [
        "## ocean",
        "",
        f"Command: `python -m bench.bench_ocean` (scimech {scimech.__version__}, Python "
        f"{platform.python_version()}). Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} "
        f"cores (shared). Total {time.perf_counter() - t_all:.0f} s.",
        "",
        f"**Loader throughput** (patches 16x16, window 6 months x 7 variables, grid {lo['grid']}, zarr v3 chunks of "
        "12 months): ",
        "",
        "| reader | patches/s |",
        "|---|---|",
        f"| `ocean.data.WindowDataset` (block cache) | {lo['loader']:.0f} |",
        f"| plain xarray `isel(...).values` per patch | {lo['plain']:.1f} |",
        f"| speed-up | {lo['loader'] / lo['plain']:.0f}x |",
        "",
        "**Peak memory as the store grows** (child process: open lazily, train-only normaliser with dask, read 300 "
        "patches through the loader with a 4-block cache):",
        "",
        "| store size (MiB, uncompressed) | peak RSS (MiB) |",
        "|---|---|",
        *[f"| {s:.0f} | {r:.0f} |" for s, r in mem],
        "",
        f"**Seconds per epoch**, default quick model (UNet width {ep['width']}, synthetic {ep['synth']}, "
        f"1 torch thread): {ep['seconds_per_epoch']:.1f} s/epoch (mean of {ep['epochs']} epochs incl. set-up).",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "ocean.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
