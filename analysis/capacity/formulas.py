"""Capacity formulas: how many near-orthogonal directions fit in d dimensions at tolerance epsilon.

k = number of directions, d = d_model, eps = epsilon (Guha 2026):

| name      | capacity k(eps, d)                         | constants |
|-----------|--------------------------------------------|-----------|
| jl_proven | exp(d eps^2 / C)                           | C = 8 |
| jl_fitted | exp(d eps^2 / C)                           | C = 3.0295 (fitted on random vectors) |
| adjusted  | d exp(d eps^2 / C)                         | C = 1.2934 |
| full      | ceil((d exp((d^c eps^2 / C)^(1/b)))^(1/a)) | C = 0.45809143, a = 1.0668005, |
|           |                                            | b = 1.44738666, c = 0.97197234 |

Inverse forms give eps(k, d) (0 where k^a <= d for the full form, k <= d for the adjusted one) and
the smallest d holding k directions at eps. The fits cover k in [2000, 32000] and d in [32, 4096]:
anything outside is flagged as extrapolation. Capacity is exponential in eps^2, so absolute values
compare models; they are not counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from analysis.errors import require

C_JL_PROVEN = 8.0
C_JL_FITTED = 3.0295
C_ADJUSTED = 1.2934
FULL = {"C": 0.45809143, "a": 1.0668005, "b": 1.44738666, "c": 0.97197234}
FITTED_K = (2000, 32000)
FITTED_D = (32, 4096)
CLASS2_BELOW = 0.1
CLASS1_ABOVE = 0.2
FORMULAS = ("full", "adjusted", "jl_fitted", "jl_proven")


def check_inputs(d: float, eps: float) -> None:
    """InputError unless d >= 1 and 0 < eps <= 1."""
    require(d >= 1, f"d must be at least 1; got {d}.")
    require(0 < eps <= 1, f"epsilon must be in (0, 1]; got {eps}.")


def capacity(eps: float, d: float, formula: str = "full") -> float:
    """Capacity under ``formula`` (one of FORMULAS); ``inf`` when it overflows a float."""
    check_inputs(d, eps)
    try:
        if formula == "jl_proven":
            return math.exp(d * eps**2 / C_JL_PROVEN)
        if formula == "jl_fitted":
            return math.exp(d * eps**2 / C_JL_FITTED)
        if formula == "adjusted":
            return d * math.exp(d * eps**2 / C_ADJUSTED)
        if formula == "full":
            inner = (d ** FULL["c"] * eps**2 / FULL["C"]) ** (1 / FULL["b"])
            return float(math.ceil(math.exp((math.log(d) + inner) / FULL["a"])))
    except OverflowError:
        return math.inf
    raise ValueError(f"formula {formula!r} is not one of {FORMULAS}")


def epsilon_for(k: float, d: float, formula: str = "full") -> float:
    """The inverse: eps such that ``capacity(eps, d, formula) == k``."""
    require(k > 0, f"k must be positive; got {k}.")
    require(d >= 1, f"d must be at least 1; got {d}.")
    if formula in ("jl_proven", "jl_fitted"):
        constant = C_JL_PROVEN if formula == "jl_proven" else C_JL_FITTED
        return math.sqrt(constant * max(math.log(k), 0.0) / d)
    if formula == "adjusted":
        return math.sqrt(C_ADJUSTED * max(math.log(k / d), 0.0) / d)
    if formula == "full":
        log_ratio = FULL["a"] * math.log(k) - math.log(d)
        return math.sqrt(FULL["C"] * max(log_ratio, 0.0) ** FULL["b"] / d ** FULL["c"]) if log_ratio > 0 else 0.0
    raise ValueError(f"formula {formula!r} is not one of {FORMULAS}")


def min_dimension(k: float, eps: float, formula: str = "full", d_max: int = 10**9) -> int:
    """The smallest integer d with ``epsilon_for(k, d) <= eps`` (eps(k, d) falls as d grows)."""
    require(k > 0, f"k must be positive; got {k}.")
    require(0 < eps <= 1, f"epsilon must be in (0, 1]; got {eps}.")
    low, high = 1, 1
    while epsilon_for(k, high, formula) > eps:
        high *= 2
        require(high <= d_max, f"No d up to {d_max} holds k = {k} directions at epsilon = {eps}.")
    while low < high:
        middle = (low + high) // 2
        if epsilon_for(k, middle, formula) <= eps:
            high = middle
        else:
            low = middle + 1
    return low


def classify(eps: float) -> str:
    """The paper's class rule, said plainly."""
    if eps < CLASS2_BELOW:
        return "Class 2"
    if eps > CLASS1_ABOVE:
        return "Class 1"
    return "between classes"


