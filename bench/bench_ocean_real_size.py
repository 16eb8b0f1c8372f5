"""Ocean at real size: a product at ORCA025's horizontal shape, in ORAS5's own file layout.

ORAS5 (Zuo et al. 2019, Ocean Sci. 15, 779; the CDS "ORAS5 global ocean reanalysis monthly data" user
guide) is distributed as one netCDF file per variable per month on the ORCA025 grid (1442 x 1021
points: 1440 longitudes plus NEMO's two wrap-around columns, 75 levels), named
``<var>_control_monthly_highres_<2D|3D>_<YYYYMM>_<OPER|CONS>_v0.1.nc``. This benchmark writes such a
product (the 2-D fields the study reads and the upper levels of temperature and salinity) for 12, 24
and 48 months and measures, each in a fresh process:

- ``scimech ocean inspect FOLDER``;
- the study's data preparation (``ocean.data.open_store`` on the folder, then the inputs' and the
  target's statistics over the training months, as the study's normaliser computes them);
- ``scimech ocean study --data FOLDER --quick`` with a ``--config`` file that shortens the record the
  study needs to what these lengths hold (:data:`STUDY_SETTINGS`: a 3-month window, 60 / 20 / 20 % of
  the windows for training, validation and test, one seed and regime, 2 epochs, 32 x 32 patches
  sampled from the globe, as OceanCBM samples them), from an empty output folder (the mapping of the
  files into the study's store included); at 12 months the study refuses (a training split of a year,
  which the training climatology needs, cannot be made: 23 months are needed), and the table says so
  with its exit status.

For each: wall seconds and the peak resident memory of the process tree (sampled every 0.2 s).
The fields are smooth analytic functions of position and month plus noise, with land where
``lat < -70`` or inside a rectangular continent, so every variable passes the readers' range checks.

Run ``python -m bench.bench_ocean_real_size [--months 12 24 48] [--shape 1021 1442] [--levels 12]``;
prints a markdown section and writes ``bench/results/ocean_real_size.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("SCIMECH_QUIET", "1")

import numpy as np  # noqa: E402

from bench.common import write_section  # noqa: E402

#: ORCA025's horizontal shape (y, x) and the depths of its first levels (m, NEMO's 75-level grid)
ORCA025 = (1021, 1442)
DEPTHS = np.array(
    [0.51, 1.56, 2.67, 3.86, 5.14, 6.54, 8.09, 9.82, 11.77, 13.99, 16.53, 19.43, 22.76, 26.56, 30.87, 35.74]
    + [41.18, 47.21, 53.85, 61.11, 69.02, 77.61, 86.93, 97.04, 108.03, 120.0, 133.08, 147.41, 163.16, 180.55]
)

TWO_D = {
    # ORAS5 name: (standard_name, units, long_name)
    "sosstsst": ("sea_surface_temperature", "degC", "Sea Surface Temperature"),
    "sossheig": ("sea_surface_height_above_geoid", "m", "Sea Surface Height"),
    "sozotaux": ("surface_downward_x_stress", "N/m2", "Wind Stress along i-axis"),
    "sometauy": ("surface_downward_y_stress", "N/m2", "Wind Stress along j-axis"),
    "sohefldo": ("surface_downward_heat_flux_in_sea_water", "W/m2", "Net Downward Heat Flux"),
    "somxl010": ("ocean_mixed_layer_thickness_defined_by_sigma_theta", "m", "Mixed layer depth (dsigma = 0.01)"),
}
#: the study's settings for the benchmark (a ``--config`` file): what the record lengths hold, one unit.
#: The training split must hold a year of window ends (the climatology the forecast is scored against
#: is the training months' mean of each calendar month), so with a 3-month window 60 / 20 / 20 % is
#: the split that 24 months hold (13 training, 1 validation and 1 test window ends; 23 months needed),
#: and 48 months give 27 / 6 / 6.
STUDY_SETTINGS = {
    "window": 3,
    "lead": 1,
    "fractions": [0.6, 0.2, 0.2],
    "seeds": [0],
    "regimes": ["mixed"],
    "epochs": 2,
    "patch": [32, 32],
}

THREE_D = {
    "votemper": ("sea_water_potential_temperature", "degC", "Temperature"),
    "vosaline": ("sea_water_salinity", "PSU", "Salinity"),
}


def grid(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``nav_lat``, ``nav_lon`` (degrees, 2-D) and the ocean mask of an ORCA-like grid: 1440 distinct
    longitudes plus two columns repeating the first two (NEMO's east-west wrap), latitudes from 78 S
    to 89 N."""
    ny, nx = shape
    step = 360.0 / (nx - 2)
    lon = -180.0 + step * (np.arange(nx) - 1)
    lon = np.where(lon >= 180.0, lon - 360.0, lon)
    lat = np.linspace(-78.0, 89.0, ny)
    lat2, lon2 = np.meshgrid(lat, lon, indexing="ij")
    continent = (np.abs(lat2 - 20) < 25) & (np.abs(lon2 + 40) < 20)
    ocean = (lat2 > -70) & ~continent
    return lat2.astype(np.float32), lon2.astype(np.float32), ocean


