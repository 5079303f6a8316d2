import numpy as np
import pytest

from analysis.errors import InputError
from analysis.geometry.convergence import convergence, matched_pairs
from analysis.geometry.readout import readout_basis
from analysis.geometry.token_map import token_class, token_map


def pooled(seed=0, layers=3, units=40, d=24):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((layers, units, d)) + rng.standard_normal((1, 1, d))


def test_a_model_against_itself_and_a_rotation_of_itself_converges_to_one():
    a = pooled()
    basis = readout_basis(np.random.default_rng(1).standard_normal((100, 24)))
    for result in convergence(a, a, basis, basis, k=8, n_null=5):
        assert result.full == pytest.approx(1.0) and result.readout == pytest.approx(1.0)
    rotation, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((24, 24)))
    rotated_basis = readout_basis(np.random.default_rng(1).standard_normal((100, 24)) @ rotation)
    for result in convergence(a, a @ rotation, basis, rotated_basis, k=8, n_null=5):
        assert result.full == pytest.approx(1.0) and result.readout == pytest.approx(1.0, abs=1e-9)


def test_unrelated_models_do_not_converge():
    a, b = pooled(0), pooled(1, d=16)
    results = convergence(a, b, readout_basis(a[0]), readout_basis(b[0]), k=8, n_null=10)
    assert all(abs(r.full) < 0.3 for r in results) and len(results[0].null) == 10


def test_matched_depth_and_no_shared_units():
    assert matched_pairs(3, 5) == [(0, 0), (1, 2), (2, 4)]
    with pytest.raises(InputError, match="same units"):
        convergence(pooled(units=10), pooled(units=12), None, None)


def test_token_map_is_deterministic_and_checks_size():
    states = np.random.default_rng(0).standard_normal((80, 16)).astype(np.float32)
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((16, 4)))[0]
    first, again = token_map(states, basis, seed=3), token_map(states, basis, seed=3)
    np.testing.assert_array_equal(first["coords"], again["coords"])
    share = first["share_in_readout"]
    assert first["coords"].shape == (80, 2) and ((share >= 0) & (share <= 1)).all()
    with pytest.raises(InputError, match="more points than neighbours"):
        token_map(states[:10], basis)


def test_token_classes():
    assert [token_class(t) for t in [" the", "42", " ,", "  ", "a1"]] == [
        "word", "number", "punctuation", "whitespace", "other"]
