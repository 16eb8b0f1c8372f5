"""Memory and time of the ocean competence table's yardsticks on a finished study's folder.

Run: ``python -m bench.bench_ocean_yardsticks RUN_FOLDER [RUN_FOLDER ...]`` (each in a fresh process:
its peak RSS over loading the first unit, then over ``ocean.competence.yardstick_forecasts`` on the
study's store). The real-size folders are those ``bench.bench_ocean_real_size --keep DIR`` leaves
(``DIR/run24``, ``DIR/run48``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def measure(run: Path) -> dict:
    import xarray as xr

    from ocean.competence import yardstick_forecasts
    from ocean.plan import StudyConfig

    unit_file = sorted((run / "units").rglob("*.nc"))[0]
    unit = xr.open_dataset(unit_file).load()
    cfg = StudyConfig(**json.loads(unit.attrs["study_config"]))
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    t0 = time.perf_counter()
    yardstick_forecasts(unit, run / "ocean.zarr", cfg)
    return {
        "run": str(run),
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_MiB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "unit_loaded_MiB": loaded,
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--one":
        print(json.dumps(measure(Path(args[1]))))
        return 0
    if not args:
        print(__doc__)
        return 2
    print("| run | yardsticks s | peak MiB | of which the unit loaded |\n|---|---|---|---|")
    for run in args:
        out = subprocess.run(
            [sys.executable, "-m", "bench.bench_ocean_yardsticks", "--one", run], capture_output=True, text=True
        )
        if out.returncode:
            print(out.stderr[-2000:], file=sys.stderr)
            return out.returncode
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"| {r['run']} | {r['seconds']} | {r['peak_MiB']} | {r['unit_loaded_MiB']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
