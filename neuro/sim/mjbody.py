"""The larva's body and the water it swims in, on MuJoCo.

The body is an MJCF chain of ``n_links`` rigid links from head (link 0) to tail, free to move
in the horizontal plane: the head link carries two slide joints (x, y) and a yaw hinge, and
every following link hangs on a hinge about the vertical axis at its front end. Each link has
the length, width and height of its stretch of a ~4 mm, 5 dpf larva (:class:`LarvaShape`; the
median fin fold included in the height, since the fin is what pushes sideways on the water),
drawn as an ellipsoid; the masses are those of :func:`neuro.sim.body.link_masses` (0.2 mg in
all, shared in proportion to each stretch's volume, so the head and trunk carry most of it).

**Muscles.** The Ekeberg (1993) torque at joint ``j`` is built from MuJoCo's own elements, so
the engine integrates all of it (the joint damping implicitly)::

    tau_j = alpha (M_R - M_L) - beta (M_L + M_R + gamma) phi_j - delta dphi_j/dt
            [motor actuator]    [affine-gain actuator; joint stiffness beta gamma]  [joint damping]

The motor actuator's control is ``alpha_scale (M_R - M_L)`` (gear ``alpha``); the stiffness
actuator's control is ``M_L + M_R`` with gain ``-beta phi_j`` (MuJoCo's affine gain in the
actuator length, which is the joint angle).

**Water.** MuJoCo's inertia fluid model (see :class:`Water`): per link and per axis of the
link, quadratic drag on the face of a box with the link's length and height; the links behind
the head are thin boxes whose drag along the body is the small tangential drag of a slender
body. So the force across a link is ~25x the force along it, as in
resistive-force theory, and a travelling wave of bending drives the larva forward. A swimming
larva lives at Reynolds numbers of about 30-1000 (4 mm body, 5-20 mm/s routine swims, up to
~100 mm/s at the tail tip; McHenry & Lauder 2005, Müller & van Leeuwen 2004), the intermediate
regime where the pressure (quadratic) drag across the body dominates and the viscous drag along
it is a boundary layer's, which is this per-axis model. MuJoCo's other fluid model (ellipsoids
with added mass, drag, Kutta and Magnus lift) was measured and not kept: its drag acts along each
link's velocity, so the only force across the body is the Kutta lift; with its default
coefficient (1) the larva swam backward at drives 0.35-0.55, and with 4 (swimming forward at
7-18 mm/s) it turned away from the stimulus in every one of 38 turning bouts (median -0.15 rad,
seeds 101-102, the measure of ``python -m bench.bench_neuro --kinematics``).

**What it misses.** Added mass (neither MuJoCo model puts the entrained water's inertia in the
mass matrix; with the ellipsoid model's velocity terms the answer was the same), the wake, and
any flow between links: the model is stateless and per link. MuJoCo's linear (Stokes) term is
isotropic and would resist motion along the body as much as across it, so it is left out
(:attr:`Water.viscosity` 0) and the viscous drag of resistive-force theory (across the body
1000x along it) is applied per link as an external force (:func:`linear_drag`, as generalised
forces).

**Integration.** MuJoCo's semi-implicit Euler at 0.5 ms (two steps per simulator step, muscle
controls and the viscous forces held; joint damping implicit). Measured against 20 steps per
millisecond on 0.6 s clamped swims at drives 0.35, 0.7 and 0.9: the head's largest position error
is 0.08-0.27 mm (1.6 % of the 5-16 mm swum) and the tail angle's 0.02-0.06 rad at two steps, twice
that at one step, half at four (first order). ``implicitfast``, which MuJoCo recommends with fluid
forces, costs twice as much per step and was no more accurate here. A trial whose state blows up
(MuJoCo resets it) or whose muscle command is NaN or huge (MuJoCo zeroes the trial's controls) is a
:class:`SimulationError` naming the trial, not a silent restart or a still larva; MuJoCo's warning
text goes into the error rather than into a ``MUJOCO_LOG.TXT`` in the working folder
(:func:`engine_warnings`).

**Units.** mm, mg, s: force nN, torque nN mm.

**State.** The simulator's body coordinates stay those of :class:`neuro.sim.body.Body` (head
tip ``x, y`` and the absolute link angles ``theta_k``); :func:`to_chain` and :func:`to_mujoco`
convert exactly between those and MuJoCo's (``x, y``, yaw ``= theta_0`` and joint angles
``phi_j = theta_{j+1} - theta_j``).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
from dataclasses import dataclass

import numpy as np

from scimech.errors import ConfigError, ScimechError

from .body import BodyParams, LarvaShape, link_masses

__all__ = [
    "LarvaShape",
    "Water",
    "water_of",
    "link_boxes",
    "linear_drag",
    "larva_mjcf",
    "BatchBody",
    "SimulationError",
    "engine_warnings",
    "to_chain",
    "to_mujoco",
    "AVAILABLE",
]

# whether MuJoCo is installed, without importing it (~0.2 s) whenever neuro.sim is imported
AVAILABLE = importlib.util.find_spec("mujoco") is not None


@dataclass(frozen=True)
class Water:
    """The water of MuJoCo's fluid model, in mm, mg, s.

    MuJoCo's *inertia* fluid model: each link meets the water as a box, and each component of
    the link's velocity in the link's frame is resisted by the face normal to it, ``f_i = -2 rho
    r_j r_k |v_i| v_i`` (the box's half-sizes ``r``), the same per-axis quadratic drag as
    resistive-force theory's normal and tangential coefficients. The boxes: length and height
    of each stretch of the body (fin fold included), and a thickness that makes the drag along
    the link the tangential drag ``tangential`` per mm (the links behind the head are hidden from
    the water in front by the link ahead: flow along the body is friction, not pressure drag; the
    head too unless ``blunt_head``, which gives it its own width). MuJoCo derives the box from the link's inertia, so the
    links' inertias are those of these boxes with the links' masses.

    Attributes
    ----------
    density : float
        mg mm-3 (water: 1).
    viscosity : float
        Viscosity of the model's linear (Stokes) term, mg mm-1 s-1. The term is isotropic (the
        Stokes drag of a sphere of the link's mean half-size), so it resists motion along the
        body as much as across it; with water's viscosity, rescaled so that the chain's total
        equals slender-body theory's tangential resistance (``2 pi mu L / (ln(2L/a) - 1/2)``,
        Gray & Hancock 1955; factor 0.28), the larva swims 0.4-3.4 mm/s at 25-45 Hz, below
        larval routine swims (5-20 mm/s). At a larva's Reynolds numbers (~30-300 for the body,
        the tail's sideways motion included) the quadratic drag dominates the force across the
        body, so the default leaves the linear term out (0); give water's 1 to have it.
    tangential : float
        Quadratic drag along a link behind the head, nN s2 mm-3 per mm of link
        (:attr:`neuro.sim.body.BodyParams.c_t`).
    normal_linear, tangential_linear : float
        Viscous (linear) drag across and along each link, nN s mm-2 per mm of link
        (:attr:`neuro.sim.body.BodyParams.k_n`, ``k_t``; resistive-force theory gives ~3.6 across
        a 4 mm, 0.4 mm-deep body in water). MuJoCo's own linear term is isotropic, so these are
        applied as forces at each link's centre (passed to MuJoCo as generalised forces,
        ``qfrc_applied``), computed from the body's state at the start of each simulator step (1 ms; the drag's time constant, link mass over
        drag, is ~25 ms). Without the force across the body, turning bouts lose their direction:
        the optomotor test's left- and right-grating fish end 0.0-0.1 rad apart, 0.2-0.35 with it.
    blunt_head : bool
        Give the head link its own width in the water (its frontal pressure drag). Off by
        default: measured, the blunt head's drag also takes the direction out of the turning bouts
        (left- and right-grating fish no longer separate in the optomotor test), so the head is
        a slender link like the others, as on the chain body.
    """

    density: float = 1.0
    viscosity: float = 0.0
    tangential: float = 0.008
    normal_linear: float = 2.0
    tangential_linear: float = 0.002
    blunt_head: bool = False


def water_of(params: BodyParams) -> Water:
    """The water with the drag coefficients of the chain body's parameters (one source for both)."""
    return Water(tangential=params.c_t, normal_linear=params.k_n, tangential_linear=params.k_t)


