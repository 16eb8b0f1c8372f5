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
    fast = Simulator(seed=3, threads=threads, physics=physics, body=body).run(stim, pert, record_every=record_every,
                                                                              engine="compiled")
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
    for k in ("brain", "r_hist", "a", "r_internal_hist", "muscle", "q", "bout_acc", "bout_left", "refractory",
              "bout_turn"):
        np.testing.assert_allclose(getattr(b, k), getattr(a, k), rtol=0, atol=1e-9, err_msg=k)
    assert (a.ptr, a.n_step) == (b.ptr, b.n_step) == (a.ptr, 300)


def test_compiled_equals_reference_under_perturbations():
    sim = Simulator()
    lesion = np.stack([np.ones(sim.circuit.n_spinal), sim.circuit.lesion_mask(("V1",)),
                       sim.circuit.lesion_mask(("V0d",), sides=("L",)), np.ones(sim.circuit.n_spinal)])
    modules = np.stack([np.ones(sim.circuit.n_internal), sim.circuit.module_lesion_mask(("slow",)),
                        np.ones(sim.circuit.n_internal), sim.circuit.module_lesion_mask(("fast",), sides=("R",))])
    pert = Perturbation(lesion=lesion, commissural=np.array([1.0, 0.5, 1.0, 0.0]),
                        drag_scale=np.array([1.0, 2.0, 0.5, 1.0]), muscle_scale=np.array([1.0, 1.0, 0.7, 1.3]),
                        drive=np.array([0.4, 0.7, 0.8, 0.95]), module_lesion=modules)
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
    stim = stack_stimuli([dict(condition=c, onset=0.0) for c in CONDS] * 17 + [dict(condition="dark")] * 2,
                         0.05, 1e-3)
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
