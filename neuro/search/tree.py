"""Tree search over candidate programs (AIDE-style), resumable from an append-only journal.

Policy per step (``policy="greedy"``, AIDE): draft until ``n_drafts`` drafts exist; else
with probability ``debug_prob`` debug a failed leaf whose debug depth is below
``max_debug_depth``; else improve the best node. ``policy="ucb"`` replaces "improve the
best" by the node maximising UCB on rank-normalised ID scores (visits = children).

Only the ID validation MAE drives selection. OOD MAE and faithfulness are computed for every
node and written to the journal, but the proposer only ever sees :meth:`Node.view`
(id, operator, code, ID validation score, error, status): of the parent, of the best other
node and, for a proposer with ``uses_history = True``, of every node so far (``history=``).

Evaluation is staged: a quick fit on a quarter of the training trials scored on a subset of
validation windows; only nodes whose quick score is below ``quick_threshold`` times the
best quick score so far get the full evaluation (all splits, Jacobian, probes). Programs are
deduplicated by the hash of (code, task, seed): a repeat reuses the cached result.
Budgets: ``max_nodes`` and ``max_seconds``. Every finished node is appended to
``journal.jsonl`` (flushed and fsynced); rerunning with the same ``out_dir`` resumes.

Data: the task's data file and every node's output arrays (MAE per step and per window,
Jacobian, free runs) live in an :class:`neuro.data.stores.ArrayStore` (``store``; default
``out_dir/store``; a study shares one among all its searches), each array written once; a
node records where its arrays are (``Node.arrays``, read back by :meth:`TreeSearch.node_arrays`).

Execution: a *generation* is ``generation`` nodes proposed from the same tree and evaluated
independently (each in its own sandbox process), then appended together. The tree depends on
``generation`` and ``seed`` only, not on where the evaluations run: serially, on a thread
pool of ``workers`` (the default), or as Dask tasks through
:func:`scimech.run.parallel.map_units` when a ``client`` (or a ``unit_store``) is given. In the
Dask case every evaluation is a unit of a :class:`scimech.run.results.UnitStore` (default
``out_dir/units``), so a search killed mid-generation redoes only the evaluations that had not
finished; a unit's record holds the evaluation's scores and the refs of its arrays, which the
unit writes to the store. The store must be on a file system the workers share.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from scimech.errors import ConfigError
from scimech.run.parallel import map_units
from scimech.run.results import UnitStore, atomic_write_text

from ..data.stores import ArrayStore, is_ref
from ..faithfulness import faithfulness
from .sandbox import SandboxLimits, run_in_sandbox, save_data
from .scoring import selection_score, ucb_scores

__all__ = ["Node", "TreeSearch", "load_journal", "evaluate_candidate", "evaluation_unit"]


@dataclass
class Node:
    id: int
    parent: int | None
    op: str
    code: str
    hash: str
    status: str = "pending"  # ok | failed | pruned | duplicate
    val: float | None = None  # ID validation MAE (selection)
    quick_val: float | None = None
    test: float | None = None  # ID test MAE
    ood: dict = field(default_factory=dict)
    faith: dict = field(default_factory=dict)
    error: str = ""
    wall_seconds: float = 0.0
    debug_depth: int = 0
    network_guard: str = ""
    arrays: dict = field(default_factory=dict)  # {name: ref} of its output arrays in the search's store

    def view(self) -> dict:
        """What a proposer may see: no OOD, no faithfulness."""
        return {
            "id": self.id,
            "op": self.op,
            "code": self.code,
            "val": self.val,
            "error": self.error[-3000:],
            "status": self.status,
        }


def load_journal(path: str | os.PathLike) -> list[Node]:
    """Nodes from a journal; a torn last line (crash mid-write) is ignored."""
    nodes = []
    p = Path(path)
    if not p.exists():
        return nodes
    for line in p.read_text().splitlines():
        try:
            nodes.append(Node(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue
    return nodes


def evaluate_candidate(
    code: str, data_quick: str, data_full: str, limits: dict, best_quick: float | None, quick_threshold: float
) -> dict:
    """Staged evaluation of one program (quick fit, then the full one), each stage in its own
    sandbox process; runs wherever it is called (this process, a thread, a Dask worker).

    Parameters
    ----------
    code
        The program's source.
    data_quick, data_full
        Paths of the quick and full data files (:meth:`neuro.tasks.ForecastTask.data_arrays`
        as :func:`~neuro.search.sandbox.read_data` reads them: ``.npz`` or store manifests).
    limits
        :class:`~neuro.search.sandbox.SandboxLimits` fields as a dict (picklable, JSON-able).
    best_quick
        Best quick validation MAE among finished nodes (``None``: no node yet); a program
        whose quick score exceeds ``quick_threshold`` times it is pruned.

    Returns
    -------
    dict
        ``status`` (ok | failed | pruned), ``error``, ``quick_val``, ``val``, ``test``, ``ood``
        (suite -> MAE), ``metrics`` (all of the full stage), ``arrays`` (name -> ndarray, the
        full stage's outputs: MAE per step, Jacobian, free runs), ``network_guard`` and
        ``wall_seconds`` (s).
    """
    t0 = time.perf_counter()
    lim = SandboxLimits(**limits)
    out = {
        "status": "failed",
        "error": "",
        "quick_val": None,
        "val": None,
        "test": None,
        "ood": {},
        "metrics": {},
        "arrays": {},
        "network_guard": "",
        "wall_seconds": 0.0,
    }
    quick = run_in_sandbox(code, data_quick, lim, stage="quick")
    out["network_guard"] = quick.network_guard
    if not quick.ok:
        out["error"] = f"[{quick.status}] {quick.error}"
        out["wall_seconds"] = time.perf_counter() - t0
        return out
    qv = quick.metrics.get("val")
    out["quick_val"] = qv
    if best_quick is not None and math.isfinite(best_quick) and qv > quick_threshold * best_quick:
        out["status"] = "pruned"
        out["error"] = f"pruned after the quick stage (quick val {qv:.4g} > {quick_threshold} x best {best_quick:.4g})"
        out["wall_seconds"] = time.perf_counter() - t0
        return out
    full = run_in_sandbox(code, data_full, lim, stage="full")
    out["wall_seconds"] = time.perf_counter() - t0
    if not full.ok:
        out["error"] = f"[{full.status}] {full.error}"
        return out
    out.update(
        status="ok",
        val=full.metrics.get("val"),
        test=full.metrics.get("test"),
        metrics=dict(full.metrics),
        ood={k[4:]: v for k, v in full.metrics.items() if k.startswith("ood_")},
        arrays=dict(full.arrays),
    )
    return out


def evaluation_unit(store: str, **kwargs) -> dict:
    """:func:`evaluate_candidate` as a unit of work: its output arrays (:func:`_float64`) written to
    the :class:`~neuro.data.stores.ArrayStore` at ``store``, the result holding their refs in their
    place (``arrays``: ``{name: ref}``), so the unit's record holds scores, never the arrays."""
    res = evaluate_candidate(**kwargs)
    res["arrays"] = ArrayStore(store).put(_float64(res["arrays"]))
    return res


def _float64(arrays: dict) -> dict:
    """Output arrays as they are stored and scored: float64 in C order (one layout, whatever
    the program returned)."""
    return {k: np.array(v, dtype=float, order="C") for k, v in arrays.items()}


def _unit_key(node: Node, best_quick: float | None) -> str:
    """Store key of a node's evaluation: its id, program hash and pruning threshold input."""
    bq = hashlib.sha256(repr(best_quick).encode()).hexdigest()[:6]
    return f"node={node.id:04d}-{node.hash}-{bq}"


class TreeSearch:
    """Search for a forecaster program.

    Parameters
    ----------
    task
        A :class:`neuro.tasks.ForecastTask`.
    proposer
        An object with ``propose(op, parent_view, other_view, rng) -> code``.
    out_dir
        Folder of the journal (and, by default, of the store and the evaluations' units).
    policy
        ``"greedy"`` (AIDE) or ``"ucb"``.
    max_nodes, max_seconds
        Budgets.
    workers
        Threads evaluating a generation concurrently when no ``client`` is given (each
        candidate in its own sandboxed process).
    generation
        Nodes proposed per generation (default ``workers``). Together with ``seed`` it fixes
        the tree, whatever executes the evaluations.
    client
        A Dask client (:func:`scimech.run.parallel.get_client`): a generation's evaluations run as
        tasks on its workers through :func:`scimech.run.parallel.map_units`.
    unit_store
        A :class:`scimech.run.results.UnitStore` (or folder) for the evaluations; default
        ``out_dir/units`` when a client is given. Given without a client, evaluations run
        serially but are still stored (resumable mid-generation).
    store
        The :class:`neuro.data.stores.ArrayStore` (or folder) of the task's data and the nodes'
        arrays; default ``out_dir/store``.
    """

    def __init__(
        self,
        task,
        proposer,
        out_dir,
        *,
        policy: str = "greedy",
        max_nodes: int = 20,
        max_seconds: float = 600.0,
        n_drafts: int = 5,
        debug_prob: float = 0.5,
        max_debug_depth: int = 3,
        workers: int = 1,
        seed: int = 0,
        limits: SandboxLimits | None = None,
        quick_threshold: float = 1.5,
        ucb_c: float = 0.5,
        generation: int | None = None,
        client=None,
        unit_store=None,
        store=None,
    ):
        if policy not in ("greedy", "ucb"):
            raise ConfigError(f"policy must be 'greedy' or 'ucb'; got {policy!r}.")
        if generation is not None and int(generation) < 1:
            raise ConfigError(f"generation must be at least 1 node; got {generation!r}.")
        self.task, self.proposer, self.policy = task, proposer, policy
        self.out = Path(out_dir).resolve()  # absolute: Dask workers open the data files by path
        self.out.mkdir(parents=True, exist_ok=True)
        self.max_nodes, self.max_seconds = max_nodes, max_seconds
        self.n_drafts, self.debug_prob, self.max_debug_depth = n_drafts, debug_prob, max_debug_depth
        self.workers, self.seed, self.limits = workers, seed, limits or SandboxLimits()
        self.quick_threshold, self.ucb_c = quick_threshold, ucb_c
        self.generation = int(generation or workers)
        self.client = client
        if unit_store is None and client is not None:
            unit_store = self.out / "units"
        self.units = (
            None if unit_store is None else (unit_store if isinstance(unit_store, UnitStore) else UnitStore(unit_store))
        )
        self.journal = self.out / "journal.jsonl"
        self.nodes: list[Node] = load_journal(self.journal)
        if self.journal.exists():  # drop a torn tail so the next append starts on a fresh line
            good = "".join(json.dumps(asdict(n)) + "\n" for n in self.nodes)
            if self.journal.read_text() != good:
                atomic_write_text(self.journal, good)
        self.cache = {n.hash: n for n in self.nodes if n.status != "duplicate"}
        self.store = store if isinstance(store, ArrayStore) else ArrayStore(store or self.out / "store")
        full = task.data_arrays("full")
        self.data_full = save_data(full, self.store, "full")
        self.data_quick = save_data(full, self.store, "quick")  # the same arrays, cut when read

    # ---------------------------------------------------------------- policy
    def _hash(self, code: str) -> str:
        return hashlib.sha256(f"{code}\x00{self.task.name}\x00{self.seed}".encode()).hexdigest()[:16]

    def best(self) -> Node | None:
        ok = [n for n in self.nodes if n.status == "ok"]
        return min(ok, key=selection_score) if ok else None

    def _choose(self, rng: np.random.Generator, pending_drafts: int) -> tuple[str, Node | None]:
        drafts = sum(n.op == "draft" for n in self.nodes) + pending_drafts
        if drafts < self.n_drafts or self.best() is None:
            return "draft", None
        children = {n.parent for n in self.nodes}
        buggy = [
            n
            for n in self.nodes
            if n.status == "failed" and n.id not in children and n.debug_depth < self.max_debug_depth
        ]
        if buggy and rng.random() < self.debug_prob:
            return "debug", buggy[int(rng.integers(len(buggy)))]
        ok = [n for n in self.nodes if n.status == "ok"]
        if self.policy == "ucb":
            visits = [sum(m.parent == n.id for m in self.nodes) for n in ok]
            u = ucb_scores([selection_score(n) for n in ok], visits, self.ucb_c)
            return "improve", ok[int(np.argmax(u))]
        return "improve", self.best()

    # ------------------------------------------------------------ evaluation
    def _best_quick(self) -> float | None:
        qs = [n.quick_val for n in self.nodes if n.status == "ok" and n.quick_val is not None]
        return min(qs) if qs else None

    def _eval_kwargs(self, node: Node, best_quick: float | None) -> dict:
        return dict(
            store=str(self.store.root),
            code=node.code,
            data_quick=str(self.data_quick),
            data_full=str(self.data_full),
            limits=asdict(self.limits),
            best_quick=best_quick,
            quick_threshold=self.quick_threshold,
        )

    def node_arrays(self, node: Node) -> dict:
        """The output arrays of an evaluated node (``{}`` for one that has none: failed,
        pruned, a duplicate), as :func:`evaluation_unit` stored them."""
        if node.arrays:
            return self.store.get(node.arrays)
        legacy = self.out / f"node_{node.id:04d}.npz"  # a search run before the store held them
        if legacy.exists():
            with np.load(legacy) as z:
                return {k: z[k] for k in z.files}
        return {}

    def _finish(self, node: Node, res: dict) -> Node:
        """Copy an evaluation (:func:`evaluation_unit`'s result) into its node; faithfulness is
        scored here, against the task."""
        node.network_guard = res.get("network_guard", "")
        node.wall_seconds = float(res.get("wall_seconds", 0.0))
        node.quick_val = res.get("quick_val")
        node.error = res.get("error", "")
        node.status = res["status"]
        if node.status != "ok":
            return node
        node.val, node.test, node.ood = res["val"], res["test"], dict(res["ood"])
        node.arrays = res["arrays"]
        if not all(is_ref(r) for r in node.arrays.values()):  # a unit stored before its arrays moved out
            node.arrays = self.store.put(_float64(node.arrays))
        arrays = self.store.get(node.arrays)
        try:
            node.faith = {
                k: (float(v) if v is not None else None)
                for k, v in faithfulness(arrays, res["metrics"], self.task).items()
            }
        except Exception as err:  # faithfulness must never kill the search
            node.faith = {"error": f"{type(err).__name__}: {err}"}
        return node

    def _evaluate(self, node: Node) -> Node:
        return self._finish(node, evaluation_unit(**self._eval_kwargs(node, self._best_quick())))

    def _redo_units_without_arrays(self, keys) -> None:
        """Forget the stored evaluations whose arrays are no longer in the store (a store
        deleted or moved): their units are redone, never finished without their arrays."""
        for key in keys:
            if self.units.done(key):
                refs = self.units.load(key).get("arrays") or {}
                if refs and all(is_ref(r) for r in refs.values()) and not self.store.has(refs):
                    self.units.discard(key)

    def _evaluate_generation(self, todo: list[Node]) -> None:
        if not todo:
            return
        if self.units is not None:
            bq = self._best_quick()
            units = {_unit_key(n, bq): self._eval_kwargs(n, bq) for n in todo}
            self._redo_units_without_arrays(units)
            if self.client is None and self.workers > 1 and len(units) > 1:
                # no Dask: a thread pool, one unit per call (each unit has its own record file)
                def one(item):
                    return map_units(
                        evaluation_unit, dict([item]), self.units, client=None, desc="candidate evaluation"
                    )

                with ThreadPoolExecutor(self.workers) as ex:
                    res = {k: v for part in ex.map(one, units.items()) for k, v in part.items()}
            else:
                res = map_units(evaluation_unit, units, self.units, client=self.client, desc="candidate evaluations")
            for node, key in zip(todo, units):
                self._finish(node, res[key])
        elif self.workers > 1 and len(todo) > 1:
            with ThreadPoolExecutor(self.workers) as ex:
                list(ex.map(self._evaluate, todo))
        else:
            for node in todo:
                self._evaluate(node)

    def _append(self, node: Node) -> None:
        d = asdict(node)
        for k in ("ood", "faith"):
            d[k] = {kk: (None if isinstance(v, float) and not math.isfinite(v) else v) for kk, v in d[k].items()}
        with open(self.journal, "a") as f:
            f.write(json.dumps(d) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def _propose(self, op: str, parent: Node | None, rng, pending: list[Node] = ()) -> tuple[str, str]:
        others = [n for n in self.nodes if n.status == "ok" and (parent is None or n.id != parent.id)]
        other = min(others, key=selection_score).view() if others else None
        kw = {}
        if getattr(self.proposer, "uses_history", False):  # views of every node, this generation's too
            kw["history"] = [n.view() for n in list(self.nodes) + list(pending)]
        try:
            return self.proposer.propose(op, parent.view() if parent else None, other, rng, **kw), ""
        except Exception as err:  # a proposer failure is a failed node, not a crashed search
            return "", f"proposer failed: {type(err).__name__}: {err}"

    # ------------------------------------------------------------------- run
    def run(self) -> list[Node]:
        """Run until a budget is spent; returns all nodes (resumed ones included)."""
        t_start = time.perf_counter()
        while len(self.nodes) < self.max_nodes and time.perf_counter() - t_start < self.max_seconds:
            batch = []
            pending_drafts = 0
            for _ in range(min(self.generation, self.max_nodes - len(self.nodes))):
                nid = len(self.nodes) + len(batch)
                rng = np.random.default_rng([self.seed, nid])
                op, parent = self._choose(rng, pending_drafts)
                pending_drafts += op == "draft"
                code, perr = self._propose(op, parent, rng, batch)
                node = Node(
                    id=nid,
                    parent=parent.id if parent else None,
                    op=op,
                    code=code,
                    hash=self._hash(code),
                    debug_depth=(parent.debug_depth + 1) if (parent and op == "debug") else 0,
                )
                if perr:
                    node.status, node.error = "failed", perr
                batch.append(node)
            todo = []
            for node in batch:
                if node.status == "failed":
                    continue
                hit = self.cache.get(node.hash) or next((m for m in todo if m.hash == node.hash), None)
                if hit is not None:
                    node.status = "duplicate"
                    node.error = f"duplicate of node {hit.id}"
                    node.val, node.test, node.ood, node.faith = hit.val, hit.test, dict(hit.ood), dict(hit.faith)
                    continue
                todo.append(node)
            self._evaluate_generation(todo)
            for node in batch:
                self.nodes.append(node)
                if node.status != "duplicate":
                    self.cache[node.hash] = node
                self._append(node)
        return self.nodes
