"""Neuro benchmarks: simulator throughput, and one tree-search generation on 1 vs 2 local Dask
workers (per-evaluation time, overhead, a SLURM estimate).

Run as ``python -m bench.bench_neuro``; writes ``bench/results/neuro.md``
(``python -m bench.bench_neuro --sim [--old-rev REV]``: the simulator table only,
``bench/results/neuro_sim.md``; ``python -m bench.bench_neuro --physics``: the MuJoCo body
against the chain, speed and kinematics, ``bench/results/neuro_physics.md``;
``python -m bench.bench_neuro --swim``: tail-beat frequencies
of free-swimming bouts and of clamped drives, ``bench/results/neuro_swim.md``;
``python -m bench.bench_neuro --bend``: how much of one prescribed C-bend's head swing the
MuJoCo larva keeps as heading, ``bench/results/neuro_bend.md``).

Simulator: aggregated simulated seconds per wall second (trials x trial length / wall time)
of ``Simulator.run`` on forward-grating trials (free swimming, closed loop, dt = 1 ms, RK4
body), for the compiled path (numba, trials in blocks spread over ``threads``), the numpy
reference path of the same model (``engine="numpy"``: ``Simulator.step`` once per time step)
and, with ``--old-rev``, the simulator as it was at git revision REV (run in a subprocess
from ``git archive REV neuro``), all measured in the same run, interleaved. The generation is
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

import scimech

HERE = Path(__file__).resolve().parent
G = 4  # candidates per generation
REPEATS = 4  # generations timed per setting (different proposer seeds; the order of the
# settings alternates between repeats so a drifting machine load biases none)


def _chain_reference():
    """The hand-written chain in the configuration it is validated in (linear mass taper: with
    the outline's lighter tail links its explicit 1 ms RK4 step is unstable)."""
    from neuro.sim import BodyParams

    return BodyParams(taper=0.35)


def sim_rate(
    batch: int, duration: float = 0.3, engine: str = "compiled", threads: int = 2, physics: str = "mujoco"
) -> tuple[float, float]:
    """Aggregated simulated s per wall s, and CPU microseconds per trial-step."""
    from neuro.sim import Simulator, stack_stimuli

    sim = Simulator(seed=0, threads=threads, physics=physics, body=_chain_reference() if physics == "chain" else None)
    stim = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * batch, duration, sim.dt)
    t0, c0 = time.perf_counter(), time.process_time()
    sim.run(stim, record_every=5, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return batch * duration / wall, cpu / (batch * duration / sim.dt) * 1e6


_OLD = """
import sys, time
from neuro.sim import Simulator, stack_stimuli
batch, duration = int(sys.argv[1]), float(sys.argv[2])
sim = Simulator(seed=0)
stim = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * batch, duration, sim.dt)
t0 = time.perf_counter()
sim.run(stim, record_every=5)
print(batch * duration / (time.perf_counter() - t0))
"""


def old_rate(tree: Path, batch: int, duration: float) -> float:
    """Aggregated simulated s per wall s of the simulator extracted to ``tree`` (a subprocess)."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=f"{tree}{os.pathsep}{HERE.parent}", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _OLD, str(batch), str(duration)],
        env=env,
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def sim_table(trials=(1, 64, 256, 1024), repeats: int = 3, old_rev: str | None = None) -> list[str]:
    """Markdown lines: compiled (2 and 1 threads) vs the numpy reference (and the old revision)."""
    import subprocess

    sim_rate(2, 0.01)  # compile or load the cached machine code outside the timings
    tmp = tempfile.TemporaryDirectory()
    tree = Path(tmp.name)
    if old_rev:
        archive = subprocess.run(
            ["git", "archive", old_rev, "neuro"], cwd=HERE.parent, capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    load0 = os.getloadavg()
    rows = []
    for B in trials:
        dur = 0.3 if B <= 64 else 0.1
        dur_ref = 0.3 if B <= 64 else 0.05  # the numpy paths are slow: shorter trials, same rate
        fast, fast1, cpu, ref, old = [], [], [], [], []
        for r in range(repeats):
            order = ("ref", "fast") if r % 2 == 0 else ("fast", "ref")
            for which in order:
                if which == "fast":
                    rate, c = sim_rate(B, dur, "compiled", threads=2)
                    fast.append(rate)
                    cpu.append(c)
                    fast1.append(sim_rate(B, dur, "compiled", threads=1)[0])
                elif r < (2 if B <= 64 else 1):
                    ref.append(sim_rate(B, dur_ref, "numpy")[0])
                    if old_rev:
                        old.append(old_rate(tree, B, dur_ref))
        f, f1, rr = statistics.median(fast), statistics.median(fast1), statistics.median(ref)
        row = f"| {B} | {f:.1f} | {f1:.1f} | {statistics.median(cpu):.1f} | {rr:.2f} | {f / rr:.0f}x |"
        if old_rev:
            oo = statistics.median(old)
            row += f" {oo:.2f} | {f / oo:.0f}x |"
        rows.append(row)
    load1 = os.getloadavg()
    tmp.cleanup()
    old_cols = (" old numpy simulator | compiled / old |", "---|---|") if old_rev else ("", "")
    return [
        "### Simulator throughput",
        "",
        f"Command: `python -m bench.bench_neuro --sim{' --old-rev ' + old_rev if old_rev else ''}` "
        f"({os.cpu_count()} cores shared with other jobs; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end). Aggregated simulated s per wall s (trials x trial length / wall), "
        f"forward-grating trials of 0.3 s (0.1 s from 256 trials; numpy paths 0.05 s there), dt = 1 ms, "
        f"RK4 body, spinal cord in 0.5 ms substeps with 3 V2a speed modules; median of {repeats} runs "
        "(numpy paths: 2 runs up to 64 trials, 1 beyond), compiled and numpy interleaved. CPU time per "
        "trial-step: process CPU time of the 2-thread runs / (trials x steps)."
        + (
            f" Old numpy simulator: `neuro/sim` at git revision {old_rev} (before the compiled path and "
            "the speed modules: one V2a population per segment and side, 1 ms spinal step), in a subprocess."
            if old_rev
            else ""
        ),
        "",
        "| trials | compiled, 2 threads | compiled, 1 thread | CPU us per trial-step (compiled) | "
        "numpy reference (same model) | compiled / reference |" + old_cols[0],
        "|---|---|---|---|---|---|" + old_cols[1],
        *rows,
        "",
    ]


def generation(task, client, seed: int, root: Path) -> dict:
    """Wall time of one generation of ``G`` drafts and the evaluations' own times (s)."""
    from neuro.search.offline import OfflineProposer
    from neuro.search.sandbox import SandboxLimits
    from neuro.search.tree import TreeSearch

    ts = TreeSearch(
        task,
        OfflineProposer(priors=bool(seed % 2)),
        root / f"gen-{seed}-{id(client)}",
        max_nodes=G,
        generation=G,
        n_drafts=G,
        seed=seed,
        workers=1,
        client=client,
        quick_threshold=1e9,
        limits=SandboxLimits(wall_seconds=120, cpu_seconds=120),
    )
    t0 = time.perf_counter()
    nodes = ts.run()
    wall = time.perf_counter() - t0
    return {
        "wall": wall,
        "evals": [n.wall_seconds for n in nodes],
        "status": [n.status for n in nodes],
        "val": [n.val for n in nodes],
    }


def _publish(name: str, text: str) -> int:
    """Print a table and write it to ``bench/results/<name>.md``."""
    print(text)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / f"{name}.md").write_text(text)
    return 0