def fields(month: int, lat2, lon2, ocean, levels: int, rng) -> dict[str, np.ndarray]:
    """One month of every variable (float32, NaN on land)."""
    season = np.cos(2 * np.pi * (month % 12) / 12.0)
    phi = np.deg2rad(lat2)
    lam = np.deg2rad(lon2)
    noise = lambda scale: (scale * rng.standard_normal(lat2.shape)).astype(np.float32)  # noqa: E731
    sst = 28.0 * np.cos(phi) ** 2 - 1.5 + 2.0 * season * np.sin(phi) + 0.5 * np.sin(3 * lam) + noise(0.2)
    mld = 40.0 + 60.0 * (1 - np.cos(phi) ** 2) * (1 + 0.5 * season) + np.abs(noise(3.0))
    out = {
        "sosstsst": sst,
        "sossheig": 0.6 * np.cos(phi) ** 2 * np.sin(2 * lam) + noise(0.02),
        "sozotaux": 0.1 * np.cos(3 * phi) + noise(0.01),
        "sometauy": 0.03 * np.sin(2 * phi) * np.cos(lam) + noise(0.01),
        "sohefldo": 120.0 * season * np.sin(phi) + 20.0 * np.cos(phi) + noise(5.0),
        "somxl010": mld,
    }
    z = DEPTHS[:levels, None, None]
    out["votemper"] = sst[None] - 8.0 * (1 - np.exp(-z / np.maximum(mld[None], 10.0)))
    out["vosaline"] = 35.0 + 0.5 * np.sin(phi)[None] + 0.001 * z + 0 * sst[None]
    for k, v in out.items():
        v = np.asarray(v, dtype=np.float32)
        v[..., ~ocean] = np.nan
        out[k] = v
    return out


def write_product(folder: Path, months: int, shape: tuple[int, int], levels: int, seed: int = 0) -> tuple[int, int]:
    """Write ``months`` months from January 1990 in ORAS5's layout; returns (files, bytes on disk)."""
    import pandas as pd
    import xarray as xr

    folder.mkdir(parents=True, exist_ok=True)
    lat2, lon2, ocean = grid(shape)
    rng = np.random.default_rng(seed)
    stamps = pd.date_range("1990-01-01", periods=months + 1, freq="MS")
    coords = {
        "nav_lat": (("y", "x"), lat2, {"standard_name": "latitude", "units": "degrees_north"}),
        "nav_lon": (("y", "x"), lon2, {"standard_name": "longitude", "units": "degrees_east"}),
    }
    n_files = n_bytes = 0
    for m in range(months):
        start, end = stamps[m], stamps[m + 1]
        mid = start + (end - start) / 2
        time = {
            "time_counter": (
                "time_counter",
                [mid],
                {"standard_name": "time", "axis": "T", "bounds": "time_counter_bnds"},
            ),
        }
        values = fields(m, lat2, lon2, ocean, levels, rng)
        for name, v in values.items():
            std, units, long = {**TWO_D, **THREE_D}[name]
            kind = "3D" if name in THREE_D else "2D"
            dims = ("time_counter", "deptht", "y", "x") if kind == "3D" else ("time_counter", "y", "x")
            ds = xr.Dataset(
                {
                    name: (dims, v[None], {"standard_name": std, "units": units, "long_name": long}),
                    "time_counter_bnds": (("time_counter", "bnds"), np.array([[start, end]], dtype="datetime64[ns]")),
                },
                coords={**coords, **time},
                attrs={"Conventions": "CF-1.1", "title": "ORAS5-layout benchmark product (analytic fields)"},
            )
            if kind == "3D":
                ds = ds.assign_coords(
                    deptht=(
                        "deptht",
                        DEPTHS[:levels],
                        {"units": "m", "positive": "down", "axis": "Z", "long_name": "Vertical T levels"},
                    )
                )
            enc = {"units": "seconds since 1900-01-01 00:00:00", "calendar": "gregorian"}
            encoding = {
                "time_counter": enc,
                "time_counter_bnds": enc,
                name: {"zlib": False, "_FillValue": np.float32(1e20)},
            }
            path = folder / f"{name}_control_monthly_highres_{kind}_{start:%Y%m}_CONS_v0.1.nc"
            ds.to_netcdf(path, encoding=encoding)
            n_files += 1
            n_bytes += path.stat().st_size
    return n_files, n_bytes


def _peak_rss_of_tree(proc: subprocess.Popen, peak: list[float]) -> None:
    import psutil

    try:
        root = psutil.Process(proc.pid)
    except psutil.NoSuchProcess:
        return
    while proc.poll() is None:
        try:
            total = root.memory_info().rss + sum(c.memory_info().rss for c in root.children(recursive=True))
        except psutil.Error:
            total = 0
        peak[0] = max(peak[0], total / 2**20)
        time.sleep(0.2)


