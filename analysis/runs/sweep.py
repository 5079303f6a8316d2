"""Sweeps: a plan of models x revisions x settings, run as one job per (model, revision).

Each job loads its checkpoint once and, for every seed of the plan, computes the per-layer PGA (all k
and CCR depths) and the held-out loss (``analysis.runs.series.measure_checkpoint``) and writes the record to
the result store under the hash of its spec. Whatever is already stored is skipped, so running the same
plan again computes nothing and an interrupted sweep resumes. A backend (``analysis.runs.backends``) runs
the jobs; this module decides what to run, retries failures a bounded number of times, and reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from analysis.data.corpus import Corpus, Sampling, load_corpus
from analysis.errors import InputError, require
from analysis.geometry.pga import PGASettings
from analysis.models.card import describe
from analysis.models.hub import resolve_hub
from analysis.models.refs import ModelRef, list_checkpoints
from analysis.progress import Progress, report
from analysis.runs.plan import SweepPlan
from analysis.runs.series import (
    CHECKPOINT_RECORD,
    SERIES_NAMESPACE,
    SERIES_VERSION,
    check_series,
    checkpoint_spec,
    measure_runs,
)
from analysis.runs.settings import pga_settings
from analysis.storage.cache import ResultCache, default_cache
from analysis.storage.store import ResultStore, StoreFull


@dataclass(frozen=True)
class Job:
    """One checkpoint and every (sampling, settings) run the plan asks of it."""

    ref: ModelRef
    corpus: Corpus
    runs: tuple[tuple[Sampling, PGASettings], ...]
    dtype: str
    device: str = "auto"
    cache_dir: str | None = None
    allow_pickle: bool = False

    @property
    def label(self) -> str:
        return self.ref.label

    def specs(self) -> list[dict]:
        return [checkpoint_spec(self.ref, self.dtype, self.corpus, s, p) for s, p in self.runs]


@dataclass
class JobOutcome:
    """What became of one job: ``stored`` (nothing to do), ``computed``, ``failed`` or ``not run``."""

    label: str
    status: str = "not run"
    attempts: int = 0
    errors: list[str] = field(default_factory=list)
    computed: int = 0


@dataclass
class SweepReport:
    store: str
    outcomes: list[JobOutcome]
    set_aside: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(o.status == status for o in self.outcomes)

    @property
    def ok(self) -> bool:
        return all(o.status in ("stored", "computed") for o in self.outcomes)

    def summary(self) -> str:
        """One line of counts, then each failure with the reason of every attempt."""
        lines = [f"{len(self.outcomes)} jobs: {self.count('computed')} computed, {self.count('stored')} already "
                 f"stored, {self.count('failed')} failed, {self.count('not run')} not run. Store: {self.store}"]
        for outcome in self.outcomes:
            if outcome.status in ("failed", "not run") and outcome.errors:
                lines.append(f"  {outcome.label} ({outcome.status}, {outcome.attempts} attempts):")
                lines += [f"    attempt {i + 1}: {error}" for i, error in enumerate(outcome.errors)]
        lines += [f"  set aside (unreadable or failed its checksum), computed again: {path}" for path in self.set_aside]
        return "\n".join(lines)


def _revisions(entry) -> list[str]:
    if entry.every_checkpoint:
        found = [c.revision for c in list_checkpoints(entry.model)]
        require(bool(found), f"{entry.model!r} has no training checkpoints, so 'revisions: all' names nothing.")
        return found
    return list(entry.revisions or [""])


def plan_jobs(plan: SweepPlan, dtype: str, device: str = "auto", cache_dir: str | None = None) -> list[Job]:
    """Resolve every model and revision of the plan (fetching only config files from the Hub) and check
    k and CCR against each model's width; InputError listing every problem at once."""
    problems, jobs = [], []
    try:
        corpus = load_corpus(plan.corpus)
    except InputError as error:
        problems.append(str(error))
        corpus = None
    for entry in plan.models:
        try:
            refs = check_series(entry.model, _revisions(entry), weights=False, allow_pickle=plan.allow_pickle)
            d = describe(refs[-1])["d_model"]
            ks = plan.ks or pga_settings(d).ks
            require(max(ks) < d, f"k = {max(ks)} is {'larger than' if max(ks) > d else 'equal to'} d = {d} of "
                                 f"{entry.model!r}: k must be below d (at k >= d, z is rounding noise).")
            require(max(plan.ccrs) < d, f"CCR depth {max(plan.ccrs)} must be below d = {d} of {entry.model!r}.")
        except InputError as error:
            problems.append(str(error))
            continue
        runs = tuple((Sampling(plan.n_tokens, seed=seed), pga_settings(d, ks, plan.ccrs, plan.n_null, seed))
                     for seed in plan.seeds)
        jobs += [Job(ref, corpus, runs, dtype, device, cache_dir, plan.allow_pickle) for ref in refs]
    require(not problems, "The plan cannot run: " + " ".join(problems))
    return list({job.label: job for job in jobs}.values())


