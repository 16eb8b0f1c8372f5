"""Dask execution: one way to get a client, and a resumable map over units of work.

``get_client("sync")`` runs everything in this process (no Dask at all), ``"threads"``
an in-process Dask client, ``"local"`` a :class:`dask.distributed.LocalCluster` with one
process per core, and ``"slurm"`` / ``"pbs"`` a `dask-jobqueue` cluster built from a
config file section::

    [cluster]
    kind = "slurm"
    cores = 8
    memory = "32GB"
    walltime = "02:00:00"
    account = "myproject"
    queue = "normal"
    jobs = 4            # how many batch jobs to ask for

No home-made scheduler: the units of a study (one seed x regime, one candidate program)
are Dask tasks; :func:`map_units` skips units already finished in a
:class:`~scimech.results.UnitStore`, saves each as it completes (atomically) and lets
Dask retry a unit whose worker died.
"""

from __future__ import annotations

import os
import tomllib
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from .errors import ConfigError
from .progress import progress
from .results import UnitStore

__all__ = ["get_client", "jobqueue_kwargs", "read_cluster_config", "map_units", "add_cluster_arguments", "client_from_args", "ClusterKind"]

ClusterKind = Literal["sync", "threads", "local", "slurm", "pbs"]
_KINDS = ("sync", "threads", "local", "slurm", "pbs")
_JOBQUEUE_KEYS = {
    "cores", "memory", "walltime", "account", "queue", "processes", "job_extra_directives",
    "local_directory", "interface", "job_script_prologue", "log_directory", "python",
}
_CLUSTER_KEYS = {"kind", "jobs", "n_workers", "threads_per_worker", "memory_limit"} | _JOBQUEUE_KEYS


def read_cluster_config(path: str | os.PathLike) -> dict:
    """Read the ``[cluster]`` section of a TOML or YAML file.

    Raises
    ------
    ConfigError
        Missing file, no ``cluster`` section, an unknown key or kind.
    """
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"No cluster config at {str(path)!r}.")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except Exception as err:
        raise ConfigError(f"Cannot parse {str(path)!r}: {err}") from err
    section = data.get("cluster")
    if not isinstance(section, dict):
        raise ConfigError(f"{str(path)!r} has no [cluster] section; write e.g.\n[cluster]\nkind = \"slurm\"")
    return validate_cluster_config(section)


def validate_cluster_config(section: Mapping[str, Any]) -> dict:
    """Check a cluster section: known keys, a known kind."""
    unknown = set(section) - _CLUSTER_KEYS
    if unknown:
        raise ConfigError(
            f"Unknown key(s) {sorted(unknown)} in [cluster]; expected some of {sorted(_CLUSTER_KEYS)}."
        )
    kind = section.get("kind", "local")
    if kind not in _KINDS:
        raise ConfigError(f"[cluster] kind must be one of {_KINDS}; got {kind!r}.")
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


def get_client(kind: ClusterKind = "local", config: Mapping[str, Any] | str | os.PathLike | None = None,
               scheduler: str | None = None, n_workers: int | None = None):
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
        return Client(processes=False, n_workers=1, threads_per_worker=section.get("threads_per_worker", 2),
                      dashboard_address=None)
    if kind == "local":
        import dask

        n = n_workers or section.get("n_workers") or os.cpu_count() or 1
        # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ in each worker, which freezes glibc's mmap
        # threshold at 128 KiB: every torch tensor above it then comes from fresh pages (units
        # measured 2.5x slower than in-process, bench/results/astro.md). A 32 MiB threshold
        # restores in-process speed; the nanny reads it when it is created, restarts included.
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{k}": v for k, v in _WORKER_MALLOC.items()}):
            cluster = LocalCluster(n_workers=n, threads_per_worker=section.get("threads_per_worker", 1),
                                   processes=True, dashboard_address=None,
                                   memory_limit=section.get("memory_limit", "auto"))
        return Client(cluster)
    try:
        import dask_jobqueue
    except ImportError as err:  # pragma: no cover - hpc extra installed in dev
        raise ImportError("SLURM/PBS clusters need dask-jobqueue: pip install 'scimech[hpc]'") from err
    kwargs = jobqueue_kwargs(section, kind)
    cls = dask_jobqueue.SLURMCluster if kind == "slurm" else dask_jobqueue.PBSCluster
    cluster = cls(**kwargs)
    cluster.scale(jobs=int(section.get("jobs", 1)))
    return Client(cluster)


def _call(fn: Callable[..., Any], kwargs: dict) -> Any:
    """Run one unit on a worker. Its own dask/xarray work stays in the worker (synchronous
    scheduler): otherwise every ``.compute()`` inside a unit is shipped back to the
    distributed scheduler as nested tasks (measured 3-7x slower per unit)."""
    import dask

    with dask.config.set(scheduler="synchronous"):
        return fn(**kwargs)


def map_units(fn: Callable[..., Any], units: Mapping[str, Mapping[str, Any]], store: UnitStore | str | os.PathLike,
              client=None, *, retries: int = 2, desc: str = "units", **save_attrs) -> dict[str, Any]:
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
        How many times Dask reruns a unit whose worker died.

    Returns
    -------
    dict
        ``{key: result}`` for every unit, loaded back from the store, so a resumed run and
        an uninterrupted one return the same objects.
    """
    if not isinstance(store, UnitStore):
        store = UnitStore(store)
    todo = {k: v for k, v in units.items() if not store.done(k)}
    if client is None:
        for key in progress(list(todo), desc=desc):
            store.save(key, fn(**todo[key]), **save_attrs)
    else:
        from dask.distributed import as_completed

        futures = {client.submit(_call, fn, dict(kwargs), pure=False, retries=retries,
                                 key=f"unit-{store._slug(k)}-{uuid.uuid4().hex[:8]}"): k
                   for k, kwargs in todo.items()}
        bar = progress(range(len(futures)), desc=desc)
        for fut in as_completed(list(futures)):
            key = futures[fut]
            store.save(key, fut.result(), **save_attrs)
            next(bar, None)
    return {k: store.load(k) for k in units}


def add_cluster_arguments(parser) -> None:
    """Add ``--cluster CONFIG`` and ``--scheduler ADDRESS`` to a study's argparse parser."""
    group = parser.add_argument_group("execution (Dask)")
    group.add_argument("--cluster", metavar="CONFIG", default=None,
                       help="TOML/YAML file with a [cluster] section (kind = local | slurm | pbs | threads | sync)")
    group.add_argument("--scheduler", metavar="ADDRESS", default=None,
                       help="address of a running Dask scheduler, e.g. tcp://login1:8786")
    group.add_argument("--workers", type=int, default=None, metavar="N",
                       help="run units on a local Dask cluster of N worker processes (default: serial)")


def client_from_args(args):
    """The Dask client asked for by :func:`add_cluster_arguments` flags (``None``: serial)."""
    if getattr(args, "scheduler", None):
        return get_client(scheduler=args.scheduler)
    if getattr(args, "cluster", None):
        return get_client(config=args.cluster)
    if getattr(args, "workers", None):
        return get_client("local", n_workers=args.workers)
    return None
