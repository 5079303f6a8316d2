import os
import pickle
import shutil
import threading

import diskcache
import numpy as np
import pytest

from analysis.storage.cache import CacheRecomputed, ResultCache, pack, spec_key
from analysis.storage.codec import decode, encode


@pytest.fixture
def cache(tmp_path):
    return ResultCache(tmp_path / "c", size_limit_gb=0.5)


def test_second_call_computes_nothing(cache):
    calls = []

    def compute():
        calls.append(1)
        return np.arange(5.0)

    first = cache.get_or_compute("ns", 1, {"a": 1}, compute, object)
    second = cache.get_or_compute("ns", 1, {"a": 1}, compute, object)
    assert calls == [1] and first.computed and not second.computed
    np.testing.assert_array_equal(second.value, np.arange(5.0))
    assert second.provenance["spec"] == {"a": 1}
    assert {"computed_at", "libraries", "seconds"} <= set(second.provenance)
    assert set(second.provenance["libraries"]) >= {"torch", "transformers", "numpy"}


def test_holds_says_whether_an_entry_is_stored(cache):
    assert not cache.holds("ns", 1, {"a": 1})
    cache.put("ns", 1, {"a": 1}, np.arange(3.0))
    assert cache.holds("ns", 1, {"a": 1})
    assert not any(cache.holds(*other) for other in (("ns", 2, {"a": 1}), ("ns", 1, {"a": 2}), ("x", 1, {"a": 1})))


def test_every_spec_field_namespace_and_version_change_the_key():
    spec = {"model": {"identity": "abc", "dtype": "float32"}, "n": 512, "seed": 0}
    keys = {spec_key("hidden", 1, spec), spec_key("other", 1, spec), spec_key("hidden", 2, spec)}
    keys |= {spec_key("hidden", 1, {**spec, "n": 513}), spec_key("hidden", 1, {**spec, "seed": 1}),
             spec_key("hidden", 1, {**spec, "model": {"identity": "abd", "dtype": "float32"}}),
             spec_key("hidden", 1, {**spec, "model": {"identity": "abc", "dtype": "bfloat16"}})}
    assert len(keys) == 7
    assert spec_key("h", 1, {"b": 1, "a": 2}) == spec_key("h", 1, {"a": 2, "b": 1})


def test_specs_must_be_plain_json():
    with pytest.raises(TypeError):
        spec_key("ns", 1, {"model": object()})


def test_interrupted_computation_leaves_no_entry(cache):
    def interrupted():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cache.get_or_compute("ns", 1, {"a": 1}, interrupted, object)
    assert cache.get("ns", 1, {"a": 1}, object) is None
    assert cache.get_or_compute("ns", 1, {"a": 1}, lambda: 7, object).computed


def test_corrupted_entry_is_recomputed(cache):
    big = np.ones(100_000)  # large enough for diskcache to store it in its own file
    cache.get_or_compute("ns", 1, {"a": 1}, lambda: big, object)
    files = [p for p in cache.directory.rglob("*.val")]
    assert files
    for path in files:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    with pytest.warns(CacheRecomputed, match="checksum mismatch"):
        assert cache.get("ns", 1, {"a": 1}, object) is None
    again = cache.get_or_compute("ns", 1, {"a": 1}, lambda: big, object)
    assert again.computed and again.value.sum() == 100_000


def test_concurrent_callers_share_one_computation(cache):
    calls, results = [], []

    def slow():
        calls.append(1)
        threading.Event().wait(0.3)
        return 42

    threads = [threading.Thread(target=lambda: results.append(
        cache.get_or_compute("ns", 1, {"k": 1}, slow, object).value)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and results == [42, 42, 42]


class Planted:
    """Unpickling this runs a command: what a hostile entry in a shared cache folder would do."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_pickle_is_never_executed(cache, tmp_path):
    marker = tmp_path / "ran"
    key = spec_key("ns", 1, {"a": 1})
    with diskcache.Cache(str(cache.directory)) as plain:  # diskcache's own Disk pickles what it is given
        plain.set(key, Planted(marker))
    with pytest.warns(CacheRecomputed, match="unreadable"):
        assert cache.get("ns", 1, {"a": 1}, object) is None
    # the same payload inside a well-formed record, checksum and all
    payload = pickle.dumps(Planted(marker))
    with diskcache.Cache(str(cache.directory)) as plain:
        plain.set(key, pack(payload, {"spec": {"a": 1}}))
    with pytest.warns(CacheRecomputed, match="not a cache value.*pickled"):
        entry = cache.get_or_compute("ns", 1, {"a": 1}, lambda: 5, object)
    assert entry.computed and entry.value == 5
    assert not marker.exists()


def test_values_round_trip_without_pickle():
    from analysis.geometry.synthetic import planted_readout
    from analysis.runs.analyses import arrays_pga
    from analysis.runs.settings import pga_settings

    states, w_u = planted_readout(n=40)
    (result,) = arrays_pga(states, w_u, pga_settings(w_u.shape[1], (4,), n_null=5, n_bootstrap=10)).results
    value = {"layers": [result], "pair": (1, float("nan")), "ids": np.arange(3), "none": None}
    back = decode(encode(value))
    assert back["layers"][0].z == result.z and np.array_equal(back["layers"][0].null, result.null)
    assert back["pair"][0] == 1 and np.isnan(back["pair"][1]) and back["none"] is None
    with pytest.raises(TypeError, match="cannot be cached"):
        encode(Planted("x"))
    with pytest.raises(TypeError, match="object arrays"):
        encode(np.array([object()]))
    with pytest.raises(ValueError, match="not a cache value"):
        decode(pickle.dumps([1, 2]))


def test_a_corrupt_database_is_set_aside(tmp_path):
    folder = tmp_path / "c"
    ResultCache(folder).put("ns", 1, {"a": 1}, 3)
    (folder / "cache.db").write_bytes(b"this is not sqlite" * 100)
    with pytest.warns(CacheRecomputed, match="unreadable"):
        cache = ResultCache(folder)
    assert cache.get_or_compute("ns", 1, {"a": 1}, lambda: 4, object).value == 4
    assert list(folder.glob("cache.db.corrupt-*"))


def test_a_deleted_cache_folder_is_recreated(cache):
    cache.put("ns", 1, {"a": 1}, 1)
    shutil.rmtree(cache.directory)
    with pytest.warns(CacheRecomputed):
        entry = cache.get_or_compute("ns", 1, {"a": 2}, lambda: np.ones(100_000), object)
    assert entry.value.sum() == 100_000 and cache.get("ns", 1, {"a": 2}, object) is not None
    assert (cache.directory / "cache.db").exists()
