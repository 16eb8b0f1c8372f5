"""Dask execution: one way to get a client, and a resumable map over units of work.

``get_client("sync")`` runs everything in this process (no Dask at all), ``"threads"``
an in-process Dask client, ``"local"`` a :class:`dask.distributed.LocalCluster` with one
process per core, and ``"slurm"`` / ``"pbs"`` a `dask-jobqueue` cluster built from a
config file section::

    [cluster]
    kind = "slurm"
    cores = 1               # per job
    memory = "2GB"          # per job
    walltime = "01:00:00"
    queue = "debug"         # a partition that exists: `sinfo -s`
    jobs = 2                # batch jobs kept running
    start_timeout = 120     # seconds without any worker before the study fails

No home-made scheduler: the units of a study (one seed x regime, one candidate program)
are Dask tasks; :func:`map_units` skips units already finished in a
:class:`~scimech.run.results.UnitStore`, saves each as it completes (atomically) and lets
Dask rerun a unit whose worker died (up to ``distributed.scheduler.allowed-failures``).

A batch cluster is watched from this process (:class:`_BatchJobs`): a refused submission
(``sbatch``'s own error), jobs that can never start (SLURM's pending reason) and no worker
within ``start_timeout`` seconds each end the study with one :class:`ClusterError`, every
job it submitted cancelled; a ``waiting for N SLURM jobs (pending: reason)`` line goes to
stderr while none runs; a job that ends (walltime, preemption, ``scancel``) is replaced,
so there are always ``jobs`` of them; SIGINT and SIGTERM cancel every job and exit with
status 130 / 143.
"""

from __future__ import annotations

import asyncio
import atexit
import getpass
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from scimech.errors import ConfigError, ScimechError
from scimech.run.progress import progress
from scimech.run.results import UnitStore

__all__ = [
    "get_client",
    "jobqueue_kwargs",
    "read_cluster_config",
    "map_units",
    "client_from_args",
    "ClusterKind",
    "ClusterError",
]

ClusterKind = Literal["sync", "threads", "local", "slurm", "pbs"]
_KINDS = ("sync", "threads", "local", "slurm", "pbs")
_JOBQUEUE_KEYS = {
    "cores",
    "memory",
    "walltime",
    "account",
    "queue",
    "processes",
    "job_extra_directives",
    "local_directory",
    "interface",
    "job_script_prologue",
    "log_directory",
    "python",
}
_CLUSTER_KEYS = {"kind", "jobs", "n_workers", "threads_per_worker", "memory_limit", "start_timeout"} | _JOBQUEUE_KEYS
START_TIMEOUT = 120.0  # seconds a batch study waits without any worker (key start_timeout)


class ClusterError(ScimechError, RuntimeError):
    """A batch cluster (SLURM, PBS) cannot give the study a worker: the submission was refused,
    the jobs can never start, or no worker connected within ``start_timeout`` seconds. Every
    job the study submitted has been cancelled when it is raised."""


def read_cluster_config(path: str | os.PathLike) -> dict:
    """Read the ``[cluster]`` section of a TOML or YAML file.

    Raises
    ------
    ConfigError
        Missing file, no ``cluster`` section, an unknown key or kind.
    """
    from scimech.run.config import read_config

    path = Path(path)
    if not path.exists():
        raise ConfigError(f"No cluster config at {str(path)!r}.")
    try:
        data = read_config(path)  # the same TOML / YAML rules as every --config file
    except ConfigError as err:
        raise ConfigError(
            f"{str(path)!r} is not a cluster file ({' '.join(str(err).split())}); write a TOML "
            'or YAML file with a [cluster] section, e.g.\n[cluster]\nkind = "slurm"'
        ) from None
    section = data.get("cluster")
    if not isinstance(section, dict):
        raise ConfigError(f'{str(path)!r} has no [cluster] section; write e.g.\n[cluster]\nkind = "slurm"')
    return validate_cluster_config(section)


