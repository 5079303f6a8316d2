import math

import pytest

from analysis.capacity.formulas import (
    FORMULAS,
    capacity,
    capacity_curves,
    capacity_report,
    classify,
    epsilon_for,
    min_dimension,
)
from analysis.errors import InputError


def test_llama2_7b_worked_example():
    assert capacity(0.0645, 4096, "full") == pytest.approx(3.99e7, rel=0.01)
    assert capacity(0.0645, 4096, "jl_proven") == pytest.approx(8.4, rel=0.01)
    assert capacity(0.0645, 4096, "jl_fitted") == pytest.approx(277, rel=0.01)
    assert capacity(0.0645, 4096, "adjusted") == pytest.approx(4096 * math.exp(4096 * 0.0645**2 / 1.2934))


@pytest.mark.parametrize("formula", FORMULAS)
@pytest.mark.parametrize("d, eps", [(256, 0.15), (1024, 0.09), (4096, 0.0645)])
def test_forward_and_inverse_round_trip(formula, d, eps):
    k = capacity(eps, d, formula)
    assert epsilon_for(k, d, formula) == pytest.approx(eps, rel=1e-3)
    smallest = min_dimension(k, eps, formula)
    assert epsilon_for(k, smallest, formula) <= eps < epsilon_for(k, smallest - 1, formula)
    assert abs(smallest - d) <= 1


@pytest.mark.parametrize("formula", FORMULAS)
def test_capacity_grows_with_d_and_eps(formula):
    assert capacity(0.05, 1024, formula) < capacity(0.05, 2048, formula) < capacity(0.05, 4096, formula)
    assert capacity(0.05, 2048, formula) < capacity(0.07, 2048, formula) < capacity(0.09, 2048, formula)


def test_classes_and_the_zone_between():
    assert (classify(0.05), classify(0.25), classify(0.15)) == ("Class 2", "Class 1", "between classes")


def test_report_flags_extrapolation_and_gives_sensitivity():
    inside = capacity_report(1024, 0.047)
    assert 2000 <= inside.capacity["full"] <= 32000 and not inside.extrapolated
    far = capacity_report(8192, 0.07)
    assert far.extrapolated
    assert far.at_minus["full"] < far.capacity["full"] < far.at_plus["full"]
    out = far.to_json()
    assert set(out["capacity"]) == {"full", "adjusted", "jl_proven", "jl_fitted", "extrapolated", "status"}
    assert out["capacity"]["status"] == "estimated"


def test_six_orders_of_magnitude_between_005_and_009_at_8192():
    ratio = capacity(0.09, 8192, "full") / capacity(0.05, 8192, "full")
    assert math.log10(ratio) > 5.5  # docs/methods.md: about six orders of magnitude


def test_curves_are_monotone():
    curves = capacity_curves(2048)
    for name in FORMULAS:
        values = curves[name]
        assert all(b >= a for a, b in zip(values, values[1:], strict=False))


@pytest.mark.parametrize("call", [lambda: capacity(0.1, 0), lambda: capacity(0.0, 64), lambda: capacity(1.5, 64),
                                  lambda: epsilon_for(0, 64), lambda: min_dimension(-3, 0.1)])
def test_bad_values_are_named(call):
    with pytest.raises(InputError):
        call()