def main() -> int:
    from neuro.faithfulness import true_impulse_response
    from neuro.tasks import build_task
    from scimech.run.parallel import get_client

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
        f"(scimech {scimech.__version__}; {os.cpu_count()} cores shared with other jobs; load average {load0[0]:.2f} at the start, "
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
    lines.append(
        f"| (this machine, 1 worker, generation {G}) | 1 | {math.ceil(M / G)} | {math.ceil(M / G) * wall(1):.0f} |"
    )
    lines.append("")
    text = "\n".join(lines)
    return _publish("neuro", text)


def main_sim(old_rev: str | None = None) -> int:
    text = "\n".join(sim_table(old_rev=old_rev))
    return _publish("neuro_sim", text)


def swim_table(trials: int = 16, duration: float = 4.0, seed: int = 0) -> list[str]:
    """Tail beat of the simulated larva: clamped drive (frequency per drive, mid-body joint,
    0.2-1.0 s) and free-swimming bouts per visual condition (frequency per bout from
    :func:`neuro.sim.analysis.bout_tail_beats`, forward speed during bouts, bouts per s)."""
    import numpy as np

    from neuro.sim import Perturbation, Simulator, stack_stimuli
    from neuro.sim.analysis import bout_tail_beats

    sim = Simulator(seed=seed)
    drives = np.round(np.arange(0.1, 1.01, 0.1), 2)
    out = sim.run(
        stack_stimuli([dict(condition="dark")] * len(drives), 1.2, sim.dt), Perturbation(drive=drives), record_every=1
    )
    bend = out["muscle"][:, 200:, 0, 5] - out["muscle"][:, 200:, 1, 5]
    f = bout_tail_beats(np.ones_like(bend), bend, sim.dt, skip=0.0)  # clamped: one bout per trial
    lines = [
        f"Simulated larva, `python -m bench.bench_neuro --swim` (scimech {scimech.__version__}, seed {seed}).",
        "",
        "Clamped drive, darkness, 1 s after a 0.2 s onset (zero crossings of the mid-body muscle "
        "activation, resolution 1 Hz):",
        "",
        "| drive | " + " | ".join(f"{d:.1f}" for d in drives) + " |",
        "|---" * (len(drives) + 1) + "|",
        "| tail beat (Hz) | " + " | ".join(f"{x:.0f}" for x in f) + " |",
        "",
        f"Free swimming, {trials} trials x {duration:g} s per condition (closed loop), bouts >= 100 ms:",
        "",
        "| condition | bouts per s | tail beat median (Hz) | 10-90 % (Hz) | speed in bouts (mm/s) |",
        "|---|---|---|---|---|",
    ]
    for name, cond in (
        ("darkness", dict(condition="dark")),
        ("forward grating 10 mm/s", dict(condition="grating_fwd", speed=10.0)),
        ("forward grating 30 mm/s", dict(condition="grating_fwd", speed=30.0)),
    ):
        o = sim.run(stack_stimuli([dict(cond, seed=k) for k in range(trials)], duration, sim.dt), record_every=1)
        d = o["drive"].mean(-1)
        fb = bout_tail_beats(d, o["muscle"][:, :, 0, 5] - o["muscle"][:, :, 1, 5], sim.dt)
        v = np.hypot(*np.gradient(o["q"][..., :2], sim.dt, axis=1).transpose(2, 0, 1))
        speed = float(v[d > 0.3].mean())
        n_bouts = int(((d[:, 1:] > 0.3) & (d[:, :-1] <= 0.3)).sum())
        lo, med, hi = np.percentile(fb, [10, 50, 90])
        lines.append(f"| {name} | {n_bouts / (trials * duration):.2f} | {med:.0f} | {lo:.0f}-{hi:.0f} | {speed:.1f} |")
    return lines + [""] + drive_seed_table() + [""] + turning_table()


