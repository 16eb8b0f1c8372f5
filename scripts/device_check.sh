#!/usr/bin/env bash
# The GPU check: the toolkit on one CUDA device, in under 8 minutes, with what it writes for
# bench/RESULTS.md.
#
#   1. installs the toolkit (pip install --no-deps -e .) and the wheels of its other dependencies,
#      offline, from WHEELS (made beforehand by scripts/device_wheels.sh, where the index is reached);
#   2. the 144-head sweeps against a naive loop, TransformerLens and nnsight on the device
#      (bench/bench_sweep_scaling.py --device cuda: the same values, checked against a naive loop on
#      the CPU too) -> sweep_scaling.md, sweep_scaling.json;
#   3. the conformance suite with the tests' tensors on the device (SCIMECH_TEST_DEVICE, read by
#      tests/conftest.py) -> conformance.xml (JUnit);
#   4. ocean's quick study with --device cuda (seed 0, the three regimes) -> ocean_study.tar.gz (its
#      report, findings and figures);
#   5. device_check.md: every step's outcome and time, the conformance counts and failures, the sweep
#      targets, the study's planted-truth line; device_check.log: every step's output.
#   Steps 3 and 4 run side by side after the timed sweeps. A step that fails or runs out of its time
#   is said so and the others still run; the script exits 1 if any step did not pass.
#
# Usage:
#   scripts/device_check.sh [--out DIR] [--wheels DIR]     on the GPU machine (DIR default: $OUT, else
#                                                         bench/out/device_check; WHEELS default
#                                                         bench/out/wheels)
#   scripts/device_check.sh --cpu [--out DIR]              the same steps on the CPU at the smallest sizes,
#                                                         in this environment (no install): the sweeps at
#                                                         1 and 2 sites, one round; one conformance file;
#                                                         the study's mixed regime for one epoch
#   --conformance PATH   the conformance tests to run (default: tests/conformance; --cpu: one file)
#   --budget SECONDS     the time every step must end in (default 450: 7.5 minutes; --cpu 1800, where
#                        each step may also take four times its time on the GPU)
#   PYTHON=...           the interpreter (default: python3; --cpu: .venv/bin/python where there is one)
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD

CPU=0
DEST="${OUT:-}"
WHEELS=bench/out/wheels
CONFORMANCE=""
BUDGET=""
while [ $# -gt 0 ]; do
    case "$1" in
    --cpu) CPU=1 ;;
    --out) DEST="$2"; shift ;;
    --wheels) WHEELS="$2"; shift ;;
    --conformance) CONFORMANCE="$2"; shift ;;
    --budget) BUDGET="$2"; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_check: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
DEST="${DEST:-bench/out/device_check}"
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
LOG="$DEST/device_check.log"
: >"$LOG"
: >"$WORK/steps.tsv"

PY="${PYTHON:-}"
if [ -z "$PY" ]; then
    if [ "$CPU" = 1 ] && [ -x .venv/bin/python ]; then PY=$REPO/.venv/bin/python; else PY=python3; fi
fi
if [ "$CPU" = 1 ]; then
    DEVICE=cpu
    SIZES="1 2"
    ROUNDS=1
    CONFORMANCE="${CONFORMANCE:-tests/conformance/test_site_grammar.py}"
    XDIST=""
    STUDY="--seeds 0 --regimes mixed --epochs 1"
    BUDGET="${BUDGET:-1800}"
    SCALE=4 # a loaded 2-core machine: each step may take four times its time on the GPU
else
    DEVICE=cuda
    SIZES="1 2 8 48 144"
    ROUNDS=3
    CONFORMANCE="${CONFORMANCE:-tests/conformance}"
    XDIST="-n 4"
    STUDY="--seeds 0"
    BUDGET="${BUDGET:-450}"
    SCALE=1
fi
START=$SECONDS

say() { echo "device_check: $*" | tee -a "$LOG"; }