def validate_cluster_config(section: Mapping[str, Any]) -> dict:
    """Check a cluster section: known keys, a known kind."""
    unknown = set(section) - _CLUSTER_KEYS
    if unknown:
        raise ConfigError(f"Unknown key(s) {sorted(unknown)} in [cluster]; expected some of {sorted(_CLUSTER_KEYS)}.")
    kind = section.get("kind", "local")
    if kind not in _KINDS:
        raise ConfigError(f"[cluster] kind must be one of {_KINDS}; got {kind!r}.")
    timeout = section.get("start_timeout", START_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        raise ConfigError(f"[cluster] start_timeout must be a number of seconds > 0; got {timeout!r}.")
    jobs = section.get("jobs", 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ConfigError(f"[cluster] jobs must be a whole number >= 1; got {jobs!r}.")
    return dict(section)


_WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 33554432}  # bytes (32 MiB); see get_client


def jobqueue_kwargs(section: Mapping[str, Any], kind: str = "slurm") -> dict:
    """Keyword arguments of ``dask_jobqueue.SLURMCluster`` / ``PBSCluster`` from a
    validated ``[cluster]`` section, with the worker malloc setting of :func:`get_client`
    added to ``job_script_prologue`` (unless the section sets it already)."""
    kwargs = {k: v for k, v in section.items() if k in _JOBQUEUE_KEYS}
    for need in ("cores", "memory"):
        if need not in kwargs:
            raise ConfigError(f"A {kind} cluster needs '{need}' in [cluster] (e.g. cores = 8, memory = \"32GB\").")
    prologue = list(kwargs.get("job_script_prologue") or [])
    if not any("MALLOC_MMAP_THRESHOLD_" in line for line in prologue):
        prologue += [f"export {k}={v}" for k, v in _WORKER_MALLOC.items()]
    kwargs["job_script_prologue"] = prologue
    return kwargs


def get_client(
    kind: ClusterKind = "local",
    config: Mapping[str, Any] | str | os.PathLike | None = None,
    scheduler: str | None = None,
    n_workers: int | None = None,
):
    """A Dask client for the requested kind of execution, or ``None`` for ``"sync"``.

    Parameters
    ----------
    kind
        ``"sync"`` (no Dask: run in this process), ``"threads"`` (in-process client),
        ``"local"`` (LocalCluster, one single-threaded worker process per core),
        ``"slurm"`` or ``"pbs"`` (dask-jobqueue; install the ``hpc`` extra).
    config
        A mapping or a path to a file with a ``[cluster]`` section; its ``kind`` wins.
    scheduler
        Address of a running scheduler (``tcp://host:8786``); overrides everything else.
    n_workers
        Workers of a local cluster (default: number of cores).

    Examples
    --------
    >>> sm.get_client("sync") is None  # run in this process
    True
    >>> client = sm.get_client("threads", n_workers=1)
    >>> type(client).__name__
    'Client'
    >>> client.close()
    """
    from dask.distributed import Client, LocalCluster

    if scheduler:
        return Client(scheduler)
    section: dict = {}
    if config is not None:
        section = read_cluster_config(config) if not isinstance(config, Mapping) else validate_cluster_config(config)
        kind = section.get("kind", kind)
    if kind not in _KINDS:
        raise ConfigError(f"kind must be one of {_KINDS}; got {kind!r}.")
    if kind == "sync":
        return None
    if kind == "threads":
        return Client(
            processes=False,
            n_workers=1,
            threads_per_worker=section.get("threads_per_worker", 2),
            dashboard_address=None,
        )
    if kind == "local":
        import dask

        n = n_workers or section.get("n_workers") or os.cpu_count() or 1
        # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in each worker, which freezes glibc's mmap
        # threshold at 128 KiB: every torch tensor above it then comes from fresh pages (units
        # measured 2.5x slower than in-process, bench/results/astro.md). A 32 MiB threshold
        # restores in-process speed; the nanny reads it when it is created, restarts included.
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in _WORKER_MALLOC.items()}):
            cluster = LocalCluster(
                n_workers=n,
                threads_per_worker=section.get("threads_per_worker", 1),
                processes=True,
                dashboard_address=None,
                memory_limit=section.get("memory_limit", "auto"),
            )
        return Client(cluster)
    kwargs = jobqueue_kwargs(section, kind)
    batch = _BatchJobs(
        kind, kwargs, jobs=int(section.get("jobs", 1)), start_timeout=float(section.get("start_timeout", START_TIMEOUT))
    )
    return batch.start()


