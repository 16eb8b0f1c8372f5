"""simZFish-like larval zebrafish: visuomotor circuit, spinal CPG, body mechanics, recordings."""

from .body import Body, BodyParams
from .circuit import BRAIN_UNITS, SPINAL_TYPES, Circuit, CircuitParams
from .simulator import Perturbation, SimState, Simulator
from .stimuli import CONDITIONS, Stimulus, make_stimulus, stack_stimuli

__all__ = [
    "Body",
    "BodyParams",
    "Circuit",
    "CircuitParams",
    "BRAIN_UNITS",
    "SPINAL_TYPES",
    "Simulator",
    "SimState",
    "Perturbation",
    "Stimulus",
    "CONDITIONS",
    "make_stimulus",
    "stack_stimuli",
]