CLASS_NOTES = {
    "Class 2": "epsilon < 0.1: near-orthogonal embeddings, consistent with superposition; capacity estimated.",
    "Class 1": "epsilon > 0.2: a wide similarity distribution (mostly small, tied-embedding models); "
               "capacity is indeterminate.",
    "between classes": "0.1 <= epsilon <= 0.2: neither class rule applies; the capacity shown is outside "
                       "the range the authors estimate (they estimate only below 0.1).",
}


def is_extrapolated(k: float, d: float) -> bool:
    """True when (k, d) lies outside the range the constants were fitted on."""
    return not (FITTED_K[0] <= k <= FITTED_K[1] and FITTED_D[0] <= d <= FITTED_D[1])


@dataclass(frozen=True)
class CapacityReport:
    """Capacity of one (d, eps) under every formula, with the class and the sensitivity to eps."""

    d: int
    eps: float
    model_class: str
    capacity: dict[str, float]
    extrapolated: bool
    delta: float
    at_minus: dict[str, float]
    at_plus: dict[str, float]

    @property
    def status(self) -> str:
        """``indeterminate`` (Class 1: no capacity is given), ``estimated`` (Class 2), or ``beyond the authors'
        range`` (between the classes: the formulas give a number the authors do not estimate)."""
        return {"Class 1": "indeterminate", "Class 2": "estimated"}.get(self.model_class, "beyond the authors' range")

    def to_json(self) -> dict:
        """Plain JSON. For Class 1 every capacity is ``null`` (indeterminate) and the formulas' values sit apart in
        ``outside_domain``. An infinite capacity (more directions than a float holds) is ``null``, and
        ``infinite`` says which formulas overflowed and why."""
        numbers = {"capacity": _finite(self.capacity), "eps_minus": _finite(self.at_minus),
                   "eps_plus": _finite(self.at_plus)}
        shown = {name: dict.fromkeys(FORMULAS) for name in numbers} if self.status == "indeterminate" else numbers
        payload = {"d": self.d, "eps": self.eps, "class": self.model_class, "class_note": CLASS_NOTES[self.model_class],
                   "capacity": {**shown["capacity"], "extrapolated": self.extrapolated, "status": self.status},
                   "sensitivity": {"delta": self.delta, "eps_minus": shown["eps_minus"],
                                   "eps_plus": shown["eps_plus"]}}
        if self.status == "indeterminate":
            payload["outside_domain"] = {**numbers, "reason": "epsilon > 0.2 lies outside the formulas' domain: "
                                         "these are the formulas' values, not a capacity"}
        infinite = sorted({name for values in shown.values() for name, value in values.items() if value is None
                           and self.status != "indeterminate"})
        if infinite:
            payload["infinite"] = {"formulas": infinite, "reason": "the capacity exceeds the largest float "
                                   "(about 1.8e308 directions); it is written as null"}
        return payload


def _finite(values: dict[str, float]) -> dict[str, float | None]:
    return {name: None if math.isinf(value) else value for name, value in values.items()}


def capacity_report(d: int, eps: float, delta: float = 0.005) -> CapacityReport:
    """Every formula at (d, eps) and at eps +- delta (clipped into (0, 1])."""
    check_inputs(d, eps)
    values = {name: capacity(eps, d, name) for name in FORMULAS}
    low, high = max(eps - delta, 1e-6), min(eps + delta, 1.0)
    return CapacityReport(
        d=int(d), eps=float(eps), model_class=classify(eps), capacity=values,
        extrapolated=is_extrapolated(values["full"], d), delta=delta,
        at_minus={name: capacity(low, d, name) for name in FORMULAS},
        at_plus={name: capacity(high, d, name) for name in FORMULAS},
    )


def capacity_curves(d: int, eps_grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Capacity against eps for one d under each formula (``eps`` key holds the grid)."""
    grid = np.linspace(0.01, 0.3, 300) if eps_grid is None else np.asarray(eps_grid)
    return {"eps": grid, **{name: np.array([capacity(float(e), d, name) for e in grid]) for name in FORMULAS}}


def epsilon_curves(k: float, d_grid: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """eps(k, d) against d for one k under each formula (``d`` key holds the grid)."""
    grid = np.unique(np.geomspace(32, 16384, 200).astype(int)) if d_grid is None else np.asarray(d_grid)
    return {"d": grid, **{name: np.array([epsilon_for(k, int(x), name) for x in grid]) for name in FORMULAS}}