# --------------------------------------------------------------------------------------------
# Batch clusters (SLURM, PBS): watched from the process that runs the study

# SLURM pending reasons that no waiting resolves: the request does not fit the partition, or the
# account / QOS may not use it (squeue(1), "JOB REASON CODES")
_NEVER_STARTS = {
    "PartitionConfig": "the request (cores, memory, nodes or walltime) exceeds what the partition allows",
    "PartitionNodeLimit": "more nodes than the partition allows",
    "PartitionTimeLimit": "the walltime exceeds the partition's time limit",
    "InvalidAccount": "the account is not valid",
    "InvalidQOS": "the QOS is not valid",
    "AccountNotAllowed": "the account may not use this partition",
    "QOSNotAllowed": "the QOS may not use this partition",
    "BadConstraints": "the constraints cannot be satisfied",
}
_ENDED = {
    "COMPLETING",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "OUT_OF_MEMORY",
    "DEADLINE",
    "SPECIAL_EXIT",
    "REVOKED",
}
_TICK = 2.0  # seconds between two looks at the cluster
_QUEUE_EVERY = 30.0  # seconds between two squeue calls while workers are connected
_LOST_GRACE = 10.0  # a job whose workers left this long ago has ended (a nanny restart is shorter;
# distributed drops a lost job after 15 s: lost-worker-timeout)
_SUBMIT_TRIES = 3  # consecutive refused submissions before the study fails
_EARLY_ENDS = 3  # jobs ending before their worker connected before the study fails
_ACTIVE: list[_BatchJobs] = []
_HANDLERS: dict[int, Any] = {}


def _batch_of(client) -> _BatchJobs | None:
    return getattr(client, "_scimech_batch", None)


def _stderr_of(err: BaseException) -> str:
    """sbatch/qsub's own message out of dask-jobqueue's RuntimeError text."""
    text = str(err)
    if "stderr:" in text:
        text = text.split("stderr:", 1)[1]
    return " ".join(line.strip() for line in text.strip().splitlines() if line.strip()) or str(err)


