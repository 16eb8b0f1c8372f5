#!/usr/bin/env bash
# The wheels that scripts/device_check.sh installs on a GPU machine that has no network.
#
# The machine's image holds Python 3.12 with PyTorch (CUDA), transformers, xarray, scikit-learn,
# numpy, scipy, pandas, matplotlib, numba, h5py, pyarrow, pytest (with xdist and timeout), hypothesis
# and their own dependencies. The check also needs the toolkit's other dependencies that its three
# steps import (the conformance suite, the sweep bench against TransformerLens and nnsight, the ocean
# study); this script downloads them from the package index, for CPython 3.12 on x86-64 Linux, at the
# versions of the environment it runs in (the ones the tests pass with here), into DIR.
#
# Usage: scripts/device_wheels.sh [DIR]      (default: bench/out/wheels, which git ignores)
#        PYTHON=path/to/python scripts/device_wheels.sh   (the environment whose versions are taken;
#                                                          default .venv/bin/python, else python3)
#
# Left out on purpose, and said so by the check: neuraloperator (its import pulls in wandb, a 20 MB
# wheel with a dozen more of its own, over the budget), so the conformance cases of an FNO are not
# run on the GPU; the astro and neuro studies' dependencies (astropy, mujoco-core, openai, ...),
# whose studies the check does not run.
#
# The working tree that travels to the machine, the wheels included, must stay under 64 MiB: the
# script prints each wheel's size, the total, and the tree's size, and fails over that.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-bench/out/wheels}"
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
LIMIT_MIB=64

# the toolkit and the ocean study
CORE="captum zarr numcodecs donfig google-crc32c netCDF4 cftime dask distributed partd locket tblib zict tornado
cf_xarray Pint pint-xarray flexcache flexparser platformdirs xgcm xnemogcm gsw cmocean"
# the peers of the sweep bench (transformers-stream-generator, a requirement of transformer-lens that it
# does not import, has no wheel and is left out)
PEERS="transformer-lens beartype datasets dill multiprocess fancy-einsum typeguard nnsight greenlet pydantic
pydantic_core annotated-types typing-inspection websocket-client zstandard"
# the build backend of the offline install of the toolkit (pip install --no-index --find-links DIR .)
BUILD="setuptools wheel"

pins=$("$PY" - "$BUILD" $CORE $PEERS <<'PYEOF'
import sys
from importlib.metadata import PackageNotFoundError, version

build, missing = sys.argv[1].split(), []
for name in build + sys.argv[2:]:
    try:
        print(f"{name}=={version(name)}")
    except PackageNotFoundError:
        if name in build:
            print(name)  # the build backend's helper: any version
        else:
            missing.append(name)
if missing:
    sys.exit(f"not installed in {sys.executable}: {' '.join(missing)} (pip install -e '.[models,bench]' first)")
PYEOF
)
rm -rf "$DIR"
mkdir -p "$DIR"
platforms=""
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
    manylinux_2_5_x86_64 manylinux1_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64; do
    platforms="$platforms --platform $p"
done
# shellcheck disable=SC2086
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp $platforms \
    -d "$DIR" $pins

tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
"$PY" - "$DIR" "$tree" "$LIMIT_MIB" <<'PYEOF'
import sys
from pathlib import Path

folder, tree, limit = Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
wheels = sorted(folder.glob("*.whl"), key=lambda p: p.stat().st_size)
total = sum(p.stat().st_size for p in wheels)
for p in wheels:
    print(f"{p.stat().st_size / 2**20:7.2f} MiB  {p.name}")
print(f"{len(wheels)} wheels, {total / 2**20:.1f} MiB; working tree {tree / 2**20:.1f} MiB; "
      f"together {(total + tree) / 2**20:.1f} MiB of {limit:.0f}")
if total + tree > limit * 2**20:
    sys.exit(f"over the {limit:.0f} MiB that travel to the machine: leave out a wheel or clean the tree")
PYEOF