def _spectral_peak(x, dt: float, pad: int = 16) -> float:
    """Frequency (Hz, >= 3) of the largest peak of the Hann-windowed, zero-padded spectrum."""
    import numpy as np

    x = (x - x.mean()) * np.hanning(len(x))
    f = np.fft.rfftfreq(len(x) * pad, dt)
    P = np.abs(np.fft.rfft(x, len(x) * pad)) ** 2
    return float(f[f >= 3][np.argmax(P[f >= 3])])


def drive_seed_table(seeds=range(8)) -> list[str]:
    """Tail beat per clamped drive over seeds: the tail angle's spectral peak (0.2-1.2 s)."""
    import numpy as np

    from neuro.sim import Perturbation, Simulator, stack_stimuli

    drives = np.round(np.arange(0.1, 1.01, 0.1), 2)
    f = np.array(
        [
            [
                _spectral_peak(ta[200:], 1e-3)
                for ta in Simulator(seed=s).run(
                    stack_stimuli([dict(condition="dark")] * len(drives), 1.2, 1e-3),
                    Perturbation(drive=drives),
                    record_every=1,
                )["tail_angle"]
            ]
            for s in seeds
        ]
    )
    return [
        f"Clamped drive, darkness, seeds {seeds[0]}-{seeds[-1]}: the tail angle's spectral peak over 0.2-1.2 s "
        "(Hann window, 16x zero padding), min-max over seeds:",
        "",
        "| drive | " + " | ".join(f"{d:.1f}" for d in drives) + " |",
        "|---" * (len(drives) + 1) + "|",
        "| tail beat (Hz) | " + " | ".join(f"{lo:.0f}-{hi:.0f}" for lo, hi in zip(f.min(0), f.max(0))) + " |",
    ]


