"""The compiled simulator against the numpy reference, and its process noise against N(0, 1).

The reference is ``Simulator.step`` (numpy, one call per time step); the compiled path
(``engine="compiled"``, numba) must produce the same trajectories. Tolerances: both paths do
the same float64 arithmetic in a different order (sparse sums over populations or speed
modules; on the chain body a reduced Cholesky solve instead of LAPACK on the full mass matrix;
on the MuJoCo body the reference converts to and from MuJoCo's coordinates every step), so
they differ by round-off, measured ~1e-15 in positions and ~1e-12 in velocities after 300
steps; 1e-9 leaves room for other CPUs.
"""

import numpy as np
import pytest
from scipy import stats

from neuro.sim import BodyParams, Perturbation, Simulator, compiled, stack_stimuli
from neuro.sim.noise import normals

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="numba is not installed")

CONDS = ["grating_fwd", "flash", "grating_left", "turning"]


def _both(pert=None, duration=0.3, record_every=3, threads=2, physics="mujoco"):
    stim = stack_stimuli([dict(condition=c, onset=0.0, speed=15.0) for c in CONDS], duration, 1e-3)
    # the chain reference in the configuration it was validated in (linear mass taper): with the
    # lighter tail links of the outline's volumes its explicit RK4 at 1 ms amplifies round-off
    # to ~2e-8 in positions after 300 steps (measured), the MuJoCo body's semi-implicit step not
    body = BodyParams(taper=0.35) if physics == "chain" else None
    # seed 3: the flash and the left grating start bouts within the 0.3 s (trials keyed by their index)
    ref = Simulator(seed=3, physics=physics, body=body).run(stim, pert, record_every=record_every, engine="numpy")
    fast = Simulator(seed=3, threads=threads, physics=physics, body=body).run(
        stim, pert, record_every=record_every, engine="compiled"
    )
    return ref, fast


def _assert_same(ref, fast):
    for k in ("rates", "muscle", "q", "tail_angle", "speed", "flow", "drive"):
        np.testing.assert_allclose(fast[k], ref[k], rtol=0, atol=1e-9, err_msg=k)
    np.testing.assert_allclose(fast["qd"], ref["qd"], rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(fast["bout_start"], ref["bout_start"])


@pytest.mark.parametrize("physics", ["mujoco", "chain"])
def test_compiled_equals_reference_free_swimming(physics):
    # the MuJoCo body (default) and the hand-written chain kept as its reference
    ref, fast = _both(physics=physics)
    _assert_same(ref, fast)
    assert ref["bout_start"].any() and np.abs(ref["tail_angle"]).max() > 0.1  # the fish swam
    a, b = ref["state"], fast["state"]
    for k in (
        "brain",
        "r_hist",
        "a",
        "r_internal_hist",
        "muscle",
        "q",
        "bout_acc",
        "bout_left",
        "refractory",
        "bout_turn",
    ):
        np.testing.assert_allclose(getattr(b, k), getattr(a, k), rtol=0, atol=1e-9, err_msg=k)
    assert (a.ptr, a.n_step) == (b.ptr, b.n_step) == (a.ptr, 300)


def test_compiled_equals_reference_under_perturbations():
    sim = Simulator()
    lesion = np.stack(
        [
            np.ones(sim.circuit.n_spinal),
            sim.circuit.lesion_mask(("V1",)),
            sim.circuit.lesion_mask(("V0d",), sides=("L",)),
            np.ones(sim.circuit.n_spinal),
        ]
    )
    modules = np.stack(
        [
            np.ones(sim.circuit.n_internal),
            sim.circuit.module_lesion_mask(("slow",)),
            np.ones(sim.circuit.n_internal),
            sim.circuit.module_lesion_mask(("fast",), sides=("R",)),
        ]
    )
    pert = Perturbation(
        lesion=lesion,
        commissural=np.array([1.0, 0.5, 1.0, 0.0]),
        drag_scale=np.array([1.0, 2.0, 0.5, 1.0]),
        muscle_scale=np.array([1.0, 1.0, 0.7, 1.3]),
        drive=np.array([0.4, 0.7, 0.8, 0.95]),
        module_lesion=modules,
    )
    ref, fast = _both(pert, duration=0.2, record_every=1, threads=1)
    _assert_same(ref, fast)


def test_continuing_from_a_state_equals_one_run():
    # the transition function is Markov in SimState (noise included): two halves = one run
    stim = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * 3, 0.2, 1e-3)
    half = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * 3, 0.1, 1e-3)
    whole = Simulator(seed=2).run(stim, record_every=10)
    sim = Simulator(seed=2)
    first = sim.run(half, record_every=10)
    rest = stack_stimuli([dict(condition="grating_fwd", onset=0.0)] * 3, 0.2, 1e-3)
    for k in ("gx", "gy", "rot", "lum", "gain", "closed"):
        setattr(rest, k, getattr(rest, k)[:, 100:])
    second = sim.run(rest, record_every=10, state=first["state"])
    np.testing.assert_allclose(np.concatenate([first["rates"], second["rates"]], 1), whole["rates"], atol=1e-9)


