"""A tiny study through scimech.run.parallel, serially or on a cluster file; used by test_slurm.py.

    python tests_slurm/driver.py --out DIR [--cluster cluster.toml] [--units 6] [--sleep 2]

prints one JSON line ``{unit: values}`` (the results read back from the store) and exits 0;
a scimech error prints ``scimech: error: ...`` and exits 2, as the ``scimech`` command does.
The unit function lives in ``__main__``, so Dask ships it to the workers by value.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np
import xarray as xr

from scimech.errors import ScimechError
from scimech.run.parallel import get_client, map_units


def unit(x: float, seed: int, sleep: float) -> xr.Dataset:
    time.sleep(sleep)
    rng = np.random.default_rng(seed)
    return xr.Dataset({"y": ("i", x**2 + rng.normal(size=8))}, attrs={"x": x, "seed": seed})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--cluster", default=None)
    p.add_argument("--units", type=int, default=6)
    p.add_argument("--sleep", type=float, default=0.0)
    args = p.parse_args(argv)
    units = {f"x={i}/seed={i % 3}": {"x": float(i), "seed": i % 3, "sleep": args.sleep} for i in range(args.units)}
    try:
        client = get_client(config=args.cluster) if args.cluster else None
        print("client ready", file=sys.stderr, flush=True)
        results = map_units(unit, units, args.out, client=client)
    except ScimechError as err:
        print(f"scimech: error: {type(err).__name__}: {err}", file=sys.stderr)
        return 2
    print(json.dumps({k: v["y"].values.tolist() for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
