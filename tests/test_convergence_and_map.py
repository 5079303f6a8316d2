import io
import os
import subprocess
import sys
import threading

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


@pytest.mark.slow  # UMAP compiles its numba kernels on first use (~30 s)
def test_token_map_is_deterministic_and_checks_size():
    states = np.random.default_rng(0).standard_normal((80, 16)).astype(np.float32)
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((16, 4)))[0]
    first, again = token_map(states, basis, seed=3), token_map(states, basis, seed=3)
    np.testing.assert_array_equal(first["coords"], again["coords"])
    share = first["share_in_readout"]
    assert first["coords"].shape == (80, 2) and ((share >= 0) & (share <= 1)).all()
    with pytest.raises(InputError, match="more points than neighbours"):
        token_map(states[:10], basis)


def test_umaps_epochs_are_reported_and_what_the_report_raises_stops_the_map(monkeypatch):
    """The epochs as progress reports (the dashboard's pause points), the map unchanged; a report that raises (work
    nobody wants any more) stops it there, and every other progress bar of the process goes on."""
    from tqdm import tqdm

    from analysis.geometry import token_map as maps

    monkeypatch.setattr(maps, "EPOCH_REPORTS_EVERY", 0.0)  # a report at every epoch
    states = np.random.default_rng(0).standard_normal((80, 16)).astype(np.float32)
    basis = np.linalg.qr(np.random.default_rng(1).standard_normal((16, 4)))[0]
    reports = []
    reported = token_map(states, basis, seed=3, progress=lambda *report: reports.append(report))
    np.testing.assert_array_equal(reported["coords"], token_map(states, basis, seed=3)["coords"])
    epochs = [done for stage, done, total in reports if stage == "epochs"]
    assert len(epochs) > 100 and epochs == sorted(epochs) and epochs[-1] == reports[-1][2]

    class Stopped(Exception):
        pass

    def stop_at_epoch_10(_stage, done, _total):
        if done >= 10:
            raise Stopped

    with pytest.raises(Stopped):
        token_map(states, basis, seed=3, progress=stop_at_epoch_10)
    bar = threading.Thread(target=lambda: list(tqdm(range(3), file=io.StringIO())))  # as a model load's bar
    bar.start()
    bar.join(10)
    assert not bar.is_alive()  # the stopped map left tqdm's lock free


@pytest.mark.slow  # two processes, the first compiling UMAP's functions (~10 s)
def test_the_next_process_maps_with_umaps_functions_from_the_disk_cache(tmp_path):
    """umap-learn leaves smooth_knn_dist uncached; the project caches it: the first process compiles it (no cache
    hit), the second reads it from the disk cache (numba counts one hit instead of compiling)."""
    script = ("import numpy as np; from analysis.geometry.token_map import token_map, umap_module; "
              "states = np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32); "
              "token_map(states, np.eye(8)[:, :2]); "
              "print(sum(umap_module().umap_.smooth_knn_dist.stats.cache_hits.values()))")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    hits = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           check=True).stdout.split()[-1] for _ in range(2)]
    assert hits == ["0", "1"]


def test_token_classes():
    assert [token_class(t) for t in [" the", "42", " ,", "  ", "a1"]] == [
        "word", "number", "punctuation", "whitespace", "other"]


def test_the_token_map_preview_is_the_plane_of_the_two_components_after_ccr():
    rng = np.random.default_rng(0)
    n, d = 120, 16
    side = np.repeat([-1.0, 1.0], n // 2)  # two planted groups, apart along e1
    states = 0.3 * rng.standard_normal((n, d))
    states[:, 0] += 20 * rng.standard_normal(n)  # the dominant direction CCR-1 removes
    states[:, 1] += 3 * side
    basis = np.linalg.qr(rng.standard_normal((d, 4)))[0]
    plane = token_map(states, basis, ccr=1, method="pca")["coords"]
    centred = states - states.mean(0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    corrected = centred - np.outer(centred @ vt[0], vt[0])
    reference = corrected @ np.linalg.svd(corrected, full_matrices=False)[2][:2].T  # plain PCA of the corrected
    np.testing.assert_allclose(np.abs(plane), np.abs(reference), atol=1e-8)
    gap = abs(plane[side > 0, 0].mean() - plane[side < 0, 0].mean())
    assert gap > 10 * plane[side > 0, 0].std()  # the groups lie apart on the first axis
    unplanted = token_map(states - np.outer(3 * side, np.eye(d)[1]), basis, ccr=1, method="pca")["coords"]
    assert abs(unplanted[side > 0, 0].mean() - unplanted[side < 0, 0].mean()) < 0.5 * unplanted[:, 0].std()
    with pytest.raises(InputError, match="Unknown map method"):
        token_map(states, basis, method="tsne")


def test_a_model_token_map_is_previewed_then_stored(neox_folder, tmp_path):
    from analysis.data.corpus import Sampling, builtin_corpus
    from analysis.runs import analyses
    from analysis.runs.settings import Compute, ModelChoice
    from analysis.storage.cache import ResultCache

    cache, cpu = ResultCache(tmp_path), Compute(device="cpu")
    loaded = analyses.open_model(ModelChoice(str(neox_folder)), cpu)
    asked = (loaded, builtin_corpus(), Sampling(96, window=32), 1, 1)
    assert analyses.model_token_map(*asked, compute=cpu, cache=cache, stored_only=True) is None
    preview = analyses.model_token_map(*asked, compute=cpu, cache=cache, preview=True)
    assert preview.preview and "Preview" in preview.describe() and "Preview" in preview.figure().layout.title.text
    assert analyses.model_token_map(*asked, compute=cpu, cache=cache, stored_only=True) is None  # not stored
    mapped = analyses.model_token_map(*asked, compute=cpu, cache=cache)
    stored = analyses.model_token_map(*asked, compute=cpu, cache=cache, stored_only=True)
    assert not stored.preview and "UMAP" in stored.figure().layout.title.text
    np.testing.assert_array_equal(stored.coords, mapped.coords)
    np.testing.assert_array_equal(stored.pc1, preview.pc1)  # the colourings do not depend on the map
    assert stored.tokens == preview.tokens
