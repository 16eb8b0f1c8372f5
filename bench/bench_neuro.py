"""Neuro benchmarks: simulator throughput, and one tree-search generation on 1 vs 2 local Dask
workers (per-evaluation time, overhead, a SLURM estimate).

Run as ``python -m bench.bench_neuro``; writes ``bench/results/neuro.md``
(``python -m bench.bench_neuro --sim``: the simulator table only, ``bench/results/neuro_sim.md``).

Simulator: aggregated simulated seconds per wall second (trials x trial length / wall time)
of ``Simulator.run`` on forward-grating trials (free swimming, closed loop, dt = 1 ms, RK4
body), for the compiled path (numba, trials split over ``threads``) and the numpy reference
path (``engine="numpy"``: ``Simulator.step`` once per time step, the previous
implementation's code path) measured in the same run, interleaved. The generation is
``G`` candidates drafted by the offline proposer (seeded, so every run evaluates the same
programs) on the quick default task; every candidate gets the full staged evaluation (quick
then full fit, each in its own sandbox subprocess). Timed: ``TreeSearch.run()`` of a
one-generation search, after the workers have imported the search and the true impulse
response (parent-side faithfulness) is cached, so what is left is the evaluations, the Dask
and unit-store overhead and the parent's faithfulness scoring.
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
G = 4          # candidates per generation
REPEATS = 4    # generations timed per setting (different proposer seeds; the order of the
               # settings alternates between repeats so a drifting machine load biases none)


def sim_rate(batch: int, duration: float = 0.3, engine: str = "compiled", threads: int = 2) -> tuple[float, float]:
    """Aggregated simulated s per wall s, and CPU microseconds per trial-step."""
    from neuro.sim import Simulator, stack_stimuli

    sim = Simulator(seed=0, threads=threads)
    stim = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * batch, duration, sim.dt)
    t0, c0 = time.perf_counter(), time.process_time()
    sim.run(stim, record_every=5, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return batch * duration / wall, cpu / (batch * duration / sim.dt) * 1e6


def sim_table(trials=(1, 64, 256, 1024), repeats: int = 3) -> list[str]:
    """Markdown lines: compiled (2 and 1 threads) vs the numpy reference at each batch size."""
    sim_rate(2, 0.01)  # compile or load the cached machine code outside the timings
    load0 = os.getloadavg()
    rows = []
    for B in trials:
        dur_ref = 0.3 if B <= 64 else 0.05  # the reference is slow: shorter trials, same rate
        fast, fast1, cpu, ref = [], [], [], []
        for r in range(repeats):
            order = ("ref", "fast") if r % 2 == 0 else ("fast", "ref")
            for which in order:
                if which == "fast":
                    rate, c = sim_rate(B, 0.3 if B <= 64 else 0.1, "compiled", threads=2)
                    fast.append(rate)
                    cpu.append(c)
                    fast1.append(sim_rate(B, 0.3 if B <= 64 else 0.1, "compiled", threads=1)[0])
                elif r < (2 if B <= 64 else 1):
                    ref.append(sim_rate(B, dur_ref, "numpy")[0])
        f, f1, rr = statistics.median(fast), statistics.median(fast1), statistics.median(ref)
        rows.append(f"| {B} | {f:.1f} | {f1:.1f} | {statistics.median(cpu):.1f} | {rr:.2f} | {f / rr:.0f}x |")
    load1 = os.getloadavg()
    return [
        "### Simulator throughput",
        "",
        "Command: `python -m bench.bench_neuro --sim` "
        f"({os.cpu_count()} cores shared with other jobs; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end). Aggregated simulated s per wall s (trials x trial length / wall), "
        f"forward-grating trials of 0.3 s (0.1 s from 256 trials; reference 0.05 s there), dt = 1 ms, "
        f"RK4 body; median of {repeats} runs (reference: 2 runs up to 64 trials, 1 beyond), compiled and "
        "reference interleaved. CPU time per trial-step is the process CPU time of the 2-thread "
        "runs divided by trials x steps.",
        "",
        "| trials | compiled, 2 threads | compiled, 1 thread | CPU us per trial-step (compiled) | "
        "numpy reference | compiled (2 threads) / reference |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def generation(task, client, seed: int, root: Path) -> dict:
    """Wall time of one generation of ``G`` drafts and the evaluations' own times (s)."""
    from neuro.search.offline import OfflineProposer
    from neuro.search.sandbox import SandboxLimits
    from neuro.search.tree import TreeSearch

    ts = TreeSearch(task, OfflineProposer(priors=bool(seed % 2)), root / f"gen-{seed}-{id(client)}", max_nodes=G,
                    generation=G, n_drafts=G, seed=seed, workers=1, client=client, quick_threshold=1e9,
                    limits=SandboxLimits(wall_seconds=120, cpu_seconds=120))
    t0 = time.perf_counter()
    nodes = ts.run()
    wall = time.perf_counter() - t0
    return {"wall": wall, "evals": [n.wall_seconds for n in nodes], "status": [n.status for n in nodes],
            "val": [n.val for n in nodes]}


