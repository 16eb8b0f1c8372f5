"""The larva's body and the water it swims in, on MuJoCo.

The body is an MJCF chain of ``n_links`` rigid links from head (link 0) to tail, free to move
in the horizontal plane: the head link carries two slide joints (x, y) and a yaw hinge, and
every following link hangs on a hinge about the vertical axis at its front end. Each link is
an ellipsoid with the length, width and height of its stretch of a ~4 mm, 5 dpf larva (the
median fin fold included in the height, since the fin is what pushes sideways on the water);
the masses are those of :class:`neuro.sim.body.BodyParams` (about 0.2 mg in all, tapering to
the tail).

**Muscles.** The Ekeberg (1993) torque at joint ``j`` is built from MuJoCo's own elements, so
the engine integrates all of it (the joint damping implicitly)::

    tau_j = alpha (M_R - M_L) - beta (M_L + M_R + gamma) phi_j - delta dphi_j/dt
            [motor actuator]    [affine-gain actuator; joint stiffness beta gamma]  [joint damping]

The motor actuator's control is ``alpha_scale (M_R - M_L)`` (gear ``alpha``); the stiffness
actuator's control is ``M_L + M_R`` with gain ``-beta phi_j`` (MuJoCo's affine gain in the
actuator length, which is the joint angle).

**Water.** MuJoCo's ellipsoid fluid model (``fluidshape="ellipsoid"``, density 1 mg mm-3 and
viscosity 1 mg mm-1 s-1, water at ~20 C in the units mm, mg, s) gives every link added mass,
quadratic (blunt and slender) drag, Kutta lift and Magnus force, plus Stokes' linear drag. A
swimming larva lives at Reynolds numbers of about 10-1000 (4 mm body, 5-40 mm/s routine swims
to ~100 mm/s at the tail tip; McHenry & Lauder 2005, Müller & van Leeuwen 2004): the
intermediate regime where inertial forces (the quadratic drag, added mass and lift) and
viscous forces (the linear drag) are of the same order, which is the pair this model adds up.
What it misses: the model is stateless and per link, so there is no wake, no vortex shed by
one link meeting the next, and no flow between links, which a resolved CFD would give; the
recoil of the head and the thrust of a whole body wave are the sum of per-link forces.

**What it misses, measured.** MuJoCo applies only the velocity-dependent part of the added-mass
force; the part proportional to acceleration (``-m_A dv/dt``), which would enter the mass
matrix, is left out (a body pushed through still water accelerates as if the water had no mass:
``tests/neuro/test_mujoco_body.py``). Without it the water has no memory of the body's
acceleration, so a bend and the unbend that follows nearly cancel (Purcell's scallop theorem in
the viscous limit): a turning bout turns the fish by a few hundredths of a radian, where a larva's
routine turn is ~0.5 rad; and the reactive (Lighthill) part of the thrust is absent. The model is
also stateless and per link: no wake, no vortex shed by one link meeting the next.

**Integration.** MuJoCo's semi-implicit Euler at 0.5 ms (two steps per simulator step, muscle
controls held). Measured on an open-loop swim (28 Hz, 0.6 s) against a 0.05 ms run, the largest
error in any coordinate is 0.08 mm at 0.5 ms and 0.18 mm at 1 ms, converging at first order;
``implicitfast`` (the integrator MuJoCo recommends with fluid forces) was further off at 0.25 ms
(0.33 mm) and costs twice as much per step.

**Units.** mm, mg, s: force nN, torque nN mm.

**State.** The simulator's body coordinates stay those of :class:`neuro.sim.body.Body` (head
tip ``x, y`` and the absolute link angles ``theta_k``); :func:`to_chain` and :func:`to_mujoco`
convert exactly between those and MuJoCo's (``x, y``, yaw ``= theta_0`` and joint angles
``phi_j = theta_{j+1} - theta_j``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from scimech.errors import ConfigError

from .body import BodyParams

__all__ = ["LarvaShape", "Water", "viscous_factor", "larva_mjcf", "BatchBody", "to_chain", "to_mujoco", "AVAILABLE"]

try:
    import mujoco  # noqa: F401

    AVAILABLE = True
except ImportError:  # pragma: no cover - mujoco-core is a dependency
    AVAILABLE = False


@dataclass(frozen=True)
class LarvaShape:
    """Outline of a 5 dpf larva, mm: width and height at the head, at the widest trunk point and
    at the tail tip, linearly interpolated along the body (height with the median fin fold).

    Values read from lateral and dorsal images of 5 dpf larvae (standard length ~3.9 mm; head
    width ~0.5 mm across the eyes; trunk ~0.35 mm wide; body plus fin fold ~0.45 mm high over the
    trunk, narrowing to ~0.3 mm at the caudal fin): Kimmel et al. 1995 (staging series),
    Parichy et al. 2009 (standardized staging by size).
    """

    head_width: float = 0.5
    trunk_width: float = 0.35
    tail_width: float = 0.08
    head_height: float = 0.42
    trunk_height: float = 0.45
    tail_height: float = 0.30
    trunk_at: float = 0.3  # fraction of the length from the head where the trunk is widest

    def at(self, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Width and height at body fractions ``s`` (0 = head tip, 1 = tail tip)."""
        s = np.asarray(s, float)
        xs = [0.0, self.trunk_at, 1.0]
        return (np.interp(s, xs, [self.head_width, self.trunk_width, self.tail_width]),
                np.interp(s, xs, [self.head_height, self.trunk_height, self.tail_height]))


