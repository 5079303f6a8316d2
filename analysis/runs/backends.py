"""Where sweep jobs run: in this process (``local``) or on a Ray cluster (``ray``, optional).

A backend submits a job and hands back a handle; ``wait`` returns finished ``(handle, computed, error)``
triples. Retries and the failure summary live in ``analysis.runs.sweep``, the same for both backends; Ray
places the jobs (one GPU each when the cluster has GPUs, one CPU otherwise) and reports a dead worker
as an error, which the sweep retries like any other.
"""

from __future__ import annotations

import itertools
import socket
from urllib.parse import urlparse

from analysis.errors import InputError
from analysis.models.devices import dtype_name, pick_device, pick_dtype
from analysis.progress import Progress
from analysis.runs.sweep import Job, run_job

CONNECT_TIMEOUT_S = 5.0


def job_stage(label: str, stage: str) -> str:
    """How one job's stage is named in the sweep's progress."""
    return f"{label} · {stage}"


def _job_progress(job: Job, progress: Progress | None) -> Progress | None:
    if progress is None:
        return None
    return lambda stage, done, total: progress(job_stage(job.label, stage), done, total)


class LocalBackend:
    """Runs each job in this process, one after another, on ``device``."""

    def __init__(self, device: str = "auto"):
        self.device = device
        self._queue: dict[int, tuple[Job, str, Progress | None]] = {}
        self._handles = itertools.count()

    def concrete_dtype(self, name: str) -> str:
        return dtype_name(pick_dtype(name, pick_device(self.device)))

    def submit(self, job: Job, store_url: str, progress: Progress | None = None) -> int:
        handle = next(self._handles)
        self._queue[handle] = (job, store_url, progress)
        return handle

    def wait(self, handles: list, progress: Progress | None = None) -> list[tuple]:
        handle = handles[0]
        job, store_url, job_progress = self._queue.pop(handle)
        try:
            return [(handle, run_job(job, store_url, _job_progress(job, job_progress)), None)]
        except Exception as error:  # any failure of a job is reported, and retried unless it is bad input
            return [(handle, 0, error)]

    def cancel(self, handles: list) -> None:
        for handle in handles:
            self._queue.pop(handle, None)


def check_reachable(address: str) -> None:
    """InputError unless something listens at a ``host:port`` or ``ray://host:port`` address."""
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    if not parsed.hostname or not parsed.port:
        raise InputError(f"Ray address {address!r} is not host:port, ray://host:port, 'auto' or 'local'.")
    try:
        socket.create_connection((parsed.hostname, parsed.port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as error:
        raise InputError(f"No Ray cluster answers at {address!r} ({error.strerror or error}). Start one with "
                         "`ray start --head`, check the address and firewall, or use --backend local.") from None


def sweep_job(job: Job, store_url: str, board) -> int:
    """The Ray task: one job, its progress sent to the driver's board."""
    progress = None
    if board is not None:
        def progress(stage: str, done: int, total: int) -> None:
            board.report.remote(job.label, stage, done, total)
    return run_job(job, store_url, progress)


def probe_dtype(name: str) -> str:
    """The dtype ``name`` means on a worker with a job's resources."""
    return dtype_name(pick_dtype(name, pick_device("auto")))


class ProgressBoard:
    """A Ray actor holding each job's latest progress until the driver collects it."""

    def __init__(self):
        self.latest: dict = {}

    def report(self, label: str, stage: str, done: int, total: int) -> None:
        self.latest[label, stage] = (done, total)

    def drain(self) -> dict:
        latest, self.latest = self.latest, {}
        return latest


class RayBackend:
    """Runs jobs as Ray tasks: on the cluster at ``address``, or a Ray instance already started in this
    process, or a new local one. One GPU per job when the cluster has GPUs, else one CPU."""

    def __init__(self, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise InputError("The ray backend needs Ray: pip install 'ray==2.60.0' (or use --backend local).") from None
        self.ray = ray
        if not ray.is_initialized():
            if address not in (None, "auto", "local"):
                check_reachable(address)
            try:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            except (ConnectionError, RuntimeError, TimeoutError) as error:
                raise InputError(f"Cannot connect to the Ray cluster at {address!r}: {error}") from None
        gpus = ray.cluster_resources().get("GPU", 0)
        self.resources = {"num_gpus": 1, "num_cpus": 1} if gpus else {"num_cpus": 1}
        self.device = "cuda" if gpus else "cpu"
        self._task = ray.remote(sweep_job).options(max_retries=0, **self.resources)
        self._board = ray.remote(num_cpus=0)(ProgressBoard).remote()

    def concrete_dtype(self, name: str) -> str:
        return self.ray.get(self.ray.remote(probe_dtype).options(**self.resources).remote(name))

    def submit(self, job: Job, store_url: str, progress: Progress | None = None):
        return self._task.remote(job, store_url, self._board if progress else None)

    def wait(self, handles: list, progress: Progress | None = None) -> list[tuple]:
        ready, _ = self.ray.wait(handles, num_returns=1, timeout=1.0)
        if progress is not None:
            for (label, stage), (done, total) in self.ray.get(self._board.drain.remote()).items():
                progress(job_stage(label, stage), done, total)
        finished = []
        for handle in ready:
            try:
                finished.append((handle, self.ray.get(handle), None))
            except self.ray.exceptions.RayTaskError as error:
                finished.append((handle, 0, error.cause if isinstance(error.cause, BaseException) else error))
            except self.ray.exceptions.RayError as error:  # a dead worker or node, an object lost
                finished.append((handle, 0, error))
        return finished

    def cancel(self, handles: list) -> None:
        for handle in handles:
            self.ray.cancel(handle, force=True)


def make_backend(name: str, address: str | None = None, device: str = "auto"):
    """``local`` or ``ray``."""
    if name == "local":
        return LocalBackend(device)
    if name == "ray":
        return RayBackend(address)
    raise InputError(f"Backend {name!r} is not one of local, ray.")
