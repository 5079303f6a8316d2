"""The Ray backend on a local Ray instance (2 CPUs): same numbers as the local backend, a killed worker
retried into a complete store, a rerun that computes nothing, and an address nobody answers."""

import threading
import time

import psutil
import pytest

from analysis.errors import InputError
from analysis.runs.backends import LocalBackend, RayBackend, check_reachable
from analysis.runs.series import CHECKPOINT_RECORD, SERIES_VERSION
from analysis.runs.series import SERIES_NAMESPACE as NAMESPACE
from analysis.runs.sweep import run_sweep
from analysis.storage.store import ResultStore
from tests.test_cli import run_cli
from tests.test_sweep import plan_of

pytestmark = pytest.mark.slow  # starts a local Ray cluster

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=200 * 2**20, log_to_driver=False)
    yield
    ray.shutdown()


def metrics(store: ResultStore) -> dict:
    """Every stored number that a computation produced (timings and host left out)."""
    return {(r["value"]["revision"], r["spec"]["sampling"]["seed"]):
            (r["value"]["loss"], r["value"]["layers"], r["value"]["identity"])
            for r in store.records(NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD)}


def test_ray_matches_the_local_backend_exactly(local_ray, series, tmp_path):
    local, remote = ResultStore(tmp_path / "local"), ResultStore(tmp_path / "ray")
    assert run_sweep(plan_of(series), LocalBackend("cpu"), local, cache_dir=str(tmp_path / "cache-local")).ok
    progress = []
    report = run_sweep(plan_of(series), RayBackend(), remote, lambda *a: progress.append(a),
                       cache_dir=str(tmp_path / "cache-ray"))
    assert report.ok and report.count("computed") == 3, report.summary()
    assert len(metrics(remote)) == 6 and metrics(remote) == metrics(local)
    assert any("· hidden states" in stage or "· PGA by layer" in stage for stage, *_ in progress)


def kill_first_worker(name: str, killed: list, timeout: float = 120.0) -> None:
    """SIGKILL the first Ray worker whose title shows it running task ``name``."""
    deadline = time.time() + timeout
    while time.time() < deadline and not killed:
        for process in psutil.process_iter(["cmdline"]):
            if (process.info["cmdline"] or [""])[0].startswith(f"ray::{name}"):
                time.sleep(0.2)  # well inside the job: loading the model, its hidden states or PGA
                try:
                    if process.cmdline()[0].startswith(f"ray::{name}"):  # still on that job
                        process.kill()
                        killed.append(process.pid)
                        return
                except psutil.Error:
                    continue
        time.sleep(0.01)


def test_a_killed_worker_is_retried_and_the_store_is_complete(local_ray, series, tmp_path):
    store, killed = ResultStore(tmp_path / "store"), []
    killer = threading.Thread(target=kill_first_worker, args=("sweep_job", killed))
    killer.start()
    report = run_sweep(plan_of(series, retries=2), RayBackend(), store, cache_dir=str(tmp_path / "cache"))
    killer.join()
    assert killed, "no worker was seen running a job"
    retried = [o for o in report.outcomes if o.attempts == 2]
    assert report.ok and len(retried) == 1, report.summary()
    assert "Worker" in retried[0].errors[0] or "died" in retried[0].errors[0]
    # every record present and passing its checksum
    assert len(list(store.records(NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD))) == 6
    assert not list((tmp_path / "store").rglob("*.corrupt-*"))
    again = run_sweep(plan_of(series, retries=2), RayBackend(), store)
    assert again.count("stored") == 3 and again.count("computed") == 0


def test_an_address_nobody_answers(tmp_path, series):
    with pytest.raises(InputError, match="No Ray cluster answers at '127.0.0.1:1'"):
        check_reachable("127.0.0.1:1")
    with pytest.raises(InputError, match="not host:port"):
        check_reachable("somewhere")
    result = run_cli("sweep", "--model", str(series), "--backend", "ray", "--address", "127.0.0.1:1",
                     "--store", str(tmp_path))
    assert result.returncode == 2 and "No Ray cluster answers" in result.stderr
    assert "forward pass" not in result.stderr  # refused before any work
