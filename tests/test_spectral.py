import numpy as np
import pytest

from analysis.geometry.spectral import alpha_req, condition_number, isoscore, rankme


def test_isoscore_extremes():
    assert isoscore(np.ones(50), 50) == pytest.approx(1.0)
    assert isoscore(np.r_[1.0, np.zeros(49)], 50) == pytest.approx(0.0, abs=1e-12)
    half = isoscore(np.r_[np.ones(25), np.zeros(25)], 50)
    assert 0.3 < half < 0.7
    assert isoscore(7.0 * np.ones(50), 50) == pytest.approx(1.0)  # scale-invariant


def test_rankme_counts_equal_directions():
    assert rankme(np.ones(10)) == pytest.approx(10)
    assert rankme(np.r_[np.ones(3), np.zeros(7)]) == pytest.approx(3)


def test_alpha_req_recovers_a_power_law():
    ranks = np.arange(1, 301)
    assert alpha_req(ranks ** -1.3) == pytest.approx(1.3)
    assert alpha_req(ranks ** -0.7, fit=(10, 200)) == pytest.approx(0.7)


def test_condition_number_ignores_numerical_zeros():
    variances = np.r_[100.0, 25.0, 1.0, 1e-14, 0.0]
    assert condition_number(variances) == pytest.approx(10.0)