def _run(cmd: list[str], timeout: float = 30.0) -> str | None:
    """stdout of a short batch-system command, or None if it failed or timed out."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def _tail(path: Path, n: int = 5) -> str:
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return "\n    ".join(lines[-n:])


def _tracked_job(base, batch: _BatchJobs):
    """``base`` (SLURMJob, PBSJob) whose submission is recorded by ``batch``: the job id, or
    sbatch's error kept for the study's thread instead of an asyncio traceback nobody reads."""

    class Tracked(base):
        async def start(self):
            self.scimech_error = None
            try:
                await super().start()
            except Exception as err:
                from distributed.core import Status

                self.scimech_error = _stderr_of(err)  # text only: no traceback keeping the job alive
                self.status = Status.running  # a placeholder: the watcher drops and resubmits it
                return
            batch._submitted(self.job_id)

    Tracked.__name__ = Tracked.__qualname__ = f"Scimech{base.__name__}"
    return Tracked


class _BatchJobs:
    """The jobs of one dask-jobqueue cluster, kept at ``jobs`` and cancelled on the way out.

    A coroutine on the cluster's event loop looks every ``_TICK`` seconds: it resubmits jobs
    that ended (walltime, preemption, scancel: their SLURM state, or their workers gone for
    ``_LOST_GRACE`` s) or whose submission failed, prints a "waiting for N SLURM jobs" line
    while no worker is connected, and records one :class:`ClusterError` (cancelling every job)
    when the jobs cannot give a worker; the study's thread raises it (:meth:`check`)."""

    def __init__(self, kind: str, kwargs: dict, jobs: int, start_timeout: float):
        self.kind, self.jobs, self.start_timeout = kind, jobs, start_timeout
        self.label = "SLURM" if kind == "slurm" else "PBS"
        self.kwargs = kwargs
        self.job_name = f"scimech-{uuid.uuid4().hex[:6]}"  # one name for all its jobs: squeue/scancel -n
        self.user = getpass.getuser()
        self.cwd = os.getcwd()  # sbatch's default log folder
        self.error: ClusterError | None = None
        self.stopping = False
        self.first_worker = threading.Event()
        self._ids: list[str] = []
        self._submitted_at: dict[str, float] = {}
        self._lock = threading.Lock()
        self._ever_connected: set[str] = set()
        self._lost_since: dict[str, float] = {}
        self._submit_failures = 0
        self._early_ends: list[str] = []
        self._queue: dict[str, tuple[str, str]] | None = None
        self._queue_at = -1e9
        self._no_worker_since: float | None = time.monotonic()
        self._running_said = 0  # the count of running jobs last printed
        self._line, self._line_at = "", 0.0
        self.cluster: Any = None  # a dask-jobqueue cluster once started
        self.client: Any = None

    # ---- the study's thread
    def start(self):
        """Create the cluster, submit the jobs, return a client once a worker is connected."""
        from dask.distributed import Client

        try:
            import dask_jobqueue
        except ImportError as err:  # pragma: no cover - hpc extra installed in dev
            raise ImportError("SLURM/PBS clusters need dask-jobqueue: pip install 'scimech[hpc]'") from err

        _restore_sigint()
        cls = dask_jobqueue.SLURMCluster if self.kind == "slurm" else dask_jobqueue.PBSCluster
        self.cluster = cls(job_cls=_tracked_job(cls.job_cls, self), job_name=self.job_name, **self.kwargs)
        _ACTIVE.append(self)
        _install_handlers()
        self.client = Client(self.cluster)
        self.client._scimech_batch = self
        self.cluster.scale(jobs=self.jobs)
        self.cluster.loop.add_callback(self._keep)
        deadline = time.monotonic() + self.start_timeout + 60  # the watcher's own limit comes first
        while not self.first_worker.wait(0.5):
            if time.monotonic() > deadline:
                self._fail(
                    f"no {self.label} worker connected within {self.start_timeout:.0f} s "
                    f"(start_timeout) and the watcher did not say why"
                )
        self.check()
        return self.client

    def check(self) -> None:
        """Raise the recorded :class:`ClusterError` (its jobs are cancelled, the cluster closed)."""
        if self.error is not None:
            self.close()
            raise self.error

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._ids)

    def cancel(self) -> list[str]:
        """Cancel every job this cluster submitted (synchronously; safe from a signal handler)."""
        self.stopping = True
        ids = self.ids()
        if self.kind == "slurm":
            _run(["scancel", "--quiet", f"--user={self.user}", f"--name={self.job_name}"])
            if ids:
                _run(["scancel", "--quiet", *ids])
        elif ids:
            _run(["qdel", *ids])
        return ids

    def close(self) -> None:
        """Close client and cluster (bounded), then cancel whatever is left."""
        self.stopping = True
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        for obj in (self.client, self.cluster):
            status = getattr(getattr(obj, "status", None), "name", getattr(obj, "status", None))
            try:
                if obj is not None and status not in ("closing", "closed"):
                    obj.close(timeout=20)
            except Exception:  # noqa: BLE001 - shutting down: cancelling below is what matters
                pass
        self.cancel()

    def _fail(self, message: str) -> None:
        if self.error is None:
            self.error = ClusterError(message)
        self.cancel()
        self.first_worker.set()

    def _submitted(self, job_id: str | None) -> None:
        if job_id:
            with self._lock:
                self._ids.append(str(job_id))
                self._submitted_at[str(job_id)] = time.monotonic()
            if self.stopping:  # submitted while the study was being stopped
                self.cancel()

    # ---- the cluster's event loop
    async def _keep(self) -> None:
        warned = False
        while not self.stopping and self.cluster.status.name not in ("closing", "closed"):
            try:
                await self._tick()
            except Exception as err:  # noqa: BLE001 - the watcher must outlive a bad look
                if not warned:
                    print(f"scimech: watching the {self.label} jobs failed once: {err!r}", file=sys.stderr)
                    warned = True
            await asyncio.sleep(_TICK)

    async def _squeue(self) -> dict[str, tuple[str, str]] | None:
        proc = await asyncio.create_subprocess_exec(
            "squeue",
            "-h",
            "-u",
            self.user,
            "-n",
            self.job_name,
            "-o",
            "%i %T %r",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), 30)
        except TimeoutError:
            proc.kill()
            return None
        if proc.returncode != 0:
            return None
        rows = (line.split(None, 2) for line in out.decode().splitlines())
        return {r[0]: (r[1], r[2] if len(r) > 2 else "") for r in rows if len(r) >= 2}

    def _replace(self, name: str) -> None:
        """Forget job ``name`` (cancelling it) and plan a new one under a new name, so that
        distributed's own lost-worker clean-up of the old name cannot touch the new job."""
        cluster = self.cluster
        from distributed.core import Status

        job = cluster.workers.pop(name, None)
        if job is not None:
            if getattr(job, "job_id", None):  # scancel it; the cluster's close() waits for these
                cluster._futures.add(asyncio.ensure_future(job.close()))
                self._lost_since.pop(str(job.job_id), None)
            job.status = Status.closed  # SpecCluster's close() asserts this of every job it created
        if cluster.worker_spec.pop(name, None) is not None:
            cluster._i += 1  # new_worker_spec would hand the freed name out again
            cluster.worker_spec.update(cluster.new_worker_spec())

    async def _tick(self) -> None:
        cluster, now = self.cluster, time.monotonic()
        connected = [str(ws.name) for ws in cluster.scheduler.workers.values()]
        jobs = dict(cluster.workers)
        up = {n for n in jobs if any(w == str(n) or w.startswith(f"{n}-") for w in connected)}
        self._ever_connected |= {str(jobs[n].job_id) for n in up if getattr(jobs[n], "job_id", None)}
        if up:
            if len(up) != self._running_said and not self.stopping:  # each job that starts or ends, once
                self._say(f"{len(up)} of {len(jobs)} {self.label} jobs running", force=True)
                self._running_said = len(up)
            self._no_worker_since, self._early_ends, self._line = None, [], ""
            self.first_worker.set()
        elif self._no_worker_since is None:
            self._no_worker_since = now
            self._running_said = 0  # no worker left: the next one to connect is said again
        if self.kind == "slurm" and (not up or now - self._queue_at >= _QUEUE_EVERY):
            self._queue, self._queue_at = await self._squeue(), now

        # refused submissions: resubmitted, then fatal
        failed = [(n, j.scimech_error) for n, j in jobs.items() if getattr(j, "scimech_error", None)]
        if failed:
            self._submit_failures += len(failed)
            for n, _ in failed:
                self._replace(n)
            # before any worker: a mistake in the cluster file; later: maybe a busy controller
            if not self._ever_connected or self._submit_failures >= _SUBMIT_TRIES:
                return self._fail(self._refused_message(failed[-1][1]))
        elif any(getattr(j, "job_id", None) for j in jobs.values()):
            self._submit_failures = 0

        # jobs that ended: replaced
        for n, job in jobs.items():
            job_id = getattr(job, "job_id", None)
            if not job_id or n in up or n not in cluster.workers:
                self._lost_since.pop(str(job_id), None)
                continue
            job_id = str(job_id)
            ended = False
            # absent from squeue counts only in a listing made after the job was submitted
            if self._queue is not None and self._queue_at > self._submitted_at.get(str(job_id), now):
                state = self._queue.get(job_id)
                ended = state is None or state[0] in _ENDED
            if job_id in self._ever_connected:  # its workers left: gone for good after a grace
                since = self._lost_since.setdefault(job_id, now)
                ended = ended or now - since >= _LOST_GRACE
            if ended:
                if job_id not in self._ever_connected:
                    self._early_ends.append(job_id)
                how = (self._queue or {}).get(job_id, ("ended", ""))[0].lower()
                self._say(f"{self.label} job {job_id} {how}: submitting a replacement", force=True)
                self._replace(n)
        if len(self._early_ends) >= _EARLY_ENDS:
            return self._fail(self._early_end_message())
        if len(cluster.workers) < len(cluster.worker_spec) and not self.stopping:
            await cluster._correct_state()

        if up or self._no_worker_since is None:
            return
        waited = now - self._no_worker_since
        current = set(self._current())
        mine = {i: s for i, s in (self._queue or {}).items() if i in current}
        hopeless = sorted({r for _, r in mine.values() if r in _NEVER_STARTS})
        if hopeless:
            return self._fail(self._never_message(mine, hopeless))
        if waited >= self.start_timeout:
            return self._fail(self._timeout_message(mine))
        if waited >= 3:
            self._say(self._waiting_line(mine))

    # ---- messages
    def _say(self, line: str, force: bool = False) -> None:
        now = time.monotonic()
        if force or line != self._line or now - self._line_at >= 30:
            from tqdm import tqdm

            tqdm.write(f"scimech: {line}", file=sys.stderr)  # above a progress bar, not glued to it
            self._line, self._line_at = line, now

    def _states(self, mine: dict[str, tuple[str, str]]) -> str:
        counts: dict[str, list[str]] = {}
        for i, (state, reason) in sorted(mine.items()):
            what = state.lower() if state != "PENDING" else f"pending: {reason}"
            counts.setdefault(what, []).append(i)
        return ", ".join(f"{len(v)} {k} (job {' '.join(v)})" for k, v in counts.items())

    def _waiting_line(self, mine: dict[str, tuple[str, str]]) -> str:
        n = len(self.cluster.workers)
        where = self._states(mine) if mine else f"jobs {' '.join(self._current()) or '(none yet)'}"
        see = (
            f"squeue -u {self.user} -n {self.job_name}"
            if self.kind == "slurm"
            else f"qstat {' '.join(self._current())}"
        )
        return f"waiting for {n} {self.label} job{'s' if n != 1 else ''} to start a worker: {where}; `{see}`"

    def _logs(self, job_id: str | None = None) -> str:
        log_dir = self.kwargs.get("log_directory")
        if self.kind != "slurm":
            return f"job logs in {log_dir or self.cwd}"
        if log_dir:
            return f"worker logs: {log_dir}/{self.job_name}-{job_id or '<job id>'}.err/.out"
        return f"worker logs: {self.cwd}/slurm-{job_id or '<job id>'}.out (set log_directory to choose)"

    def _refused_message(self, text: str) -> str:
        cmd = "sbatch" if self.kind == "slurm" else "qsub"
        msg = f"{cmd} refused the {self.label} job: {text}"
        if self.kind == "slurm" and "partition" in text.lower():
            parts = (_run(["sinfo", "-h", "-o", "%P"]) or "").split()
            msg += (
                f"; [cluster] queue = {self.kwargs.get('queue')!r}, partitions here: "
                f"{', '.join(parts) or 'see sinfo -s'}."
            )
        elif any(w in text.lower() for w in ("memory", "cpu", "node configuration", "nodes")):
            msg += f". Each job asks for {self._ask()}.{self._node_sizes()}"
        return msg.rstrip(".") + "."

    def _node_sizes(self) -> str:
        if self.kind != "slurm":
            return ""
        args = ["sinfo", "-h", "-N", "-o", "%N %P %c %m"]
        if self.kwargs.get("queue"):
            args[2:2] = ["-p", str(self.kwargs["queue"])]
        rows = sorted(set((_run(args) or "").splitlines()))
        sizes = "; ".join(
            f"{r.split()[0]}: {r.split()[2]} cores, {r.split()[3]} MB" for r in rows[:5] if len(r.split()) == 4
        )
        return f" Nodes of the partition: {sizes}." if sizes else ""

    def _never_message(self, mine, hopeless: list[str]) -> str:
        why = "; ".join(f"{r}: {_NEVER_STARTS[r]}" for r in hopeless)
        return (
            f"the {self.label} jobs can never start ({self._states(mine)}): {why}. "
            f"Each job asks for {self._ask()}.{self._node_sizes()} Cancelled them."
        )

    def _ask(self) -> str:
        return ", ".join(
            f"{k} = {self.kwargs[k]!r}"
            for k in ("cores", "processes", "memory", "walltime", "queue", "account")
            if self.kwargs.get(k) is not None
        )

    def _timeout_message(self, mine) -> str:
        running = [i for i, (s, _) in mine.items() if s == "RUNNING"]
        msg = (
            f"no Dask worker connected within {self.start_timeout:.0f} s (start_timeout in [cluster]); "
            f"the {self.label} jobs: {self._states(mine) if mine else ' '.join(self._current()) or 'none'}."
        )
        if not running:
            return msg + " If the queue is just busy, raise start_timeout. Cancelled them."
        msg += (
            f" Running jobs whose worker never reached the scheduler at {self.cluster.scheduler_address}: "
            'can the nodes reach this machine (set interface, e.g. "ib0"), and does `python` exist there? '
            f"Cancelled them. {self._logs(running[0])}"
        )
        return msg + self._log_tail(running[0], "it ends with")

    def _log_file(self, job_id: str) -> Path | None:
        log_dir = self.kwargs.get("log_directory")
        if self.kind != "slurm":
            return None
        for p in (
            [Path(log_dir) / f"{self.job_name}-{job_id}.err", Path(log_dir) / f"{self.job_name}-{job_id}.out"]
            if log_dir
            else [Path(self.cwd) / f"slurm-{job_id}.out"]
        ):
            if p.is_file() and p.stat().st_size:
                return p
        return None

    def _early_end_message(self) -> str:
        last = self._early_ends[-1]
        msg = (
            f"{len(self._early_ends)} {self.label} jobs ({' '.join(self._early_ends)}) ended before their Dask "
            f"worker connected to the scheduler at {self.cluster.scheduler_address}. Cancelled the rest. "
            f"{self._logs(last)}"
        )
        return msg + self._log_tail(last, "the last one ends with")

    def _log_tail(self, job_id: str, intro: str) -> str:
        log = self._log_file(job_id)
        tail = _tail(log) if log is not None else ""
        return f"; {intro}:\n    {tail}" if tail else ""

    def _current(self) -> list[str]:
        """Job ids of the jobs the cluster holds now (not those already replaced)."""
        return [str(j.job_id) for j in list(self.cluster.workers.values()) if getattr(j, "job_id", None)]