def _turning_bouts(sim, seed: int, duration: float = 3.0):
    """Simulate left/right gratings and the turning stimulus (2 trials each) and find the turning
    bouts: a bout of >= 100 ms whose left-right drive differs by > 0.2 at its start, with the
    stimulus on. Returns the run's output, the trials' specs and ``(trial, start, end, want)``
    per bout (``want`` +1: the stimulus asks for a left turn)."""
    import numpy as np

    from neuro.sim import stack_stimuli

    conds = ("grating_left", "grating_right", "turning")
    specs = [dict(condition=c, seed=seed + k, onset=0.0, on=1.2, off=0.3) for k, c in enumerate(conds * 2)]
    stim = stack_stimuli(specs, duration, sim.dt)
    o = sim.run(stim, record_every=1, trials=np.arange(len(specs)))
    want = np.sign(stim.gy + stim.rot)
    bouts = []
    for b in range(len(specs)):
        on = o["drive"][b].sum(-1) > 0.1
        for s in np.flatnonzero(on[1:] & ~on[:-1]) + 1:
            e = s + int(np.argmax(~on[s:])) if (~on[s:]).any() else len(on)
            asym = np.abs(o["drive"][b, s : s + 20, 0] - o["drive"][b, s : s + 20, 1]).max()
            if e - s < 100 or asym < 0.2 or want[b, s] == 0:
                continue
            bouts.append((b, int(s), int(e), float(want[b, s])))
    return o, specs, bouts


