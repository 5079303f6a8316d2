import numpy as np
import pytest
import torch

from analysis.capacity.formulas import FULL, epsilon_for
from analysis.capacity.packing import (
    PackingCell,
    fit_formulas,
    learning_rate,
    loss_exponent,
    optimized_packing,
    packing_gradient,
    random_packing,
)
from analysis.errors import InputError


def test_exponent_and_learning_rate_rules():
    assert loss_exponent(2000, 128) == 8  # floor(40 / ln 128)
    assert loss_exponent(8000, 4096) == 6  # floor(50 / ln 4096)
    assert loss_exponent(8000, 1024) == 8  # floor(60 / ln 1024)
    assert loss_exponent(2000, 2) == 20  # capped
    assert (learning_rate(1024), learning_rate(1536)) == (0.005, 0.0025)


@pytest.mark.parametrize("p", [2, 3, 8])
def test_closed_form_gradient_equals_autograd(p):
    vectors = (3 * torch.randn(16, 40, dtype=torch.float64, generator=torch.Generator().manual_seed(p)))
    vectors.requires_grad_(True)
    unit = torch.nn.functional.normalize(vectors, dim=0)
    loss = (unit.T @ unit - torch.eye(40, dtype=torch.float64)).abs().pow(p).sum()
    (expected,) = torch.autograd.grad(loss, vectors)
    torch.testing.assert_close(packing_gradient(vectors.detach(), p), expected)


def test_random_packing_is_seeded_and_orthonormal_when_room():
    a, b = random_packing(300, 32, trials=5, seed=3), random_packing(300, 32, trials=5, seed=3)
    assert a.eps_star == b.eps_star and 0 < a.eps_star < 1
    assert random_packing(300, 32, trials=20, seed=3).eps_star <= a.eps_star  # min over more trials


@pytest.mark.slow
def test_optimised_packing_reaches_the_papers_value_and_beats_random():
    optimised = optimized_packing(2000, 128, seed=0)
    assert optimised.eps_star == pytest.approx(0.147, rel=0.10)
    assert random_packing(2000, 128, trials=50, seed=0).eps_star > 1.5 * optimised.eps_star


def test_short_optimisation_improves_on_its_start():
    start = random_packing(400, 32, trials=1, seed=0).eps_star
    assert optimized_packing(400, 32, steps=300, seed=0).eps_star < 0.8 * start


def test_fits_recover_planted_constants():
    k = np.repeat([2000, 4000, 8000, 16000, 32000], 4)
    d = np.tile([256, 512, 1024, 2048], 5)
    cells = [PackingCell(int(dd), int(kk), "random", float(np.sqrt(3.0295 * np.log(kk) / dd)))
             for kk, dd in zip(k, d, strict=True)]
    fits = fit_formulas(cells)
    assert fits["jl"]["C"] == pytest.approx(3.0295, rel=1e-6) and fits["jl"]["r2"] == pytest.approx(1.0)
    assert fits["jl"]["mape"] < 1e-6 and fits["jl"]["nrmse"] < 1e-6
    assert fits["adjusted"]["r2"] < 1.0  # the wrong form fits worse
    full_cells = [PackingCell(c.d, c.k, "optimized", epsilon_for(c.k, c.d, "full")) for c in cells]
    full = fit_formulas(full_cells)["full"]
    for name, value in FULL.items():
        assert full[name] == pytest.approx(value, rel=1e-4)
    assert full["r2"] == pytest.approx(1.0)


def test_cells_too_large_or_impossible():
    with pytest.raises(InputError, match="needs about .* GiB.*choose a smaller k"):
        optimized_packing(2_000_000, 64, steps=1, device="cpu")
    with pytest.raises(InputError, match="k must be at least 2"):
        random_packing(1, 64)
    with pytest.raises(InputError, match="d must be at least 1"):
        random_packing(10, 0)