def with_weights(ref: ModelRef, allow_pickle: bool = False) -> ModelRef:
    """A Hub reference resolved with ``weights=False`` gets its weights, by commit SHA."""
    if ref.kind != "hub":
        return ref
    _, folder = resolve_hub(ref.name, ref.identity, allow_pickle)
    return replace(ref, path=folder)


def run_job(job: Job, store_url: str, progress: Progress | None = None) -> int:
    """Compute and store every run of ``job`` that the store lacks; returns how many were computed."""
    store = ResultStore(store_url)
    pending = [(spec, run) for spec, run in zip(job.specs(), job.runs, strict=True)
               if not store.has(SERIES_NAMESPACE, SERIES_VERSION, spec, CHECKPOINT_RECORD)]
    if not pending:
        return 0
    cache = ResultCache(job.cache_dir) if job.cache_dir else default_cache()
    records = measure_runs(with_weights(job.ref, job.allow_pickle), job.device, job.dtype, job.corpus,
                           [run for _, run in pending], cache, progress)
    for (spec, _), record in zip(pending, records, strict=True):
        store.put(SERIES_NAMESPACE, SERIES_VERSION, spec, record, sum(record["seconds"].values()))
    return len(pending)


def is_stored(job: Job, store: ResultStore) -> bool:
    return all(store.has(SERIES_NAMESPACE, SERIES_VERSION, spec, CHECKPOINT_RECORD) for spec in job.specs())


def _reason(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    return f"{type(error).__name__}: {text[:300]}" if text else type(error).__name__


def _unseen(job: Job, store: ResultStore) -> InputError | None:
    """An error when a job reported success but its records are not in the store this machine reads."""
    if is_stored(job, store):
        return None
    return InputError(f"The job finished but its records are not in {store.url}: the workers write to a store "
                      "this machine cannot see; give --store a shared folder or URL.")


def run_sweep(plan: SweepPlan, backend, store: ResultStore, progress: Progress | None = None,
              cache_dir: str | None = None) -> SweepReport:
    """Run ``plan`` on ``backend`` (``analysis.runs.backends``), writing to ``store``.

    A job that raises is retried up to ``plan.retries`` more times, unless the error is an InputError
    (the same input fails the same way). A full store stops the sweep; what was written stays."""
    jobs = plan_jobs(plan, backend.concrete_dtype(plan.dtype), backend.device, cache_dir)
    outcomes = {job.label: JobOutcome(job.label) for job in jobs}
    todo = [job for job in jobs if not is_stored(job, store)]
    waiting = {job.label for job in todo}
    for job in jobs:
        if job.label not in waiting:
            outcomes[job.label].status = "stored"
    finished = len(jobs) - len(todo)
    report(progress, "jobs", finished, len(jobs))
    in_flight = {backend.submit(job, store.url, progress): job for job in todo}
    while in_flight:
        for handle, computed, error in backend.wait(list(in_flight), progress):
            job = in_flight.pop(handle)
            outcome = outcomes[job.label]
            outcome.attempts += 1
            error = error or _unseen(job, store)
            if error is None:
                outcome.status, outcome.computed = "computed", computed
            elif not isinstance(error, InputError) and outcome.attempts <= plan.retries:
                outcome.errors.append(_reason(error))
                in_flight[backend.submit(job, store.url, progress)] = job
                continue
            else:
                outcome.status = "failed"
                outcome.errors.append(_reason(error))
            if isinstance(error, StoreFull):
                backend.cancel(list(in_flight))
                for other in in_flight.values():
                    outcomes[other.label].errors.append("cancelled: the store is full")
                in_flight.clear()
            finished += 1
            report(progress, "jobs", finished, len(jobs))
            if not in_flight:
                break
    return SweepReport(store.url, [outcomes[job.label] for job in jobs], list(store.set_aside))
