import errno
import gzip
import json
import multiprocessing

import pytest

from analysis.storage import store as store_module
from analysis.storage.store import ResultStore, StoreFull

SPEC = {"model": "m", "seed": 0}


def test_round_trip_first_writer_wins_and_nan_survives(tmp_path):
    store = ResultStore(tmp_path)
    assert store.get("ns", 1, SPEC, dict) is None and not store.has("ns", 1, SPEC, dict)
    assert store.put("ns", 1, SPEC, {"z": [1.5, float("nan")], "n": 3}) is True
    assert store.put("ns", 1, SPEC, {"z": [9.0], "n": 4}) is False  # immutable: the first value stays
    entry = store.get("ns", 1, SPEC, dict)
    assert entry.value["n"] == 3 and entry.value["z"][0] == 1.5 and entry.value["z"][1] != entry.value["z"][1]
    assert entry.provenance["spec"] == SPEC and "libraries" in entry.provenance
    assert [r["value"]["n"] for r in store.records("ns", 1, dict)] == [3]
    assert not list(tmp_path.rglob(".tmp-*"))


def test_get_or_compute_computes_once(tmp_path):
    store, calls = ResultStore(tmp_path), []
    first = store.get_or_compute("ns", 1, SPEC, lambda: calls.append(1) or {"value": (1, 2)}, dict)
    again = store.get_or_compute("ns", 1, SPEC, lambda: calls.append(1) or {"value": (3, 4)}, dict)
    assert calls == [1] and first.computed and not again.computed and again.value == {"value": [1, 2]}


def test_a_corrupted_file_is_set_aside_and_recomputed(tmp_path):
    store = ResultStore(tmp_path)
    store.put("ns", 1, SPEC, {"n": 1})
    path = tmp_path / store.path("ns", 1, SPEC).removeprefix(store.root + "/")
    record = json.loads(gzip.decompress(path.read_bytes()))
    record["value"]["n"] = 2  # tampered: the checksum no longer matches
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    assert store.get("ns", 1, SPEC, dict) is None
    assert not path.exists() and len(list(path.parent.glob("*.corrupt-*"))) == 1
    assert store.get_or_compute("ns", 1, SPEC, lambda: {"n": 1}, dict).value == {"n": 1}
    path.write_bytes(b"\x1f\x8b truncated")
    assert store.get("ns", 1, SPEC, dict) is None and list(store.records("ns", 1, dict)) == []


def test_object_store_urls_through_fsspec():
    store = ResultStore("memory://rg-test-store")
    assert not store.local
    assert store.put("ns", 1, SPEC, {"n": 1}) and not store.put("ns", 1, SPEC, {"n": 2})
    assert store.get("ns", 1, SPEC, dict).value == {"n": 1} and len(list(store.records("ns", 1, dict))) == 1


def _write_many(url: str, writer: int, barrier) -> None:
    store = ResultStore(url)
    barrier.wait()
    for i in range(30):
        store.put("ns", 1, {"i": i}, {"writer": writer, "payload": list(range(2000))})


def test_concurrent_writers_leave_one_complete_file_per_key(tmp_path):
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(4)
    workers = [context.Process(target=_write_many, args=(str(tmp_path), w, barrier)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    store = ResultStore(tmp_path)
    records = list(store.records("ns", 1, dict))
    assert len(records) == 30 and all(r["value"]["payload"] == list(range(2000)) for r in records)
    assert not list(tmp_path.rglob(".tmp-*")) and not list(tmp_path.rglob("*.corrupt-*"))


def test_a_full_disk_raises_store_full_and_leaves_nothing(tmp_path, monkeypatch):
    def full(path, data):
        with open(path, "wb") as handle:
            handle.write(data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store_module, "write_bytes", full)
    store = ResultStore(tmp_path)
    with pytest.raises(StoreFull, match="is full.*No space left.*run the same plan again"):
        store.put("ns", 1, SPEC, {"n": 1})
    assert not store.has("ns", 1, SPEC, dict) and not list(tmp_path.rglob(".tmp-*"))