def link_boxes(params: BodyParams, shape: LarvaShape, water: Water) -> np.ndarray:
    """Half-sizes ``(n_links, 3)`` (along, across, vertical; mm) of the links' fluid boxes."""
    N = params.n_links
    ln = params.length / N
    width, height = shape.at((np.arange(N) + 0.5) / N)
    rz = height / 2
    ry = water.tangential * ln / (2 * water.density * rz)
    if water.blunt_head:
        ry[0] = width[0] / 2
    return np.stack([np.full(N, ln / 2), ry, rz], axis=1)


def larva_mjcf(
    params: BodyParams | None = None,
    shape: LarvaShape | None = None,
    drag_scale: float = 1.0,
    timestep: float = 0.0005,
    water: Water | None = None,
) -> str:
    """The MJCF text of the larva in water (``drag_scale`` multiplies the water's density and
    viscosity: a fluid shift; 0 = no water)."""

    p = params or BodyParams()
    shape = shape or LarvaShape()
    water = water or water_of(p)
    if drag_scale < 0 or not math.isfinite(drag_scale):
        raise ConfigError(f"drag_scale={drag_scale}; give a finite factor >= 0 on the water's density and viscosity.")
    N = p.n_links
    ln = p.length / N
    mass = link_masses(p)
    width, height = shape.at((np.arange(N) + 0.5) / N)
    box = link_boxes(p, shape, water)
    lines = []
    indent = "    "
    for k in range(N):
        pad = indent * (k + 2)
        pos = "0 0 0" if k == 0 else f"{-ln:.17g} 0 0"
        lines.append(f'{pad}<body name="link{k}" pos="{pos}">')
        if k == 0:
            lines.append(f'{pad}  <joint name="x" type="slide" axis="1 0 0"/>')
            lines.append(f'{pad}  <joint name="y" type="slide" axis="0 1 0"/>')
            lines.append(f'{pad}  <joint name="yaw" type="hinge" axis="0 0 1"/>')
        else:
            lines.append(
                f'{pad}  <joint name="j{k - 1}" type="hinge" axis="0 0 1" '
                f'stiffness="{p.beta * p.gamma:.17g}" damping="{p.delta:.17g}"/>'
            )
        rx, ry, rz = box[k]
        m = mass[k]
        inertia = (m / 3 * (ry**2 + rz**2), m / 3 * (rx**2 + rz**2), m / 3 * (rx**2 + ry**2))
        lines.append(
            f'{pad}  <inertial pos="{-ln / 2:.17g} 0 0" mass="{m:.17g}" '
            f'diaginertia="{inertia[0]:.17g} {inertia[1]:.17g} {inertia[2]:.17g}"/>'
        )
        # the larva's outline, for drawing only (no mass, no contacts)
        lines.append(
            f'{pad}  <geom name="g{k}" type="ellipsoid" pos="{-ln / 2:.17g} 0 0" '
            f'size="{ln / 2:.17g} {width[k] / 2:.17g} {height[k] / 2:.17g}" mass="0" contype="0" '
            'conaffinity="0"/>'
        )
    for k in reversed(range(N)):
        lines.append(f"{indent * (k + 2)}</body>")
    acts = []
    for j in range(N - 1):
        acts.append(f'    <motor name="bend{j}" joint="j{j}" gear="{p.alpha:.17g}"/>')
        acts.append(
            f'    <general name="stiff{j}" joint="j{j}" gaintype="affine" gainprm="0 {-p.beta:.17g} 0" '
            'biastype="none"/>'
        )
    return "\n".join(
        [
            '<mujoco model="larva">',
            '  <compiler angle="radian" autolimits="true" inertiafromgeom="false"/>',
            f'  <option timestep="{timestep:.17g}" integrator="Euler" gravity="0 0 0" '
            f'density="{water.density * drag_scale:.17g}" viscosity="{water.viscosity * drag_scale:.17g}">',
            '    <flag contact="disable" warmstart="disable"/>',
            "  </option>",
            "  <worldbody>",
            *lines,
            "  </worldbody>",
            "  <actuator>",
            *acts,
            "  </actuator>",
            "</mujoco>",
        ]
    )