def turning_table(seeds=(0, 1, 2, 3), duration: float = 3.0) -> list[str]:
    """Turning bouts (left-right drive differing by > 0.2 at the start) under left/right gratings
    and the turning stimulus: the first bend's direction (tail tip's side in the head frame)
    against the stimulus, the tail angle's spectral peak after the first 60 ms, and the mean
    tail angle after it (a held bend)."""
    import numpy as np

    from neuro.sim import Simulator

    conds = ("grating_left", "grating_right", "turning")
    rows = {c: [] for c in conds}
    for seed in seeds:
        sim = Simulator(seed=seed)
        o, specs, bouts = _turning_bouts(sim, seed, duration)
        th = o["q"][..., 2:]
        dx, dy = -(np.cos(th) * sim.body.l).sum(-1), -(np.sin(th) * sim.body.l).sum(-1)  # tail tip - head tip
        lat = -dx * np.sin(th[..., 0]) + dy * np.cos(th[..., 0])  # + = the fish's left
        for b, s, e, want in bouts:
            ta = o["tail_angle"][b, s:e]
            k = int(np.argmax(np.abs(lat[b, s : s + 40])))
            rows[specs[b]["condition"]].append(
                (
                    np.sign(lat[b, s + k]) == want,
                    _spectral_peak(ta[60:], sim.dt),
                    abs(ta[:40]).max(),
                    abs(ta[60:].mean()),
                )
            )
    lines = [
        f"Turning bouts, seeds {seeds[0]}-{seeds[-1]}, 2 trials x {duration:g} s per condition (closed loop): "
        "first bend toward the stimulus, tail beat = the tail angle's spectral peak after the first 60 ms:",
        "",
        "| condition | bouts | first bend toward the stimulus | tail beat min / median / max (Hz) "
        "| at 15-100 Hz | first bend (rad) | mean tail angle after it (rad) |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in conds:
        r = np.array(rows[c], float)
        inside = int(((r[:, 1] >= 15) & (r[:, 1] <= 100)).sum())
        lines.append(
            f"| {c} | {len(r)} | {int(r[:, 0].sum())} of {len(r)} | {r[:, 1].min():.1f} / "
            f"{np.median(r[:, 1]):.1f} / {r[:, 1].max():.1f} | {inside} of {len(r)} | {np.median(r[:, 2]):.2f} "
            f"| {np.median(r[:, 3]):.2f} |"
        )
    return lines


def physics_table(trials=(64, 1024), repeats: int = 3) -> list[str]:
    """Markdown lines: the MuJoCo body against the hand-written chain, same circuit, same run."""
    for ph in ("chain", "mujoco"):
        sim_rate(2, 0.01, physics=ph)  # compile or load the cached machine code outside the timings
    load0 = os.getloadavg()
    rows = []
    for B in trials:
        dur = 0.3 if B <= 64 else 0.1
        rates = {"chain": [], "mujoco": []}
        cpu = {"chain": [], "mujoco": []}
        for r in range(repeats):
            for ph in ("chain", "mujoco") if r % 2 == 0 else ("mujoco", "chain"):
                rate, c = sim_rate(B, dur, threads=2, physics=ph)
                rates[ph].append(rate)
                cpu[ph].append(c)
        ch, mj = statistics.median(rates["chain"]), statistics.median(rates["mujoco"])
        rows.append(
            f"| {B} | {ch:.1f} | {mj:.1f} | {mj / ch:.2f} | {statistics.median(cpu['chain']):.1f} | "
            f"{statistics.median(cpu['mujoco']):.1f} |"
        )
    load1 = os.getloadavg()
    import mujoco

    return [
        "### The body on MuJoCo against the hand-written chain",
        "",
        f"Command: `python -m bench.bench_neuro --physics` (MuJoCo {mujoco.__version__}, mujoco-core wheel; "
        f"{os.cpu_count()} cores shared with other jobs; load average {load0[0]:.2f} at the start, "
        f"{load1[0]:.2f} at the end). Compiled circuit on 2 threads in both; `physics='chain'`: the RK4 chain "
        "inside the numba kernel, with the linear mass taper it is validated in; `physics='mujoco'`: the "
        "circuit's kernel and a `mujoco.batch.Batch` in turn every millisecond (two 0.5 ms Euler steps per 1 ms), "
        "each of the 2 threads running its own group of trials with its own batch. Forward-grating trials of 0.3 s (0.1 s at "
        f"1024 trials); median of {repeats} runs, the two interleaved.",
        "",
        "| trials | chain: sim s per wall s | MuJoCo: sim s per wall s | MuJoCo / chain | chain: CPU us per "
        "trial-step | MuJoCo: CPU us per trial-step |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]


def kinematics_figures(out_dir: Path, seeds=(101, 102)) -> list[Path]:
    """Two figures of the MuJoCo larva: the tail angle at clamped drives, and the head's path
    through turning bouts (toward the stimulus = up)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from neuro.sim import Perturbation, Simulator, stack_stimuli

    out_dir.mkdir(parents=True, exist_ok=True)
    drives = np.array([0.35, 0.55, 0.75, 0.9])
    sim = Simulator(seed=0)
    out = sim.run(
        stack_stimuli([dict(condition="dark")] * len(drives), 0.6, sim.dt), Perturbation(drive=drives), record_every=1
    )
    t = np.arange(out["tail_angle"].shape[1]) * sim.dt * 1e3
    fig, axes = plt.subplots(len(drives), 1, figsize=(7, 6), sharex=True)
    for ax, b in zip(axes, range(len(drives))):
        ax.plot(t, out["tail_angle"][b], lw=0.8, color="k")
        ax.set_ylabel(f"drive {drives[b]:.2f}\n(rad)", fontsize=8)
        ax.axhline(0, color="0.7", lw=0.5)
    axes[-1].set_xlabel("time (ms)")
    axes[0].set_title("Tail angle of the MuJoCo larva at clamped drives (head link minus tail link)")
    fig.tight_layout()
    tail = out_dir / "neuro_body_tail_angle.png"
    fig.savefig(tail, dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(6, 6))
    for seed in seeds:
        o, _, bouts = _turning_bouts(Simulator(seed=seed), seed)
        for b, s0, e, want in bouts:
            e2 = min(e + 50, o["q"].shape[1] - 1)
            xy = o["q"][b, s0:e2, :2] - o["q"][b, s0, :2]
            h0 = o["heading"][b, s0]
            rot = np.array([[np.cos(-h0), -np.sin(-h0)], [np.sin(-h0), np.cos(-h0)]])
            xy = xy @ rot.T
            xy[:, 1] *= want  # toward the stimulus = up
            ax.plot(xy[:, 0], xy[:, 1], lw=0.8, alpha=0.7)
    ax.axhline(0, color="0.7", lw=0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("mm along the heading at the bout's start")
    ax.set_ylabel("mm toward the stimulus")
    ax.set_title("Head paths of turning bouts (MuJoCo larva)")
    fig.tight_layout()
    paths = out_dir / "neuro_turning_bouts.png"
    fig.savefig(paths, dpi=120)
    plt.close(fig)
    return [tail, paths]


def kinematics_table(seeds=(101, 102)) -> list[str]:
    """Markdown lines: the larva's kinematics on each body (clamped drives, then turning bouts)."""
    import numpy as np

    from neuro.sim import Perturbation, Simulator, stack_stimuli
    from neuro.sim.analysis import phase_difference, tail_beat_frequency

    drives = np.array([0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 1.0])

    def zero_crossings(x, dt):
        x = x - x.mean()
        up = np.flatnonzero((x[:-1] < 0) & (x[1:] >= 0))
        return (len(up) - 1) / ((up[-1] - up[0]) * dt) if len(up) > 2 else float("nan")

    lines = [
        "### Kinematics of the larva on each body",
        "",
        "Command: `python -m bench.bench_neuro --kinematics`. Clamped drive (0.8 s, first 0.3 s left out): "
        "tail-beat frequency from the tail angle's spectrum and from its upward zero crossings, body wave "
        "(phase lags of the joint angles summed head to tail, cycles), forward speed (mean centre-of-mass "
        "speed along the head's heading) and distance per tail beat. Turning bouts: seeds "
        f"{', '.join(map(str, seeds))}, gratings and rotating stimuli (1.2 s on), heading change from the bout's "
        "start to 50 ms after its end, signed toward the stimulus.",
        "",
    ]
    for physics in ("chain", "mujoco"):
        body = _chain_reference() if physics == "chain" else None
        sim = Simulator(seed=0, physics=physics, body=body)
        out = sim.run(
            stack_stimuli([dict(condition="dark")] * len(drives), 0.8, sim.dt),
            Perturbation(drive=drives),
            record_every=1,
        )
        ta = out["tail_angle"][:, 300:]
        phi = np.diff(out["q"][:, 300:, 2:], axis=-1)
        lines += [
            f"`physics='{physics}'`" + (" (`BodyParams(taper=0.35)`)" if physics == "chain" else ""),
            "",
            "| drive | tail beat, spectrum (Hz) | tail beat, zero crossings (Hz) | body wave (cycles) | "
            "speed (mm/s) | mm per beat |",
            "|---|---|---|---|---|---|",
        ]
        for b, d in enumerate(drives):
            f1 = tail_beat_frequency(ta[b], sim.dt)
            f2 = zero_crossings(ta[b], sim.dt)
            wave = sum(phase_difference(phi[b, :, j], phi[b, :, j + 1], sim.dt) for j in range(phi.shape[-1] - 1))
            v = float(out["speed"][b, 300:].mean())
            lines.append(f"| {d:.2f} | {f1:.1f} | {f2:.1f} | {wave:.2f} | {v:.1f} | {v / f1:.2f} |")
        turns = []
        for seed in seeds:
            o, _, bouts = _turning_bouts(Simulator(seed=seed, physics=physics, body=body), seed)
            for b, s0, e, want in bouts:
                e2 = min(e + 50, o["heading"].shape[1] - 1)
                turns.append((o["heading"][b, e2] - o["heading"][b, s0]) * want)
        t = np.array(turns)
        lines += [
            "",
            f"Turning bouts: {len(t)}; heading change toward the stimulus: median {np.median(t):.3f} rad "
            f"(5-95 %: {np.percentile(t, 5):.3f} to {np.percentile(t, 95):.3f}); toward it in "
            f"{100 * np.mean(t > 0):.0f} % of bouts; 0.3-0.8 rad in {100 * np.mean((t > 0.3) & (t < 0.8)):.0f} %.",
            "",
        ]
    return lines


def main_physics() -> int:
    figs = kinematics_figures(HERE.parent / "docs" / "figures")
    text = "\n".join(
        physics_table() + kinematics_table() + ["Figures: " + ", ".join(f"`docs/figures/{f.name}`" for f in figs) + "."]
    )
    return _publish("neuro_physics", text)


def prescribed_bend(
    C: float = 0.1,
    rise: float = 0.01,
    fall: float = 0.04,
    unbend_travel: float = 0.0,
    head_mass: float = 1.0,
    duration: float = 0.15,
    h: float = 2e-5,
) -> tuple[float, float]:
    """The MuJoCo larva's head swing and final heading after one prescribed C-bend: every joint
    bends to ``C`` rad (a ~1 rad C at 0.1) over ``rise`` s and back over ``fall`` s (the
    unbending starting ``unbend_travel`` s later per body length toward the tail), the joints
    held to that path by stiff servo torques, the water as in the simulator (MuJoCo's inertia
    model and the viscous drag). Returns ``(largest head yaw, head yaw at the end)``, rad, signed
    so that the largest swing is positive (a kept heading > 0 turns the fish the way its head swung)."""
    import mujoco
    import numpy as np

    from neuro.sim import compiled
    from neuro.sim.body import BodyParams
    from neuro.sim.mjbody import larva_mjcf, to_chain, water_of

    p = BodyParams()
    m = mujoco.MjModel.from_xml_string(larva_mjcf(p, timestep=h))
    m.jnt_stiffness[:] = 0
    m.dof_damping[:] = 0
    m.body_mass[1] *= head_mass
    m.body_inertia[1] *= head_mass
    d = mujoco.MjData(m)
    N, water = p.n_links, water_of(p)
    s = np.arange(1, N) / N
    lengths = np.full(N, p.length / N)
    extra = np.zeros((1, N + 2))
    peak = 0.0
    for i in range(int(duration / h)):
        t = i * h
        tf = t - rise - unbend_travel * s  # time into the unbending, per joint
        g = np.where(
            t < rise,
            np.sin(np.pi / 2 * t / rise),
            np.where(tf < 0, 1.0, np.where(tf < fall, np.cos(np.pi / 2 * tf / fall), 0.0)),
        )
        d.qfrc_applied[:] = 0.0
        d.qfrc_applied[3:] = 5000.0 * (C * g - d.qpos[3:]) - 1.5 * d.qvel[3:]  # servo, nN mm per rad
        q, qd = to_chain(d.qpos[None], d.qvel[None])
        compiled.viscous_qfrc(q, qd, lengths, water.normal_linear, water.tangential_linear, np.ones(1), extra)
        d.qfrc_applied[:] += extra[0]
        mujoco.mj_step(m, d)
        peak = float(d.qpos[2]) if abs(d.qpos[2]) > abs(peak) else peak
    return abs(peak), float(d.qpos[2]) * np.sign(peak)


def prescribed_bend_table() -> list[str]:
    """Markdown lines: how much of a C-bend's head swing the MuJoCo larva keeps as heading."""
    cases = [
        ("bend 10 ms, unbend 40 ms", {}),
        ("bend 5 ms, unbend 80 ms", dict(rise=0.005, fall=0.08)),
        ("bend 5 ms, unbend 80 ms, head link 3x heavier", dict(rise=0.005, fall=0.08, head_mass=3.0)),
        (
            "bend 10 ms, unbend 20 ms travelling head to tail (60 ms per body length)",
            dict(fall=0.02, unbend_travel=0.06),
        ),
        ("half the bend (0.5 rad), 10 ms / 40 ms", dict(C=0.05)),
        ("1.5 rad C, 10 ms / 40 ms", dict(C=0.15)),
        ("2 rad C, 10 ms / 40 ms", dict(C=0.2)),
        ("2 rad C, 5 ms / 80 ms", dict(C=0.2, rise=0.005, fall=0.08)),
        ("2.5 rad C (the muscles' largest static bend), 5 ms / 80 ms", dict(C=0.25, rise=0.005, fall=0.08)),
    ]
    lines = [
        "### One prescribed C-bend on the MuJoCo larva",
        "",
        "Command: `python -m bench.bench_neuro --bend`. Every joint driven along the same path (0.1 rad "
        "each, a ~1 rad C, by stiff servo torques), then straightened; water as in the simulator. How much "
        "of the head's swing stays as heading once the body is straight (> 0: the way the head swung):",
        "",
        "| bend | largest head yaw (rad) | heading kept (rad) | kept |",
        "|---|---|---|---|",
    ]
    for name, kw in cases:
        peak, end = prescribed_bend(**kw)
        lines.append(f"| {name} | {peak:.3f} | {end:.3f} | {100 * end / peak:.0f} % |")
    return lines


def main_bend() -> int:
    text = "\n".join(prescribed_bend_table()) + "\n"
    return _publish("neuro_bend", text)


def main_swim() -> int:
    text = "\n".join(swim_table()) + "\n"
    return _publish("neuro_swim", text)


if __name__ == "__main__":
    args = sys.argv[1:]
    rev = args[args.index("--old-rev") + 1] if "--old-rev" in args else None
    if "--physics" in args or "--kinematics" in args:
        sys.exit(main_physics())
    if "--bend" in args:
        sys.exit(main_bend())
    sys.exit(main_swim() if "--swim" in args else main_sim(rev) if "--sim" in args else main())
