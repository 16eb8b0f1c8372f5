"""The larva's body on MuJoCo (``Simulator(physics="mujoco")``) against independent truths.

Truths: the MJCF's lengths and masses are the body parameters (summed by hand); the actuators
and joint springs give the Ekeberg torque written out here from its formula; with no water and
no external force the chain's linear momentum is conserved (muscle torques are internal); the
coordinate change is the chain's definition (absolute link angles = yaw + the joint angles
before the link); a trial gives the same numbers alone as in its batch and on any number of
threads (``mujoco.batch`` is documented bit-identical to one MjData per simulation); the
compiled closed loop (the circuit in numba, the body in the batch) agrees with the reference
path (one step at a time) up to round-off; the water's force on each axis of a link is the
face normal to it (summed by hand from the outline). The last test pins what MuJoCo's fluid
models leave out (the acceleration part of the added mass), as the docs say.
"""

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from neuro.sim import Perturbation, Simulator, compiled, mjbody, stack_stimuli  # noqa: E402
from neuro.sim.body import BodyParams  # noqa: E402

P = BodyParams()


def _model(drag_scale=1.0):
    return mujoco.MjModel.from_xml_string(mjbody.larva_mjcf(P, drag_scale=drag_scale))


def test_the_mjcf_has_the_larva_s_length_masses_and_joints():
    m = _model()
    assert (m.nq, m.nv, m.nu, m.nbody) == (P.n_links + 2, P.n_links + 2, 2 * (P.n_links - 1), P.n_links + 1)
    assert m.body_mass.sum() == pytest.approx(P.mass, rel=1e-12)  # 0.2 mg
    # each link's share of the mass is its stretch's volume: elliptical sections of the outline's
    # width and height at the link's middle (head 0.5 x 0.42 mm, trunk at 30 % 0.35 x 0.45, tail
    # tip 0.08 x 0.30), interpolated here by hand
    s = (np.arange(P.n_links) + 0.5) / P.n_links
    w = np.interp(s, [0, 0.3, 1], [0.5, 0.35, 0.08])
    h = np.interp(s, [0, 0.3, 1], [0.42, 0.45, 0.30])
    np.testing.assert_allclose(m.body_mass[1:], P.mass * w * h / (w * h).sum(), rtol=1e-12)
    assert m.body_mass[1] / m.body_mass[-1] > 5  # the head weighs several tail links
    # links hang one link length behind each other: the tail tip is 4 mm behind the head tip
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.xpos[-1, 0] == pytest.approx(-(P.length - P.length / P.n_links), abs=1e-12)
    assert m.opt.density == 1.0 and m.opt.viscosity == 0.0  # water; no isotropic Stokes term (see Water)


def test_the_water_resists_each_axis_of_a_link_by_its_own_face():
    # the straight larva moving at 10 mm/s along its axis, then across it: MuJoCo's inertia model
    # gives each link -2 rho r_j r_k |v| v on the face normal to the motion. Along the body: c_t
    # per mm of every link (slender links, the head too by default); across it: each link's
    # length x height. Summed here from the outline, not read from the model
    m = _model()
    d = mujoco.MjData(m)
    shape = mjbody.LarvaShape()
    N, ln = P.n_links, P.length / P.n_links
    w, h = shape.at((np.arange(N) + 0.5) / N)
    v = 10.0
    d.qvel[0] = v
    mujoco.mj_forward(m, d)
    along = P.c_t * ln * N * v**2
    assert d.qfrc_fluid[0] == pytest.approx(-along, rel=1e-9)
    d.qvel[:] = 0
    d.qvel[1] = v
    mujoco.mj_forward(m, d)
    across = (2 * (ln / 2) * (h / 2)).sum() * v**2
    assert d.qfrc_fluid[1] == pytest.approx(-across, rel=1e-9)
    # the anisotropy that makes a travelling wave swim (37-56x per link here)
    assert across / along > 20
    # a blunt head adds its frontal face (width x height) along the body
    blunt = mujoco.MjModel.from_xml_string(mjbody.larva_mjcf(P, water=mjbody.Water(blunt_head=True)))
    d = mujoco.MjData(blunt)
    d.qvel[0] = v
    mujoco.mj_forward(blunt, d)
    assert d.qfrc_fluid[0] == pytest.approx(-(along - P.c_t * ln * v**2 + 2 * (w[0] / 2) * (h[0] / 2) * v**2), rel=1e-9)