def linear_drag(q: np.ndarray, qd: np.ndarray, lengths: np.ndarray, water: Water, drag_scale: np.ndarray) -> np.ndarray:
    """World-frame viscous forces ``(B, n_links, 2)`` on each link's centre (nN):
    ``-l (k_t v_t t + k_n v_n n)`` with ``t`` along the link, ``n`` across it, ``v`` the link
    centre's velocity (chain coordinates)."""
    th, thd = q[:, 2:], qd[:, 2:]
    c, s = np.cos(th), np.sin(th)
    # link centre velocities: head tip velocity plus the links in front and half the link itself
    hx, hy = lengths * s * thd, -lengths * c * thd
    vx = qd[:, :1] + np.cumsum(hx, axis=1) - 0.5 * hx
    vy = qd[:, 1:2] + np.cumsum(hy, axis=1) - 0.5 * hy
    vt = vx * c + vy * s
    vn = -vx * s + vy * c
    k = np.asarray(drag_scale, float).reshape(-1, 1)
    ft = -k * lengths * water.tangential_linear * vt
    fn = -k * lengths * water.normal_linear * vn
    return np.stack([ft * c - fn * s, ft * s + fn * c], axis=-1)


def to_mujoco(q: np.ndarray, qd: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Chain coordinates ``(B, N + 2)`` -> MuJoCo ``qpos``/``qvel`` ``(B, N + 2)``."""
    q, qd = np.asarray(q, float), np.asarray(qd, float)
    qpos, qvel = q.copy(), qd.copy()
    qpos[:, 3:] = q[:, 3:] - q[:, 2:-1]
    qvel[:, 3:] = qd[:, 3:] - qd[:, 2:-1]
    return qpos, qvel


def to_chain(qpos: np.ndarray, qvel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo ``qpos``/``qvel`` -> chain coordinates (head tip and absolute link angles)."""
    q = np.array(qpos, float, copy=True)
    qd = np.array(qvel, float, copy=True)
    q[:, 2:] = np.cumsum(np.asarray(qpos, float)[:, 2:], axis=1)
    qd[:, 2:] = np.cumsum(np.asarray(qvel, float)[:, 2:], axis=1)
    return q, qd


class SimulationError(ScimechError, RuntimeError):
    """The physics engine could not simulate a trial (its state blew up)."""


# MuJoCo's warnings while the larva is stepped (see engine_warnings); the newest last
_WARNINGS: list[str] = []


@contextlib.contextmanager
def engine_warnings():
    """Collect MuJoCo's warnings while the block runs, instead of MuJoCo's default of printing
    them and appending them to ``MUJOCO_LOG.TXT`` in the working folder (a file a study would
    otherwise leave in the user's folder). A trial that blew up is found from MuJoCo's per-trial
    warning counters (:meth:`BatchBody.check`), which name the trial; the collected text goes
    into that error. The handler is process-wide in MuJoCo, so it is set here, on the calling
    thread, around the whole run (not per step on worker threads) and the previous one is put back."""
    import mujoco

    previous = mujoco.get_mju_user_warning()
    _WARNINGS.clear()
    mujoco.set_mju_user_warning(_WARNINGS.append)
    try:
        yield _WARNINGS
    finally:
        mujoco.set_mju_user_warning(previous)


@functools.lru_cache(maxsize=32)
def _model(params: BodyParams, shape: LarvaShape, drag_scale: float, timestep: float, water: Water):
    """The compiled model (read only; shared by every batch that uses it)."""
    import mujoco

    return mujoco.MjModel.from_xml_string(larva_mjcf(params, shape, drag_scale, timestep=timestep, water=water))


class BatchBody:
    """Many larvae in water, each its own MuJoCo simulation, stepped together on a thread pool
    (:class:`mujoco.batch.Batch`: bit-identical to stepping each alone at any thread count).

    ``drag_scale`` ``(B,)``: each trial's factor on the water (trials that share a value share
    one compiled model). ``substeps``: MuJoCo steps per simulator step (controls held).
    """

    def __init__(
        self,
        params: BodyParams,
        drag_scale: np.ndarray,
        dt: float,
        substeps: int = 2,
        threads: int = 1,
        shape: LarvaShape | None = None,
        water: Water | None = None,
    ):
        import mujoco
        from mujoco import batch as mjbatch

        drag_scale = np.ascontiguousarray(drag_scale, float).reshape(-1)
        self.B = len(drag_scale)
        self.substeps = int(substeps)
        h = dt / self.substeps
        water = water or water_of(params)
        models = {float(v): _model(params, shape or LarvaShape(), float(v), h, water) for v in np.unique(drag_scale)}
        first = models[float(drag_scale[0])]
        self.batch = mjbatch.Batch(first, nsim=self.B, nthread=max(1, int(threads)))
        if len(models) > 1:
            self.batch.set_models([models[float(v)] for v in drag_scale])
        self.batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        # a state that blew up (MuJoCo resets the trial), or a muscle command that was NaN or huge
        # (MuJoCo sets every control of the trial to 0 for that step: the larva stops beating)
        self._unstable = [
            int(w)
            for w in (
                mujoco.mjtWarning.mjWARN_BADQPOS,
                mujoco.mjtWarning.mjWARN_BADQVEL,
                mujoco.mjtWarning.mjWARN_BADQACC,
                mujoco.mjtWarning.mjWARN_BADCTRL,
            )
        ]
        self.water = water
        self.drag_scale = drag_scale
        self.lengths = np.full(params.n_links, params.length / params.n_links)
        self.qfrc = self.batch.bind("qfrc_applied")  # the water's viscous drag (see set_drag)
        self.qpos = self.batch.bind("qpos")
        self.qvel = self.batch.bind("qvel")
        self.ctrl = self.batch.bind("ctrl")
        self._models = models

    def set_state(self, q: np.ndarray, qd: np.ndarray) -> None:
        """Set every trial's body (chain coordinates) and the viscous forces of that state."""
        qpos, qvel = to_mujoco(q, qd)
        self.qpos[...] = qpos
        self.qvel[...] = qvel
        self.set_drag(q, qd)

    def set_drag(self, q: np.ndarray, qd: np.ndarray) -> None:
        """The viscous forces of state ``q``, ``qd`` (chain coordinates), as generalised forces
        held over the next simulator step (:func:`neuro.sim.compiled.viscous_qfrc`; the forces
        of :func:`linear_drag` projected on the hinges, tested against MuJoCo's ``mj_applyFT``)."""
        from . import compiled

        compiled.viscous_qfrc(
            np.ascontiguousarray(q),
            np.ascontiguousarray(qd),
            self.lengths,
            self.water.normal_linear,
            self.water.tangential_linear,
            self.drag_scale,
            self.qfrc,
        )

    def step(self) -> None:
        self.batch.step(nstep=self.substeps)

    def check(self) -> None:
        """Raise :class:`SimulationError` if any trial blew up since the batch was made (MuJoCo
        counts the warnings per simulation and keeps them)."""
        bad = self.batch.warning[:, self._unstable, 1].any(axis=1)
        if bad.any():  # MuJoCo resets a simulation whose state blew up: say so rather than go on
            trials = np.flatnonzero(bad)
            raise SimulationError(
                f"MuJoCo's larva became unstable (NaN or huge muscle commands, velocities or accelerations) in "
                f"trial(s) {trials[:5].tolist()}{' ...' if len(trials) > 5 else ''}; MuJoCo reset them or zeroed "
                "their muscles, so their numbers would be wrong. Lower "
                "the muscle or drive perturbation, or raise Simulator.mujoco_substeps (a smaller MuJoCo step)."
                + (f" MuJoCo said: {_WARNINGS[0]}" if _WARNINGS else "")
            )

    def chain_state(self) -> tuple[np.ndarray, np.ndarray]:
        return to_chain(self.qpos, self.qvel)