# run NAME SECONDS COMMAND...: the command with its output in WORK/NAME.out and the log, ended after
# SECONDS (times SCALE) or where the budget ends (less 20 s for the summary); its outcome joins steps.tsv
run() {
    local name=$1 cap=$2 left t0 rc status
    shift 2
    cap=$((cap * SCALE))
    left=$((BUDGET - (SECONDS - START) - 20))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 5 ]; then
        printf '%s\tnot run\t0\tno time left in the %s s budget\n' "$name" "$BUDGET" >>"$WORK/steps.tsv"
        say "$name: not run (no time left)"
        return 1
    fi
    say "$name: $* (at most ${cap} s)"
    t0=$SECONDS
    timeout --kill-after=10 "$cap" "$@" >"$WORK/$name.out" 2>&1
    rc=$?
    case $rc in
    0) status=passed ;;
    124 | 137) status="timed out" ;;
    *) status=failed ;;
    esac
    printf '%s\t%s\t%s\texit %s\n' "$name" "$status" $((SECONDS - t0)) "$rc" >>"$WORK/steps.tsv"
    { echo "---- $name: $status after $((SECONDS - t0)) s (exit $rc)"; cat "$WORK/$name.out"; } >>"$LOG"
    say "$name: $status after $((SECONDS - t0)) s"
    return $rc
}

# -- 0. the machine --------------------------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "uptime: $(uptime)"
    echo "cores: $(nproc)"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda available", torch.cuda.is_available())'
} >"$WORK/machine.txt" 2>&1
cat "$WORK/machine.txt" >>"$LOG"

# -- 1. install -------------------------------------------------------------------------------------
if [ "$CPU" = 1 ]; then
    printf 'install\tskipped\t0\t--cpu runs in this environment\n' >>"$WORK/steps.tsv"
    say "install: skipped (--cpu runs in this environment)"
elif ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    printf 'install\tfailed\t0\tno wheels in %s: run scripts/device_wheels.sh where the index is reached\n' \
        "$WHEELS" >>"$WORK/steps.tsv"
    say "install: no wheels in $WHEELS (scripts/device_wheels.sh makes them)"
