"""Vector-packing simulations behind the capacity constants, and the fits of the formulas to them.

- Random: k standard Gaussian vectors in R^d, normalised; a trial's value is the max over i != j
  of |cos|; over T trials the minimum is kept (eps*).
- Optimised (the paper's protocol, as in the authors' code): a ``[d, k]`` parameter of Gaussian
  columns normalised to unit length at the start and normalised again inside every loss evaluation;
  loss ``sum |G - I|^p`` over the Gram matrix G with
  ``p = min(floor(M / ln d), 20)``, M = 40 for k <= 4000, else 50 if d >= 3072, else 60; Adam with
  lr 0.005 for d <= 1024 else 0.0025, 5000 steps; eps* = max over i != j of |G_ij| at the end.
- Fits: ``scipy.optimize.curve_fit`` of eps(k, d) under the JL, adjusted and fully parameterised
  forms, with C (and a, b, c), R^2, MAPE and NRMSE.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import curve_fit

from analysis.capacity.epsilon import available_bytes
from analysis.errors import InputError, require
from analysis.models.devices import pick_device
from analysis.progress import Progress, report


@dataclass(frozen=True)
class PackingCell:
    """One simulated (d, k) cell."""

    d: int
    k: int
    method: str
    eps_star: float

    def to_json(self) -> dict:
        return {"d": self.d, "k": self.k, "method": self.method, "eps_star": self.eps_star}


def loss_exponent(k: int, d: int) -> int:
    """The paper's p = min(floor(M / ln d), 20)."""
    m = 40 if k <= 4000 else (50 if d >= 3072 else 60)
    return min(math.floor(m / math.log(d)), 20)


def learning_rate(d: int) -> float:
    return 0.005 if d <= 1024 else 0.0025


def required_bytes(k: int, d: int, method: str) -> int:
    """Memory a cell needs: the ``[k, k]`` Gram and its temporaries dominate."""
    gram = 4 * k * k
    return (6 * gram + 16 * k * d) if method == "optimized" else (2 * gram + 8 * k * d)


def check_cell(k: int, d: int, method: str, device: torch.device) -> None:
    """InputError for impossible cells, or cells too large for the device (estimated before starting)."""
    require(d >= 1, f"d must be at least 1; got {d}.")
    require(k >= 2, f"k must be at least 2 vectors; got {k}.")
    require(method in ("random", "optimized"), f"method must be random or optimized; got {method!r}.")
    need, free = required_bytes(k, d, method), available_bytes(device)
    if need > free:
        raise InputError(f"Packing cell k = {k}, d = {d} ({method}) needs about {need / 2**30:.1f} GiB on "
                         f"{device}, more than the {free / 2**30:.1f} GiB available; choose a smaller k.")


def _max_off_diagonal(unit: torch.Tensor) -> float:
    """max over i != j of |cos| for unit columns ``[d, k]``."""
    gram = (unit.T @ unit).abs_()
    gram.fill_diagonal_(0)
    return float(gram.max())


def random_packing(k: int, d: int, trials: int = 1000, seed: int = 0, device: str = "auto",
                   progress: Progress | None = None) -> PackingCell:
    """Min over ``trials`` of the max |cos| among k random unit vectors in R^d."""
    torch_device = pick_device(device)
    check_cell(k, d, "random", torch_device)
    require(trials >= 1, f"trials must be at least 1; got {trials}.")
    generator = torch.Generator(device=torch_device).manual_seed(seed)
    best = math.inf
    for trial in range(trials):
        report(progress, f"random packing k={k} d={d}", trial, trials)
        vectors = torch.randn(d, k, generator=generator, device=torch_device)
        best = min(best, _max_off_diagonal(torch.nn.functional.normalize(vectors, dim=0)))
    report(progress, f"random packing k={k} d={d}", trials, trials)
    return PackingCell(d, k, "random", best)


