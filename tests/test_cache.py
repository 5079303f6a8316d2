import threading

import numpy as np
import pytest

from analysis.storage.cache import ResultCache, spec_key


@pytest.fixture
def cache(tmp_path):
    return ResultCache(tmp_path / "c", size_limit_gb=0.5)


def test_second_call_computes_nothing(cache):
    calls = []

    def compute():
        calls.append(1)
        return np.arange(5.0)

    first = cache.get_or_compute("ns", 1, {"a": 1}, compute)
    second = cache.get_or_compute("ns", 1, {"a": 1}, compute)
    assert calls == [1] and first.computed and not second.computed
    np.testing.assert_array_equal(second.value, np.arange(5.0))
    assert second.provenance["spec"] == {"a": 1}
    assert {"computed_at", "libraries", "seconds"} <= set(second.provenance)
    assert set(second.provenance["libraries"]) >= {"torch", "transformers", "numpy"}


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
        cache.get_or_compute("ns", 1, {"a": 1}, interrupted)
    assert cache.get("ns", 1, {"a": 1}) is None
    assert cache.get_or_compute("ns", 1, {"a": 1}, lambda: 7).computed


def test_corrupted_entry_is_recomputed(cache):
    big = np.ones(100_000)  # large enough for diskcache to store it in its own file
    cache.get_or_compute("ns", 1, {"a": 1}, lambda: big)
    files = [p for p in cache.directory.rglob("*.val")]
    assert files
    for path in files:
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    assert cache.get("ns", 1, {"a": 1}) is None
    again = cache.get_or_compute("ns", 1, {"a": 1}, lambda: big)
    assert again.computed and again.value.sum() == 100_000


def test_concurrent_callers_share_one_computation(cache):
    calls, results = [], []

    def slow():
        calls.append(1)
        threading.Event().wait(0.3)
        return 42

    threads = [threading.Thread(target=lambda: results.append(
        cache.get_or_compute("ns", 1, {"k": 1}, slow).value)) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and results == [42, 42, 42]