def test_viscous_drag_by_hand():
    water = mjbody.water_of(P)
    N, ln = P.n_links, P.length / P.n_links
    lengths = np.full(N, ln)
    q = np.zeros((3, N + 2))  # straight, head tip at the origin, heading +x (the body along -x)
    qd = np.zeros((3, N + 2))
    qd[0, 1] = 5.0  # sideways at 5 mm/s
    qd[1, 0] = 5.0  # forward at 5 mm/s
    qd[2, 2:] = 2.0  # the whole body turning about the head tip at 2 rad/s
    f = mjbody.linear_drag(q, qd, lengths, water, np.array([1.0, 1.0, 0.5]))
    np.testing.assert_allclose(f[0, :, 1], -ln * P.k_n * 5.0, rtol=1e-12)
    np.testing.assert_allclose(f[0, :, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(f[1, :, 0], -ln * P.k_t * 5.0, rtol=1e-12)
    # link k's centre is (k + 1/2) l behind the tip: it moves at -(k + 1/2) l omega sideways
    # (y), against which the water pushes +; drag_scale 0.5 halves it
    expect = 0.5 * ln * P.k_n * (np.arange(N) + 0.5) * ln * 2.0
    np.testing.assert_allclose(f[2, :, 1], expect, rtol=1e-12)


def test_actuators_and_springs_give_the_ekeberg_torque():
    m = _model(drag_scale=0.0)  # no water: the passive force is the joints' springs and dampers only
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    nj = P.n_links - 1
    d.qpos[3:] = rng.normal(0, 0.2, nj)
    d.qvel[3:] = rng.normal(0, 5.0, nj)
    ML, MR = rng.uniform(0, 1, nj), rng.uniform(0, 1, nj)
    d.ctrl[0::2] = MR - ML
    d.ctrl[1::2] = ML + MR
    mujoco.mj_forward(m, d)
    phi, dphi = d.qpos[3:], d.qvel[3:]
    tau = P.alpha * (MR - ML) - P.beta * (ML + MR + P.gamma) * phi - P.delta * dphi
    np.testing.assert_allclose((d.qfrc_actuator + d.qfrc_passive)[3:], tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose((d.qfrc_actuator + d.qfrc_passive)[:3], 0.0, atol=1e-12)  # internal only


def test_muscles_alone_conserve_linear_momentum_without_water():
    # the model's mechanics, integrated finely with RK4 (0.05 ms): without water, muscle torques
    # are internal, so the total momentum stays 0. Momentum from the chain's own formula
    # (neuro.sim.body.Body, the same link masses), not from MuJoCo's derived fields
    from neuro.sim.body import Body

    xml = mjbody.larva_mjcf(P, drag_scale=0.0, timestep=5e-5).replace('integrator="Euler"', 'integrator="RK4"')
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    nj = P.n_links - 1
    for i in range(2000):
        ph = 2 * np.pi * (30 * i * 5e-5 - np.arange(nj) / nj)
        ML, MR = np.maximum(np.sin(ph), 0), np.maximum(-np.sin(ph), 0)
        d.ctrl[0::2], d.ctrl[1::2] = MR - ML, ML + MR
        mujoco.mj_step(m, d)
    assert np.abs(d.qpos[3:]).max() > 0.1  # it bent
    q, qd = mjbody.to_chain(d.qpos[None], d.qvel[None])
    px, py, _ = Body(P).momentum(q, qd)
    # scale: a tail link's momentum, 0.02 mg x ~100 mm/s = 2; measured |p| ~ 6e-5 (RK4 truncation)
    assert abs(px[0]) < 1e-3 and abs(py[0]) < 1e-3, (px, py)


def test_coordinates_convert_both_ways_exactly_as_defined():
    rng = np.random.default_rng(1)
    qpos, qvel = rng.normal(size=(5, P.n_links + 2)), rng.normal(size=(5, P.n_links + 2))
    q, qd = mjbody.to_chain(qpos, qvel)
    # by hand: theta_k = yaw + phi_0 + ... + phi_{k-1}
    for b in range(5):
        for k in range(P.n_links):
            assert q[b, 2 + k] == pytest.approx(qpos[b, 2] + qpos[b, 3 : 3 + k].sum(), abs=1e-12)
            assert qd[b, 2 + k] == pytest.approx(qvel[b, 2] + qvel[b, 3 : 3 + k].sum(), abs=1e-12)
    np.testing.assert_array_equal(q[:, :2], qpos[:, :2])
    back = mjbody.to_mujoco(q, qd)
    np.testing.assert_allclose(back[0], qpos, atol=1e-12)
    np.testing.assert_allclose(back[1], qvel, atol=1e-12)
    q2, qd2 = np.empty_like(q), np.empty_like(qd)
    compiled.mujoco_to_chain(qpos, qvel, q2, qd2)
    np.testing.assert_allclose(q2, q, atol=1e-12)
    np.testing.assert_allclose(qd2, qd, atol=1e-12)


def test_bad_physics_is_refused_with_the_choices():
    with pytest.raises(Exception, match="'mujoco'.*'chain'"):
        Simulator(physics="bullet")
    with pytest.raises(Exception, match="drag_scale"):
        mjbody.larva_mjcf(P, drag_scale=-1.0)


CONDS = ["grating_fwd", "flash", "grating_left", "turning"]


@pytest.fixture(scope="module")
def runs():
    stim = stack_stimuli([dict(condition=c, onset=0.0, speed=15.0) for c in CONDS * 3], 0.25, 1e-3)
    pert = Perturbation(drag_scale=np.repeat([1.0, 0.5, 2.0], 4), drive=np.tile([0.5, 0.7, 0.9, 0.6], 3))
    batch2 = Simulator(seed=3, threads=2, physics="mujoco").run(stim, pert, record_every=1)
    batch1 = Simulator(seed=3, threads=1, physics="mujoco").run(stim, pert, record_every=1)
    return stim, pert, batch1, batch2


def test_a_trial_is_the_same_alone_in_its_batch_and_on_any_thread_count(runs):
    stim, pert, batch1, batch2 = runs
    for k in ("q", "qd", "rates", "muscle"):
        np.testing.assert_array_equal(batch1[k], batch2[k], err_msg=k)
    i = 6  # the third condition at drag 0.5, alone
    one = stack_stimuli([dict(condition=CONDS[i % 4], onset=0.0, speed=15.0)], 0.25, 1e-3)
    alone = Simulator(seed=3, threads=1, physics="mujoco").run(
        one, Perturbation(drag_scale=0.5, drive=0.9), record_every=1, trials=[i]
    )
    for k in ("q", "qd", "rates"):
        np.testing.assert_array_equal(alone[k][0], batch2[k][i], err_msg=k)
    assert np.abs(batch2["tail_angle"]).max() > 0.2  # the fish beat its tail
    # the water's factor reaches MuJoCo: at the same drive, 2x water is not 0.5x water
    assert not np.allclose(batch2["q"][1], batch2["q"][5])


def test_compiled_loop_equals_the_reference_path(runs):
    # the reference path converts to and from MuJoCo's coordinates every step (cumulative sums
    # and differences of the link angles), so the two differ by round-off; measured ~1e-13 after
    # 60 steps; 1e-9 leaves room for other CPUs
    stim = stack_stimuli([dict(condition=c, onset=0.0, speed=15.0) for c in CONDS], 0.06, 1e-3)
    pert = Perturbation(drive=np.array([0.5, 0.7, 0.9, 0.6]))
    ref = Simulator(seed=3, physics="mujoco").run(stim, pert, record_every=1, engine="numpy")
    fast = Simulator(seed=3, physics="mujoco").run(stim, pert, record_every=1, engine="compiled")
    assert np.abs(ref["tail_angle"]).max() > 0.05
    for k in ("q", "qd", "rates", "muscle"):
        np.testing.assert_allclose(fast[k], ref[k], rtol=0, atol=1e-9, err_msg=k)


def test_clamped_swim_beats_left_right_and_moves_forward():
    drives = np.array([0.35, 0.7])
    sim = Simulator(seed=0, physics="mujoco")
    out = sim.run(stack_stimuli([dict(condition="dark")] * 2, 0.6, sim.dt), Perturbation(drive=drives), record_every=1)
    ta = out["tail_angle"][:, 200:]
    # the tail swings to both sides by similar amounts (alternation), and the fish moves forward
    assert np.all(ta.max(1) > 0.15) and np.all(ta.min(1) < -0.15)  # measured +-0.28 and +-0.58 rad
    # forward along its own heading (the fish may veer): mean forward speed of the centre of mass
    v = out["speed"][:, 200:].mean(1)
    # larval swims: routine ~5-20 mm/s at 20-30 Hz, faster at higher beat frequencies, bursts to
    # ~50 mm/s and more (Budick & O'Malley 2000; Severi et al. 2014; Müller & van Leeuwen 2004);
    # nothing here is calibrated to a speed. Measured 12.3 mm/s at drive 0.35 (~31 Hz) and 28.9
    # at 0.7 (~53 Hz)
    assert 3.0 < v[0] < 20.0 and v[0] < v[1] < 60.0, v


def test_mujoco_leaves_out_the_acceleration_part_of_added_mass():
    # a single ellipsoid in water with every drag and lift coefficient at 0: a constant push
    # accelerates it as if the water had no mass (v = F t / m), where potential flow adds the
    # virtual mass rho V kappa / (2 - kappa) (~0.34 mg here) to its 1 mg. If a MuJoCo release adds
    # it, this test fails and the account of added mass in neuro/sim/mjbody.py and docs/neuro.md
    # must be revisited.
    xml = """<mujoco><option density="1" viscosity="0" gravity="0 0 0" timestep="0.001"/>
    <worldbody><body><joint type="slide" axis="0 1 0"/>
    <geom type="ellipsoid" size="1 0.2 0.5" mass="1" fluidshape="ellipsoid" fluidcoef="0 0 0 0 0"/>
    </body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.qfrc_applied[0] = 1.0
    mujoco.mj_step(m, d, nstep=100)
    assert d.qvel[0] == pytest.approx(0.1, rel=1e-9)


def test_viscous_generalised_forces_are_mujoco_s_projection_of_the_link_forces():
    # the compiled projection of the link forces on the hinges against MuJoCo's own mj_applyFT
    # (the engine's Jacobians) of the same Cartesian forces at the links' centres of mass
    m = _model(drag_scale=0.0)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    d.qpos[:] = rng.normal(0, 0.3, m.nq)
    d.qvel[:] = rng.normal(0, 5, m.nv)
    mujoco.mj_forward(m, d)
    q, qd = mjbody.to_chain(d.qpos[None], d.qvel[None])
    water = mjbody.water_of(P)
    lengths = np.full(P.n_links, P.length / P.n_links)
    F = mjbody.linear_drag(q, qd, lengths, water, np.array([1.3]))[0]
    want = np.zeros(m.nv)
    for k in range(P.n_links):
        mujoco.mj_applyFT(m, d, np.array([F[k, 0], F[k, 1], 0.0]), np.zeros(3), d.xipos[k + 1], k + 1, want)
    got = np.zeros((1, m.nv))
    compiled.viscous_qfrc(q, qd, lengths, water.normal_linear, water.tangential_linear, np.array([1.3]), got)
    assert np.abs(want).max() > 1.0
    np.testing.assert_allclose(got[0], want, rtol=0, atol=1e-12)  # measured 6e-15


def test_a_recording_names_the_body_engine_that_made_it():
    from importlib.metadata import version

    from neuro.sim.recording import simulate

    ds = simulate(["dark"], 0.02, record_rate=200.0, imaging_rate=100.0)
    assert ds.attrs["body_physics"] == f"mujoco-core {version('mujoco-core')} (neuro.sim.mjbody)"


@pytest.mark.parametrize("engine", ["compiled", "numpy"])
@pytest.mark.parametrize("scale, said", [(1e6, "QACC"), (1e12, "CTRL")])
def test_a_trial_that_blows_up_is_an_error_naming_it_and_leaves_no_log_file(
    engine, scale, said, tmp_path, monkeypatch, capfd
):
    # muscles 1e6 times too strong make MuJoCo's state blow up in that trial only (MuJoCo resets
    # it); at 1e12 the muscle command itself is "huge" and MuJoCo sets the trial's controls to 0
    # (the larva would lie still). By default MuJoCo prints a warning and appends it to
    # MUJOCO_LOG.TXT in the working folder. The simulator must stop with an error naming the
    # trial, and leave no file behind.
    monkeypatch.chdir(tmp_path)
    stim = stack_stimuli([dict(condition="dark")] * 3, 0.1, 1e-3)  # the drive reaches the muscles after ~5 ms
    pert = Perturbation(drive=0.7, muscle_scale=np.array([1.0, scale, 1.0]))
    with pytest.raises(mjbody.SimulationError, match=rf"trial\(s\) \[1\].*MuJoCo said: .*{said}"):
        Simulator(seed=0, physics="mujoco").run(stim, pert, record_every=1, engine=engine)
    assert list(tmp_path.iterdir()) == []
    assert "MuJoCo" not in capfd.readouterr().out
    import mujoco

    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler is put back
