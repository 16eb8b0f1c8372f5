#!/usr/bin/env bash
# CI: `pip install .` works. Builds the wheel, installs it with pip into a fresh virtual
# environment, and checks there, away from the source tree, that
#   - every module and data file of scimech/, ocean/, astro/, neuro/ (the notebooks, and any
#     *.json / *.yaml / *.safetensors a package ships) is in the wheel,
#   - scimech, ocean, astro, neuro and every one of their modules import from the installed copy,
#   - the `scimech` command of the wheel runs and finds the three studies.
# The dependencies are not installed again: the fresh environment reads them from .venv (a .pth
# line placed after its own site-packages, so the wheel's copy of scimech comes first; .venv's
# editable install of the source tree is not seen, as .pth files are read only in site dirs).
#
#   scripts/check_wheel.sh            # after `make install`; about half a minute
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
[[ -x .venv/bin/python ]] || { echo "check_wheel: .venv missing: run make install first" >&2; exit 2; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# the wheel is built from a copy of what git would ship (tracked and new files, not the ignored
# ones): setuptools' build/ folder keeps files of earlier builds, which would hide a missing one
mkdir "$WORK/src"
git ls-files -z --cached --others --exclude-standard |
    tar --null --files-from=- --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$WORK/src"
# the build backend (setuptools) is already in .venv: no isolated build environment to download
(cd "$WORK/src" && "$REPO/.venv/bin/python" -m pip wheel -q --no-deps --no-build-isolation -w "$WORK/wheel" . >/dev/null)
WHEEL=$(ls "$WORK"/wheel/scimech-*.whl)

.venv/bin/python -m venv --without-pip "$WORK/venv"
.venv/bin/python -m pip --python "$WORK/venv/bin/python" install -q --no-deps --no-compile "$WHEEL"
SITE=$("$WORK/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
DEPS=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
echo "$DEPS" >"$SITE/zz_scimech_dependencies.pth"

cd "$WORK"   # not the source tree: only the installed copy can be imported
"$WORK/venv/bin/python" - "$WORK/src" "$WHEEL" "$SITE" <<'EOF'
import importlib, pkgutil, sys, zipfile
from pathlib import Path

src, wheel, site = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
packages = ["scimech", "ocean", "astro", "neuro"]

# every file of the packages in the source tree is in the wheel (byte caches aside)
tree = {
    str(p.relative_to(src))
    for pkg in packages
    for p in (src / pkg).rglob("*")
    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
}
shipped = set(zipfile.ZipFile(wheel).namelist())
missing = sorted(tree - shipped)
assert not missing, f"files of the source tree missing from {Path(wheel).name}: {missing}"

modules = 0
for pkg in packages:
    top = importlib.import_module(pkg)
    where = Path(top.__file__).resolve()
    assert where.is_relative_to(site.resolve()), f"{pkg} imported from {where}, not from the installed wheel"
    for info in pkgutil.walk_packages(top.__path__, prefix=f"{pkg}."):
        if not info.name.endswith(".__main__"):  # `python -m` entry points run when imported
            importlib.import_module(info.name)
            modules += 1
data = sorted(Path(p).name for p in tree if Path(p).suffix in {".ipynb", ".json", ".yaml", ".yml", ".safetensors"})
print(f"check_wheel: {Path(wheel).name}: {len(tree)} files of the packages, {modules} modules import "
      f"from the installed copy; data files {data}")
EOF
"$WORK/venv/bin/scimech" --version
"$WORK/venv/bin/python" -c '
from scimech.studies.contract import registered_studies
studies = registered_studies()
assert {"ocean", "astro", "neuro"} <= set(studies), studies
print("check_wheel: the wheel registers the studies", sorted(studies))'