def _address_space(gib: float | None):
    """A ``preexec_fn`` that bounds the child's address space to ``gib`` GiB (None: no bound)."""
    if not gib:
        return None

    def bound():
        import resource

        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return bound


def timed(cmd: list[str], cwd: Path, memory_limit: float | None = None) -> tuple[float, float, int, str]:
    """Run ``cmd``; (wall s, peak RSS MiB of its process tree, exit status, last lines of its output).
    ``memory_limit``: GiB of address space the process may take (an allocation past it fails in the
    process, which says so, instead of the machine running out of memory)."""
    peak = [0.0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_address_space(memory_limit),
    )
    watcher = threading.Thread(target=_peak_rss_of_tree, args=(proc, peak), daemon=True)
    watcher.start()
    out, _ = proc.communicate()
    wall = time.perf_counter() - t0
    watcher.join(timeout=1)
    return wall, peak[0], proc.returncode, "\n".join(out.strip().splitlines()[-6:])


PREPARE = r"""
import sys
from ocean import data
ds = data.open_store(sys.argv[1])
n = ds.sizes["time"]
train = ds.isel(time=slice(0, max(1, int(0.7 * n))))
names = [v for v in ("sst", "zos", "tauu", "tauv", "qnet", "mld", "t_sub", "mlhc") if v in train]
stats = train[names].mean(["time", "lat", "lon"]).compute(), train[names].std(["time", "lat", "lon"]).compute()
print("prepared", dict(ds.sizes), "variables", names)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--months", type=int, nargs="+", default=[12, 24, 48])
    ap.add_argument("--shape", type=int, nargs=2, default=list(ORCA025), metavar=("NY", "NX"))
    ap.add_argument("--levels", type=int, default=12, help="upper levels of votemper / vosaline written")
    ap.add_argument("--steps", nargs="*", default=["inspect", "prepare", "study"])
    ap.add_argument(
        "--keep", type=Path, default=None, help="write the products here and keep them (a later run reuses them)"
    )
    ap.add_argument(
        "--memory-limit",
        type=float,
        default=None,
        metavar="GIB",
        help="address space of each step's process, GiB: a step that would take more fails (and says so) "
        "instead of the machine running out of memory",
    )
    args = ap.parse_args(argv)
    py = sys.executable
    scimech = [py, "-m", "scimech"]  # run from the repository: its code, whatever the environment installed
    repo = Path(__file__).resolve().parents[1]
    root = args.keep or Path(tempfile.mkdtemp(prefix="ocean_real_size_"))
    rows = []
    root.mkdir(parents=True, exist_ok=True)
    config = root / "study.yaml"
    import yaml

    config.write_text(yaml.safe_dump(STUDY_SETTINGS))
    try:
        for months in args.months:
            folder = root / f"oras5_{months}m"
            t0 = time.perf_counter()
            if args.keep is not None and folder.is_dir() and any(folder.glob("*.nc")):  # written by an earlier run
                written = sorted(folder.glob("*.nc"))
                files, nbytes = len(written), sum(p.stat().st_size for p in written)
            else:
                files, nbytes = write_product(folder, months, tuple(args.shape), args.levels)
            write_s = time.perf_counter() - t0
            row = {"months": months, "files": files, "GB": nbytes / 1e9, "write s": write_s}
            steps = {
                "inspect": [*scimech, "ocean", "inspect", str(folder)],
                "prepare": [py, "-c", PREPARE, str(folder)],
                "study": [*scimech, "ocean", "study", "--data", str(folder), "--quick", "--config", str(config)]
                + ["--out", str(root / f"run{months}")],
            }
            shutil.rmtree(root / f"run{months}", ignore_errors=True)  # the study from scratch, mapping included
            for step in args.steps:
                wall, rss, rc, tail = timed(steps[step], repo, args.memory_limit)
                row[f"{step} s"], row[f"{step} MiB"], row[f"{step} rc"] = wall, rss, rc
                print(f"[{months} months] {step}: {wall:.1f} s, peak {rss:.0f} MiB, exit {rc}\n{tail}\n", flush=True)
            rows.append(row)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    cols = ["months", "files", "GB"] + [f"{s} {k}" for s in args.steps for k in ("s", "MiB", "rc")]
    lines = [
        f"ORAS5 layout at shape {tuple(args.shape)} (y, x), {args.levels} upper levels of votemper / vosaline, one "
        f"netCDF file per variable per month (uncompressed); each step in a fresh process, peak RSS of its process "
        f"tree. Machine: {os.cpu_count()} cores, Python {platform.python_version()}, load average "
        f"{os.getloadavg()[0]:.1f} at the end.",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in rows:
        cells = [
            f"{r[c]:.2f}"
            if isinstance(r[c], float) and c == "GB"
            else f"{r[c]:.0f}"
            if isinstance(r[c], float)
            else str(r[c])
            for c in cols
        ]
        lines.append("| " + " | ".join(cells) + " |")
    write_section("ocean_real_size", "ocean: a product at ORCA025 size in ORAS5's layout", lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