else
    # the dependencies from the wheels, then the toolkit from this tree (its build backend from the
    # wheels too: nothing is fetched)
    run install 180 bash -c '
        set -e
        "$1" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --break-system-packages \
            $(ls "$2"/*.whl | grep -v -e /setuptools- -e /wheel-)
        "$1" -m pip install -q --no-index --no-deps --no-cache-dir --break-system-packages --find-links "$2" -e .
        "$1" -c "import scimech, ocean; print(\"scimech\", scimech.__version__, \"imports\")"' install "$PY" "$WHEELS"
fi
if [ "$DEVICE" = cuda ] && ! "$PY" -c 'import torch, sys; sys.exit(not torch.cuda.is_available())'; then
    say "no CUDA device seen by $PY: the GPU steps are run all the same and will say so"
fi

# -- 2. the sweeps, timed on a quiet machine ----------------------------------------------------------
# shellcheck disable=SC2086
run sweeps 240 "$PY" -m bench.bench_sweep_scaling --device "$DEVICE" --sizes $SIZES --rounds "$ROUNDS" \
    --out "$DEST"

# -- 3 and 4. the conformance suite and the study, side by side ---------------------------------------
cat >"$WORK/device_plugin.py" <<'PYEOF'
"""Deselects what cannot run on this machine, each said in the summary: the cases of a model whose
package was not brought (the FNO: neuraloperator), and on a GPU the test that a model stays on the CPU."""
import importlib.util
import os

NEEDS = {"fno": "neuralop"}  # fixture -> the module it imports
CPU_ONLY = ("test_package.py::test_everything_runs_on_the_cpu_with_numpy_results",)


def pytest_collection_modifyitems(config, items):
    gone = {f for f, mod in NEEDS.items() if importlib.util.find_spec(mod) is None}
    on_gpu = os.environ.get("SCIMECH_TEST_DEVICE", "cpu") != "cpu"
    keep, drop = [], []
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        params = {v for v in getattr(getattr(item, "callspec", None), "params", {}).values() if isinstance(v, str)}
        why = [f"{f}: no module {NEEDS[f]}" for f in gone if f in fixtures or f in params]
        if on_gpu and item.nodeid.endswith(CPU_ONLY):
            why.append("checks that a model stays on the CPU")
        (drop if why else keep).append(item)
        if why:
            with open(os.environ["DEVICE_CHECK_DESELECTED"], "a") as f:
                f.write(f"{item.nodeid}\t{'; '.join(why)}\n")
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
PYEOF
: >"$WORK/deselected.tsv"
# shellcheck disable=SC2086
(export PYTHONPATH="$WORK${PYTHONPATH:+:$PYTHONPATH}" SCIMECH_TEST_DEVICE="$DEVICE" \
    DEVICE_CHECK_DESELECTED="$WORK/deselected.tsv"
run conformance 300 "$PY" -m pytest -q -p no:cacheprovider -p device_plugin $XDIST --timeout 240 \
    --junitxml "$DEST/conformance.xml" $CONFORMANCE) &
CONF_PID=$!
# shellcheck disable=SC2086
(export MPLBACKEND=Agg
run study 300 "$PY" -m scimech ocean study --size quick --device "$DEVICE" $STUDY \
    --out "$WORK/ocean") &
STUDY_PID=$!
wait "$CONF_PID"
wait "$STUDY_PID"
if [ -d "$WORK/ocean" ]; then
    (cd "$WORK/ocean" && tar -czf "$DEST/ocean_study.tar.gz" --exclude='*.zarr' --exclude=checkpoints \
        --exclude=units -- *.md *.txt *.nc figures 2>/dev/null)
    cp "$WORK/ocean/report.md" "$DEST/ocean_report.md" 2>/dev/null
fi

# -- 5. the summary ---------------------------------------------------------------------------------
"$PY" - "$WORK" "$DEST" "$DEVICE" "$BUDGET" $((SECONDS - START)) <<'PYEOF'
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

work, dest, device, budget, took = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
steps = [line.split("\t") for line in (work / "steps.tsv").read_text().splitlines() if line]
out = [
    f"## The GPU check ({device})",
    "",
    "Command: `scripts/device_check.sh" + (" --cpu" if device == "cpu" else "") + "` (wheels from "
    "`scripts/device_wheels.sh`)",
    "",
    "Machine: " + "; ".join(line for line in (work / "machine.txt").read_text().splitlines() if line) + ".",
    "",
    "| step | outcome | seconds | note |",
    "|---|---|---|---|",
    *(f"| {s[0]} | {s[1]} | {s[2]} | {s[3]} |" for s in steps),
    "",
    f"All steps in {took} s (budget {budget} s).",
    "",
]
xml = dest / "conformance.xml"
if xml.exists():
    root = ET.parse(xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    n = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    bad = []
    for c in (c for s in suites for c in s.iter("testcase")):
        why = c.find("failure") if c.find("failure") is not None else c.find("error")
        if why is not None:
            bad.append((f"{c.get('classname')}::{c.get('name')}", " ".join(why.get("message", "").split())[:200]))
    # each xdist worker collects, and says so, on its own
    desel = sorted({tuple(line.split("\t")) for line in (work / "deselected.tsv").read_text().splitlines() if line})
    out += [
        f"**Conformance on {device}**: {n['tests'] - n['failures'] - n['errors'] - n['skipped']} passed, "
        f"{n['failures']} failed, {n['errors']} errors, {n['skipped']} skipped of {n['tests']} run; "
        f"{len(desel)} deselected.",
        "",
        *(f"- failed: `{name}`: {msg}" for name, msg in bad[:40]),
        *([f"- ... and {len(bad) - 40} more (conformance.xml)"] if len(bad) > 40 else []),
        *(f"- deselected ({why}): {sum(w == why for _, w in desel)}" for why in sorted({w for _, w in desel})),
        "",
    ]
sweep = dest / "sweep_scaling.json"
if sweep.exists():
    s = json.loads(sweep.read_text())
    out += [f"**Sweeps on {s['where']}** (sweep_scaling.md):", "", *s["targets"]]
    paid = s["checks_paid_once"]
    out += [
        f"- a second verb on the same model and inputs pays no check again: "
        f"{'yes' if paid['second_verb_pays_no_check'] else 'no'} ({paid['sites']} sites)",
        "",
    ]
    for r in s["rows"]:
        if "max_diff_vs_cpu_naive" in r:
            out.append(
                f"- {r['verb']} at {r['sites']} sites, every tool vs the naive loop on the CPU: max |diff| "
                f"{max(r['max_diff_vs_cpu_naive'].values()):.1e} (values up to {r['cpu_naive_scale']:.2f})"
            )
    out.append("")
study = work / "study.out"
if study.exists():
    lines = [line.strip() for line in study.read_text().splitlines() if "planted truth" in line]
    out += [f"**Ocean's quick study on {device}**: " + (lines[-1] if lines else "no planted-truth line (see the log)"), ""]
(dest / "device_check.md").write_text("\n".join(out) + "\n")
print("\n".join(out))
PYEOF
say "wrote $(cd "$DEST" && ls | tr '\n' ' ')in $DEST"
! grep -q -P '\t(failed|timed out|not run)\t' "$WORK/steps.tsv"