def optimized_packing(k: int, d: int, steps: int = 5000, seed: int = 0, device: str = "auto",
                      progress: Progress | None = None) -> PackingCell:
    """The paper's optimised packing (see module docstring); eps* at the end."""
    torch_device = pick_device(device)
    check_cell(k, d, "optimized", torch_device)
    require(steps >= 1, f"steps must be at least 1; got {steps}.")
    require(d >= 2, f"Optimised packing needs d >= 2 (the loss exponent divides by ln d); got d = {d}.")
    generator = torch.Generator(device=torch_device).manual_seed(seed)
    start = torch.randn(d, k, generator=generator, device=torch_device)
    vectors = torch.nn.Parameter(torch.nn.functional.normalize(start, dim=0))
    optimiser = torch.optim.Adam([vectors], lr=learning_rate(d))
    p = loss_exponent(k, d)
    with torch.no_grad():
        for step in range(steps):
            if step % 50 == 0:
                report(progress, f"optimised packing k={k} d={d}", step, steps)
            vectors.grad = packing_gradient(vectors, p)
            optimiser.step()
        report(progress, f"optimised packing k={k} d={d}", steps, steps)
        return PackingCell(d, k, "optimized", _max_off_diagonal(torch.nn.functional.normalize(vectors, dim=0)))


def packing_gradient(vectors: torch.Tensor, p: int) -> torch.Tensor:
    """Gradient of ``sum |U^T U - I|^p`` (p >= 2) with respect to ``V`` ``[d, k]``, ``U = V / ||V||``
    (columns normalised inside the loss, as in the authors' code: the parameter's norm grows as Adam
    moves it, which shrinks the angular step over time). In closed form: with ``D = U^T U - I`` and
    ``W = p sign(D) |D|^(p-1) = p D (D^2)^((p-2)/2)``, ``dL/dU = 2 U W`` and
    ``dL/dV = (dL/dU - U diag(U^T dL/dU)) / ||V||`` (2.6x autograd's speed; tested against it)."""
    norms = vectors.norm(dim=0, keepdim=True)
    unit = vectors / norms
    deviation = unit.T @ unit
    deviation.diagonal().sub_(1)
    weight = (deviation * deviation).pow_((p - 2) / 2) if p > 2 else torch.ones_like(deviation)
    weight.mul_(deviation).mul_(p)
    by_unit = 2 * (unit @ weight)
    return (by_unit - unit * (unit * by_unit).sum(dim=0, keepdim=True)) / norms


def _eps_jl(kd, c):
    k, d = kd
    return np.sqrt(c * np.log(k) / d)


def _eps_adjusted(kd, c):
    k, d = kd
    return np.sqrt(c * np.log(np.maximum(k / d, 1.0)) / d)


def _eps_full(kd, c, a, b, cc):
    k, d = kd
    return np.sqrt(c * np.maximum(a * np.log(k) - np.log(d), 1e-12) ** b / d**cc)


FIT_FORMS = {
    "jl": (_eps_jl, [3.0]),
    "adjusted": (_eps_adjusted, [1.3]),
    "full": (_eps_full, [0.458, 1.067, 1.447, 0.972]),
}


def fit_formulas(cells: list[PackingCell]) -> dict:
    """Fit each form to the cells' eps*; constants with R^2, MAPE (%) and NRMSE (by the range)."""
    require(len(cells) >= 2, f"Fitting needs at least 2 cells; got {len(cells)}.")
    k = np.array([c.k for c in cells], dtype=float)
    d = np.array([c.d for c in cells], dtype=float)
    eps = np.array([c.eps_star for c in cells], dtype=float)
    fits = {}
    for name, (form, start) in FIT_FORMS.items():
        if len(cells) < len(start):
            fits[name] = {"error": f"needs at least {len(start)} cells"}
            continue
        try:
            params, _ = curve_fit(form, (k, d), eps, p0=start, bounds=(0, np.inf), maxfev=20000)
        except (RuntimeError, ValueError) as error:
            fits[name] = {"error": str(error)}
            continue
        predicted = form((k, d), *params)
        residual = eps - predicted
        total = ((eps - eps.mean()) ** 2).sum()
        span = eps.max() - eps.min()
        names = ["C"] if len(params) == 1 else ["C", "a", "b", "c"]
        fits[name] = {
            **dict(zip(names, map(float, params), strict=True)),
            "r2": float(1 - (residual**2).sum() / total) if total > 0 else math.nan,
            "mape": float(np.mean(np.abs(residual / eps)) * 100),
            "nrmse": float(np.sqrt(np.mean(residual**2)) / span) if span > 0 else math.nan,
        }
    return fits