@dataclass(frozen=True)
class Water:
    """The water of MuJoCo's ellipsoid fluid model, in mm, mg, s.

    Attributes
    ----------
    density : float
        mg mm-3 (water: 1).
    viscosity : float
        Viscosity of water, mg mm-1 s-1 (1 at ~20 C). The model gives every link the Stokes drag
        of an isolated sphere of the link's mean radius, which for 11 touching links is several
        times the viscous drag of one slender body; :func:`larva_mjcf` scales the viscosity it
        hands to MuJoCo so that the chain's total linear drag equals slender-body theory's
        tangential resistance ``2 pi mu L / (ln(2L/a) - 1/2)`` (Gray & Hancock 1955; ``a`` the
        mean half-height), see :func:`viscous_factor`.
    blunt, slender, angular, kutta, magnus : float
        The model's five coefficients per link (``fluidcoef``): blunt and slender quadratic drag,
        angular drag, Kutta and Magnus lift. The model's drag acts along the link's velocity
        (only its size depends on the link's orientation), so the force normal to the body that
        drives undulatory swimming comes from the Kutta lift alone. With the default ``kutta=1``
        (tuned for flapping insect wings) the larva swims backward at low drive; ``kutta=4`` is
        calibrated so that a clamped swim at drive 0.55 (~28 Hz) reaches ~10 mm/s, a larval
        routine swim (5-20 mm/s). ``slender`` at 0.02: behind the head, flow along the body is
        skin friction, not pressure drag.
    shielded : float
        Width of the links behind the head in the fluid model, as a fraction of their width: their
        front is hidden by the link ahead, so they meet the water with their sides (length x height)
        and not head-on. The head link keeps its width.
    """

    density: float = 1.0
    viscosity: float = 1.0
    blunt: float = 0.5
    slender: float = 0.02
    angular: float = 1.5
    kutta: float = 4.0
    magnus: float = 1.0
    shielded: float = 0.1


def viscous_factor(params: BodyParams, shape: LarvaShape, water: Water) -> float:
    """The factor on the viscosity that makes the sum of the links' Stokes drags (``6 pi mu
    r_D`` each, ``r_D`` the mean semi-axis of the link's fluid ellipsoid) equal slender-body
    theory's tangential resistance of the whole body, ``2 pi mu L / (ln(2L/a) - 1/2)`` with ``a``
    the body's mean half-height."""
    N = params.n_links
    ln = params.length / N
    mid = (np.arange(N) + 0.5) / N
    width, height = shape.at(mid)
    fw = width * np.where(np.arange(N) == 0, 1.0, water.shielded)
    r_d = (ln / 2 + fw / 2 + height / 2) / 3
    a = float(np.mean(height)) / 2
    slender = 2 * math.pi * params.length / (math.log(2 * params.length / a) - 0.5)
    return slender / float(np.sum(6 * math.pi * r_d))