def _restore_sigint() -> None:
    """dask-jobqueue 0.9.0 (dask_jobqueue.runner, imported with it) replaces SIGINT's handler with
    ``sys.exit()``, so Ctrl-C ended a study with status 0; put Python's own handler back."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGINT)
    if getattr(handler, "__module__", None) == "dask_jobqueue.runner":
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _install_handlers() -> None:
    """SIGINT and SIGTERM: cancel every job submitted, exit with 128 + the signal (130, 143)."""
    if not _HANDLERS:
        atexit.register(_close_all)
        _HANDLERS[0] = None
    if signal.SIGINT in _HANDLERS or threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        _HANDLERS[sig] = signal.getsignal(sig)
        signal.signal(sig, _on_signal)


_EXIT: list[int] = []  # the status a signal is ending the process with (-1: still cancelling)


def _on_signal(signum, frame) -> None:
    code = 128 + signum
    if _EXIT:  # a second signal (Ctrl-C twice; `timeout` signals the child and its group)
        if _EXIT[0] == -1:
            return None  # let the cancelling finish
        os._exit(_EXIT[0])  # the jobs are cancelled already; do not wait for the shut-down
    live = [b for b in _ACTIVE if not b.stopping]
    if not live:  # no batch study running (any more): what was there before
        before = _HANDLERS.get(signum)
        if callable(before):
            return before(signum, frame)
        if before == signal.SIG_IGN:
            return None
        raise SystemExit(code)
    _EXIT.append(-1)
    name = signal.Signals(signum).name
    for b in live:
        ids = b.cancel()
        print(
            f"\nscimech: {name}: cancelled {b.label} jobs {' '.join(ids) or '(none submitted)'}; exit status {code}",
            file=sys.stderr,
            flush=True,
        )
    _EXIT[0] = code

    # shutting the cluster down must not hang the exit: a hard stop after 30 s
    def hard_stop() -> None:
        time.sleep(30)
        os._exit(code)

    threading.Thread(target=hard_stop, daemon=True).start()
    raise SystemExit(code)


def _close_all() -> None:
    for b in list(_ACTIVE):
        b.close()


def _call(fn: Callable[..., Any], kwargs: dict) -> Any:
    """Run one unit on a worker. Its own dask/xarray work stays in the worker (synchronous
    scheduler): otherwise every ``.compute()`` inside a unit is shipped back to the
    distributed scheduler as nested tasks (measured 3-7x slower per unit)."""
    import dask

    with dask.config.set(scheduler="synchronous"):
        return fn(**kwargs)


def map_units(
    fn: Callable[..., Any],
    units: Mapping[str, Mapping[str, Any]],
    store: UnitStore | str | os.PathLike,
    client=None,
    *,
    retries: int = 2,
    desc: str = "units",
    **save_attrs,
) -> dict[str, Any]:
    """Run ``fn(**kwargs)`` for each unit not yet finished in ``store``; save each as it ends.

    Parameters
    ----------
    fn
        A picklable function returning an xarray object or a JSON-able value.
    units
        ``{key: kwargs}``; keys name the units (``"mixed/seed=0"``).
    store
        A :class:`UnitStore` (or its folder). Finished units are skipped.
    client
        A Dask client, or ``None`` to run serially in this process.
    retries
        How many times Dask reruns a unit that *raised* an exception. A unit whose worker
        died (a job cancelled, past its walltime, killed for memory) is rerun by the
        scheduler on another worker, up to ``distributed.scheduler.allowed-failures``
        times (Dask's default: 3), then fails with ``KilledWorker``.

    Returns
    -------
    dict
        ``{key: result}`` for every unit, loaded back from the store, so a resumed run and
        an uninterrupted one return the same objects.

    Examples
    --------
    >>> def square(x):
    ...     return x * x
    >>> sm.map_units(square, {"a": {"x": 2}, "b": {"x": 3}}, "squares")
    {'a': 4, 'b': 9}

    A second call finds both units finished in the store and reads them back:

    >>> sm.map_units(square, {"a": {"x": 2}, "b": {"x": 3}}, sm.UnitStore("squares"))
    {'a': 4, 'b': 9}
    """
    if not isinstance(store, UnitStore):
        store = UnitStore(store)
    todo = {k: v for k, v in units.items() if not store.done(k)}
    if client is None:
        for key in progress(list(todo), desc=desc):
            store.save(key, fn(**todo[key]), **save_attrs)
    else:
        from dask.distributed import as_completed

        batch = _batch_of(client)
        if batch is not None:
            batch.check()
        futures = {
            client.submit(
                _call,
                fn,
                dict(kwargs),
                pure=False,
                retries=retries,
                key=f"unit-{store._slug(k)}-{uuid.uuid4().hex[:8]}",
            ): k
            for k, kwargs in todo.items()
        }
        bar = progress(range(len(futures)), desc=desc)
        done = as_completed(list(futures))
        while not done.is_empty():
            if batch is not None:  # a batch cluster can fail while we wait: poll, never block for ever
                batch.check()
                if not done.has_ready():
                    time.sleep(0.2)
                    continue
            fut = next(done)
            try:
                value = fut.result()
            except Exception as err:
                if batch is not None and batch.error is not None:
                    raise batch.error from err
                raise
            store.save(futures.pop(fut), value, **save_attrs)
            # saved: let go of the result, or Dask recomputes every unit a dead worker held
            # (a job past its walltime took the results of all the units it had run with it)
            fut.release()
            next(bar, None)
    return {k: store.load(k) for k in units}


def client_from_args(args):
    """The Dask client asked for by :func:`scimech.run.options.add_cluster_arguments` flags (``None``: serial)."""
    if getattr(args, "scheduler", None):
        return get_client(scheduler=args.scheduler)
    if getattr(args, "cluster", None):
        return get_client(config=args.cluster)
    if getattr(args, "workers", None):
        return get_client("local", n_workers=args.workers)
    return None