def main() -> int:
    from neuro.faithfulness import true_impulse_response
    from neuro.tasks import build_task
    from scimech.parallel import get_client

    sim_lines = sim_table()
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    task = build_task(True)
    t_build = time.perf_counter() - t0
    task.probes["impulse_true"] = true_impulse_response(task)
    runs: dict = {"serial": [], 1: [], 2: []}
    clients = {}
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        try:
            for k in (1, 2):
                clients[k] = get_client("local", n_workers=k)
                clients[k].run(lambda: __import__("neuro.search.tree"))  # worker start-up is not a generation
            for r in range(REPEATS):
                order = ["serial", 1, 2] if r % 2 == 0 else [2, 1, "serial"]
                for k in order:
                    runs[k].append(generation(task, clients.get(k), r, root))
        finally:
            for c in clients.values():
                c.close()
    load1 = os.getloadavg()
    same = all(runs[k][i]["val"] == runs["serial"][i]["val"] for k in (1, 2) for i in range(REPEATS))
    ok = sum(st == "ok" for r in runs["serial"] for st in r["status"])

    def wall(k):
        return statistics.median(r["wall"] for r in runs[k])

    t_e = statistics.mean(e for k in runs for r in runs[k] for e in r["evals"])  # one evaluation, s
    t_e1 = statistics.mean(e for r in runs[1] for e in r["evals"])
    # overhead per evaluation on 1 worker: generation wall minus the evaluations' own time
    o = statistics.mean((r["wall"] - sum(r["evals"])) / G for r in runs[1])
    o_serial = statistics.mean((r["wall"] - sum(r["evals"])) / G for r in runs["serial"])
    ratio = wall(1) / wall(2)
    lines = [
        "## neuro",
        "",
        "Command: `python -m bench.bench_neuro` "
        f"({os.cpu_count()} cores shared with other jobs; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end).",
        "",
        *sim_lines,
        f"Quick default task built (simulation + splits): {t_build:.1f} s.",
        "",
        f"### One tree-search generation ({G} candidates, quick default task: "
        f"{task.n_neurons} units, {len(task.train_series)} training trials, {len(task.val)} val windows)",
        "",
        f"Each candidate: quick + full staged evaluation, each stage its own `python -I` sandbox "
        f"subprocess. Median of {REPEATS} generations (different programs per repeat, the same "
        f"programs in every setting: {'identical' if same else 'DIFFERENT'} validation scores in every "
        f"setting; {ok}/{G * REPEATS} programs ok; settings interleaved, order alternating).",
        "",
        "| setting | generation wall (s) | speed-up vs 1 worker |",
        "|---|---|---|",
        f"| serial, no Dask (one evaluation at a time) | {wall('serial'):.2f} | {wall(1) / wall('serial'):.2f} |",
        f"| LocalCluster, 1 worker | {wall(1):.2f} | 1.00 |",
        f"| LocalCluster, 2 workers | {wall(2):.2f} | {ratio:.2f} |",
        "",
        f"- per evaluation (both sandbox stages, measured inside the unit): t_e = {t_e:.2f} s "
        f"(on 1 worker {t_e1:.2f} s);",
        f"- overhead per evaluation on 1 worker (Dask round trip, unit store write/read, parent "
        f"faithfulness scoring): o = {o:.2f} s; without Dask: {o_serial:.2f} s;",
        f"- 1 -> 2 workers: {ratio:.2f}x on 2 shared cores (ideal 2x; the sandbox processes of the two "
        "workers compete with each other and with other jobs for the same 2 cores).",
        "",
        "### Paper estimate on N SLURM nodes",
        "",
        "A generation's candidates are independent, so with `W = N c` workers (c worker processes "
        "per node) and a generation sized to the cluster (`--generation W`), a generation takes about "
        "`t_e + o` (plus the slowest candidate's excess), and a search of M nodes takes "
        "`startup + ceil(M / W) (t_e + o)`. Larger generations change the search (more nodes are "
        "proposed before seeing each other's scores), so the estimate is for the same node budget, "
        "not the same tree. t_e from the 1-worker runs (a worker per core, as on a node) and o above; "
        "c = 8; job start-up (queue wait excluded) "
        "taken as 60 s; M = 400 nodes per search:",
        "",
        "| N nodes | workers | generations | wall per search (s) |",
        "|---|---|---|---|",
    ]
    M, c, startup = 400, 8, 60.0
    for n in (1, 4, 16, 64):
        w = n * c
        gens = math.ceil(M / w)
        lines.append(f"| {n} | {w} | {gens} | {startup + gens * (t_e1 + o):.0f} |")
    lines.append(f"| (this machine, 1 worker, generation {G}) | 1 | {math.ceil(M / G)} | "
                 f"{math.ceil(M / G) * wall(1):.0f} |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "neuro.md").write_text(text)
    return 0


def main_sim() -> int:
    text = "\n".join(sim_table())
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "neuro_sim.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main_sim() if "--sim" in sys.argv[1:] else main())
