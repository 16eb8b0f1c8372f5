#!/usr/bin/env bash
# CI: start a one-node SLURM (scripts/slurm_local.sh; installs slurm-wlm and munge when root with
# apt) and run tests_slurm/ against it, the whole under one timeout; the daemons are stopped on exit.
#
#   scripts/ci_slurm.sh                 # after `make test` (which builds .venv)
#   SCIMECH_CI_SLURM_TIMEOUT=1800 scripts/ci_slurm.sh -k signal     # extra args go to pytest
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT=${SCIMECH_CI_SLURM_TIMEOUT:-1500}   # seconds for everything: install, start, tests
[[ -x .venv/bin/python ]] || { echo "ci_slurm: .venv missing: run make install (or make test) first" >&2; exit 2; }

stop() { scripts/slurm_local.sh stop || true; }
trap stop EXIT

start=$SECONDS
eval "$(timeout "$LIMIT" scripts/slurm_local.sh)"
left=$((LIMIT - (SECONDS - start)))
echo "ci_slurm: SLURM up in $((SECONDS - start)) s (SLURM_CONF=$SLURM_CONF); tests get ${left} s" >&2
sinfo -N -o "%N %T cpus=%c mem=%mMB partition=%P" >&2

status=0
# --kill-after: a hung study gets SIGTERM (it cancels its jobs), then SIGKILL 30 s later
timeout --kill-after=30 "$left" .venv/bin/python -m pytest tests_slurm -q -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 124 ]]; then
    echo "ci_slurm: tests_slurm ran past the ${LIMIT} s limit" >&2
fi
echo "ci_slurm: done in $((SECONDS - start)) s, status $status" >&2
exit "$status"