def test_process_noise_is_standard_normal_and_the_same_in_both_paths():
    keys = np.arange(1, 401, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = normals(keys, 10, 25, 243)  # 2.4 M draws
    # mean and sd: standard errors 1/sqrt(n) ~ 6.4e-4 and ~4.5e-4; 5 of them is the bound
    assert abs(z.mean()) < 3.5e-3 and abs(z.std() - 1.0) < 2.5e-3
    assert stats.kstest(z.ravel()[::7], "norm").pvalue > 1e-3
    lag = np.corrcoef(z[:-1].ravel(), z[1:].ravel())[0, 1]  # successive steps independent
    pair = np.corrcoef(z[..., 0:242:2].ravel(), z[..., 1:243:2].ravel())[0, 1]  # the two of a pair
    assert abs(lag) < 5e-3 and abs(pair) < 5e-3, (lag, pair)
    buf = np.empty(244)
    compiled._normals(keys[7], 13, 122, buf)  # 122 pairs = 243 columns
    np.testing.assert_allclose(buf[:243], z[3, 7], rtol=0, atol=1e-14)  # libm vs numpy log: 1 ulp


def test_thread_count_and_batch_blocks_do_not_change_results():
    # trials run in blocks of <= 32 spread over threads; a trial's arithmetic is the same in any
    # block, so 70 trials on 1 or 3 threads give bit-identical recordings
    stim = stack_stimuli([dict(condition=c, onset=0.0) for c in CONDS] * 17 + [dict(condition="dark")] * 2, 0.05, 1e-3)
    one = Simulator(seed=6, threads=1).run(stim, record_every=5)
    three = Simulator(seed=6, threads=3).run(stim, record_every=5)
    for k in ("rates", "q", "muscle", "bout_start"):
        np.testing.assert_array_equal(one[k], three[k], err_msg=k)


def test_bad_simulator_input_names_the_problem():
    from neuro.sim import CircuitParams
    from scimech.errors import ConfigError

    sim = Simulator()
    stim = stack_stimuli([dict(condition="dark")] * 2, 0.01, 1e-3)
    with pytest.raises(ConfigError, match="one entry per module"):
        Simulator(CircuitParams(module_tau_r=(0.003, 0.001)))
    with pytest.raises(ConfigError, match="shorter than the spinal step"):
        Simulator(CircuitParams(spinal_substeps=1))  # the fast module's 0.56 ms at drive 1 needs 0.5 ms steps
    with pytest.raises(ConfigError, match="lower module_speedup"):
        Simulator(CircuitParams(module_speedup=(6.5, 6.4, 10.0)))  # fast module at drive 1: 0.9 / 3 ms
    with pytest.raises(ConfigError, match="non-negative"):
        Simulator(CircuitParams(module_speedup=(-1.0, 0.0, 0.0)))
    with pytest.raises(ConfigError, match="0/1 mask"):
        sim.run(stim, Perturbation(lesion=np.full(sim.circuit.n_spinal, 0.5)))
    with pytest.raises(ConfigError, match="module_lesion has shape"):
        sim.run(stim, Perturbation(module_lesion=np.ones(sim.circuit.n_spinal)))
    with pytest.raises(ConfigError, match="Unknown V2a module"):
        sim.circuit.module_lesion_mask(("medium",))
    with pytest.raises(ConfigError, match="engine"):
        sim.run(stim, engine="torch")
    with pytest.raises(ConfigError, match="threads"):
        Simulator(threads=0)


# Each case below once returned a number or crashed inside numpy, numba or the C heap (a state of
# 2 trials given to a run of 3 read past its arrays; one of 3 trials given to a run of 2 aborted
# the interpreter). Each must now be a ConfigError that names what to give instead.


def _stim(n=2, duration=0.02, dt=1e-3):
    return stack_stimuli([dict(condition="grating_fwd")] * n, duration, dt)


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
@pytest.mark.parametrize(
    "case, match",
    [
        (lambda sim: sim.run(_stim(2), Perturbation(drive=0.5), state=sim.initial_state(3)), "state holds 3"),
        (lambda sim: sim.run(_stim(3), Perturbation(drive=0.5), state=sim.initial_state(2)), "state holds 2"),
        (lambda sim: sim.run(_stim(2), Perturbation(drive=np.array([np.nan, 0.5]))), "drive has NaN"),
        (lambda sim: sim.run(_stim(2), Perturbation(drive=np.array([np.inf, 0.5]))), "drive has NaN or infinite"),
        (lambda sim: sim.run(_stim(2), Perturbation(commissural=np.array([np.nan, 1.0]))), "commissural has NaN"),
        (lambda sim: sim.run(_stim(2), Perturbation(drive=5.0)), r"drive=5 exceeds .*drive_max"),
        (lambda sim: sim.run(_stim(2), Perturbation(drive=-1.0)), "drive has negative"),
        (lambda sim: sim.run(_stim(2), Perturbation(commissural=-1.0)), "commissural has negative"),
        (lambda sim: sim.run(_stim(2), Perturbation(muscle_scale=-1.0)), "muscle_scale has negative"),
        (lambda sim: sim.run(_stim(4), Perturbation(drive=np.full((2, 2), 0.5))), r"drive has shape \(2, 2\)"),
        (lambda sim: sim.run(_stim(2, dt=5e-4)), "built at dt=0.0005"),
        (lambda sim: sim.run(_stim(2), record_every=0), "record_every=0"),
        (lambda sim: sim.run(_stim(2), record_every=2.5), "record_every=2.5"),
        (lambda sim: sim.run(_stim(2), record_every=50), "longer than the stimulus"),
        (lambda sim: sim.run(_stim(2), trials=[0, 0]), "repeats an index"),
        (lambda sim: sim.run(_stim(2), trials=[-1, 0]), "non-negative integer"),
        (lambda sim: sim.run(_stim(2), trials=[0.7, 1.2]), "non-negative integer"),
        (lambda sim: sim.run(_stim(2), heading=np.array([0.0, np.nan])), "finite angle"),
    ],
)
def test_a_run_refuses_what_it_cannot_simulate(engine, case, match):
    from scimech.errors import ConfigError

    sim = Simulator(seed=0)
    with pytest.raises(ConfigError, match=match):
        case(_EngineSim(sim, engine))


class _EngineSim:
    """The simulator with its run() on one engine (the checks must hold on both)."""

    def __init__(self, sim, engine):
        self.sim, self.engine = sim, engine

    def run(self, *a, **k):
        return self.sim.run(*a, engine=self.engine, **k)

    def __getattr__(self, name):
        return getattr(self.sim, name)


def test_a_stimulus_that_is_not_one_shape_or_not_finite_is_refused():
    from neuro.sim import Stimulus, make_stimulus
    from scimech.errors import ConfigError

    sim = Simulator(seed=0)
    z = np.zeros((2, 100))
    parts = dict(gx=z, gy=np.zeros((2, 50)), rot=z, lum=z + 1, gain=z + 1, closed=z + 1)
    with pytest.raises(ConfigError, match="share one"):  # the kernel read past gy's end
        sim.run(Stimulus(condition=["a", "b"], **parts))
    parts["gy"] = z
    with pytest.raises(ConfigError, match="3 condition names"):
        sim.run(Stimulus(condition=["a", "b", "c"], **parts))
    s = _stim(2)
    s.gx[0, 5:] = np.nan
    with pytest.raises(ConfigError, match=r"gx has NaN .* trial\(s\) \[0\]"):
        sim.run(s)
    with pytest.raises(ConfigError, match="takes a Stimulus"):
        sim.run(make_stimulus("grating_fwd", 0.02, 1e-3))
    with pytest.raises(ConfigError, match="speed=nan"):
        make_stimulus("grating_fwd", 0.1, 1e-3, speed=np.nan)
    for kw, m in [
        (dict(duration=-1.0), "duration"),
        (dict(dt=0.0), "dt=0.0"),
        (dict(on=0.0), "on=0.0"),
        (dict(duration=1e-4), "shorter than one step"),
    ]:
        with pytest.raises(ConfigError, match=m):
            make_stimulus("gain_change", **{"duration": 0.1, "dt": 1e-3, **kw})
    with pytest.raises(ConfigError, match="non-empty list"):
        stack_stimuli([], 0.1, 1e-3)
    with pytest.raises(ConfigError, match="trial 1's spec .*spede"):
        stack_stimuli([dict(condition="dark"), dict(condition="dark", spede=3.0)], 0.1, 1e-3)
    with pytest.raises(ConfigError, match="seed=-1"):
        Simulator(seed=-1)


def test_step_checks_what_run_checks():
    from scimech.errors import ConfigError

    sim = Simulator(seed=0)
    st = sim.initial_state(2)
    stim = {k: np.zeros(2) for k in ("gx", "gy", "rot", "lum", "gain")}
    with pytest.raises(ConfigError, match=r"lacks \['closed'\]"):
        sim.step(st, stim)
    stim["closed"] = np.ones(2)
    with pytest.raises(ConfigError, match="0/1 mask"):
        sim.step(st, stim, Perturbation(lesion=np.full(sim.circuit.n_spinal, 0.5), drive=0.5))
    with pytest.raises(ConfigError, match=r"stimulus\['gx'\] has shape \(3,\)"):
        sim.step(st, {**stim, "gx": np.zeros(3)})
    sim.step(st, stim)  # and the well-formed step runs


def test_a_run_simulates_every_step_and_records_complete_intervals():
    # 100 steps recorded every 7: 14 samples, and the state is at the stimulus's end (t = 0.1 s),
    # so a continuation starts where the stimulus stopped (it used to stop at 98 steps)
    sim = Simulator(seed=0)
    out = sim.run(_stim(2, 0.1), record_every=7)
    assert out["q"].shape[1] == 14
    assert out["state"].n_step == 100 and out["state"].t == pytest.approx(0.1)
    ref = Simulator(seed=0).run(_stim(2, 0.1), record_every=1)
    np.testing.assert_allclose(out["q"][:, -1], ref["q"][:, 97], rtol=0, atol=1e-12)  # sample 14 = step 98
    np.testing.assert_allclose(out["state"].q, ref["q"][:, -1], rtol=0, atol=1e-12)


def test_simulate_refuses_rates_it_cannot_record():
    from neuro.sim.recording import simulate
    from scimech.errors import ConfigError

    for kw, m in [
        (dict(record_rate=0.0), "record_rate=0.0"),
        (dict(record_rate=-100.0), "record_rate=-100.0"),
        (dict(record_rate=2000.0), "at most"),
        (dict(imaging_rate=float("nan")), "imaging_rate=nan"),
        (dict(imaging_rate=300.0), "faster than record_rate"),
        (dict(observe_every=0), "observe_every=0"),
    ]:
        with pytest.raises(ConfigError, match=m):
            simulate(["dark"], 0.05, **kw)
    with pytest.raises(ConfigError, match="shorter than one recorded sample"):
        simulate(["dark"], 0.004)
    with pytest.raises(ConfigError, match="non-empty list"):
        simulate("grating_fwd", 0.05)
    with pytest.warns(UserWarning, match="calcium is empty"):
        simulate(["dark"], 0.02)
    with pytest.warns(UserWarning, match="recording at 333.333 Hz"):
        simulate(["dark"], 0.03, record_rate=300.0, imaging_rate=100.0)