def larva_mjcf(params: BodyParams | None = None, shape: LarvaShape | None = None, drag_scale: float = 1.0,
               timestep: float = 0.0005, water: Water | None = None) -> str:
    """The MJCF text of the larva in water (``drag_scale`` multiplies the water's density and
    viscosity: a fluid shift; 0 = no water)."""

    p = params or BodyParams()
    shape = shape or LarvaShape()
    if drag_scale < 0 or not math.isfinite(drag_scale):
        raise ConfigError(f"drag_scale={drag_scale}; give a finite factor >= 0 on the water's density and viscosity.")
    N = p.n_links
    ln = p.length / N
    taper = np.linspace(1.0, p.taper, N)
    mass = p.mass * taper / taper.sum()
    mid = (np.arange(N) + 0.5) / N
    width, height = shape.at(mid)
    water = water or Water()
    fluid = (f'fluidshape="ellipsoid" fluidcoef="{water.blunt:.17g} {water.slender:.17g} {water.angular:.17g} '
             f'{water.kutta:.17g} {water.magnus:.17g}"') if drag_scale > 0 else ""
    fluid_width = width * np.where(np.arange(N) == 0, 1.0, water.shielded)
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
            lines.append(f'{pad}  <joint name="j{k - 1}" type="hinge" axis="0 0 1" '
                         f'stiffness="{p.beta * p.gamma:.17g}" damping="{p.delta:.17g}"/>')
        lines.append(f'{pad}  <geom name="g{k}" type="ellipsoid" pos="{-ln / 2:.17g} 0 0" '
                     f'size="{ln / 2:.17g} {fluid_width[k] / 2:.17g} {height[k] / 2:.17g}" mass="{mass[k]:.17g}" {fluid}/>')
    for k in reversed(range(N)):
        lines.append(f"{indent * (k + 2)}</body>")
    acts = []
    for j in range(N - 1):
        acts.append(f'    <motor name="bend{j}" joint="j{j}" gear="{p.alpha:.17g}"/>')
        acts.append(f'    <general name="stiff{j}" joint="j{j}" gaintype="affine" gainprm="0 {-p.beta:.17g} 0" '
                    'biastype="none"/>')
    return "\n".join([
        '<mujoco model="larva">',
        '  <compiler angle="radian" autolimits="true"/>',
        f'  <option timestep="{timestep:.17g}" integrator="Euler" gravity="0 0 0" '
        f'density="{water.density * drag_scale:.17g}" '
        f'viscosity="{water.viscosity * viscous_factor(p, shape, water) * drag_scale:.17g}">',
        '    <flag contact="disable" warmstart="disable"/>',
        "  </option>",
        "  <worldbody>",
        *lines,
        "  </worldbody>",
        "  <actuator>",
        *acts,
        "  </actuator>",
        "</mujoco>",
    ])


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

    def __init__(self, params: BodyParams, drag_scale: np.ndarray, dt: float, substeps: int = 2,
                 threads: int = 1, shape: LarvaShape | None = None, water: Water | None = None):
        import mujoco
        from mujoco import batch as mjbatch

        drag_scale = np.asarray(drag_scale, float).reshape(-1)
        self.B = len(drag_scale)
        self.substeps = int(substeps)
        h = dt / self.substeps
        models = {float(v): _model(params, shape or LarvaShape(), float(v), h, water or Water())
                  for v in np.unique(drag_scale)}
        first = models[float(drag_scale[0])]
        self.batch = mjbatch.Batch(first, nsim=self.B, nthread=max(1, int(threads)))
        if len(models) > 1:
            self.batch.set_models([models[float(v)] for v in drag_scale])
        self.batch.reset(stage=mujoco.mjtStage.mjSTAGE_NONE.value)
        self.qpos = self.batch.bind("qpos")
        self.qvel = self.batch.bind("qvel")
        self.ctrl = self.batch.bind("ctrl")
        self._models = models

    def set_state(self, q: np.ndarray, qd: np.ndarray) -> None:
        qpos, qvel = to_mujoco(q, qd)
        self.qpos[...] = qpos
        self.qvel[...] = qvel

    def step(self) -> None:
        self.batch.step(nstep=self.substeps)

    def chain_state(self) -> tuple[np.ndarray, np.ndarray]:
        return to_chain(self.qpos, self.qvel)
