import json

import pytest

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.errors import InputError
from analysis.geometry.pga import PGASettings
from analysis.results.collections import CheckpointResult
from analysis.runs import series as series_module
from analysis.runs.backends import LocalBackend
from analysis.runs.plan import parse_plan, read_plan
from analysis.runs.series import CHECKPOINT_RECORD, SERIES_VERSION, training_sweep
from analysis.runs.series import SERIES_NAMESPACE as NAMESPACE
from analysis.runs.sweep import run_sweep
from analysis.storage.cache import ResultCache
from analysis.storage.store import ResultStore
from tests.conftest import STEPS
from tests.test_cli import run_cli

PLAN = {"corpus": "builtin", "n_tokens": 48, "k": [8], "ccr": [0, 1], "null_subspaces": 10, "seeds": [0, 1],
        "dtype": "float32", "retries": 1}


def plan_of(series, **changes):
    return parse_plan({**PLAN, "models": [{"model": str(series), "revisions": "all"}], **changes})


def test_plan_files_and_every_problem_at_once(tmp_path):
    path = tmp_path / "plan.yaml"
    path.write_text("models:\n  - model: some/model\n    revisions: [step1, step2]\nk: [50, 100]\nseeds: 3\n")
    plan = parse_plan(read_plan(path))
    assert plan.models[0].revisions == ("step1", "step2") and plan.ks == (50, 100) and plan.seeds == (3,)
    with pytest.raises(InputError) as error:
        parse_plan({"models": [], "k": [0], "dtype": "int8", "colour": "red", "n_tokens": [100, 200],
                    "allow_pickle": "yes"})
    message = str(error.value)
    for fragment in ("Unknown key 'colour'", "non-empty list of models", "k must be an integer >= 1",
                     "dtype must be one of", "n_tokens must be one integer", "allow_pickle must be true or false"):
        assert fragment in message
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(InputError, match="not valid json"):
        read_plan(tmp_path / "bad.json")


def test_unknown_models_and_revisions_are_listed_before_anything_runs(series, tmp_path):
    store = ResultStore(tmp_path / "store")
    plan = parse_plan({**PLAN, "models": [{"model": str(tmp_path / "nowhere")},
                                          {"model": str(series), "revisions": ["checkpoint-10", "checkpoint-7"]},
                                          {"model": str(series), "revisions": "all"}], "k": [64]})
    with pytest.raises(InputError) as error:
        run_sweep(plan, LocalBackend("cpu"), store)
    message = str(error.value)
    assert "nowhere" in message and "'checkpoint-7' is not in" in message and "k = 64 is larger than d = 32" in message
    assert not (tmp_path / "store").exists()


def test_local_sweep_stores_every_run_and_a_rerun_computes_nothing(series, tmp_path):
    store, calls = ResultStore(tmp_path / "store"), []
    report = run_sweep(plan_of(series), LocalBackend("cpu"), store, lambda *a: calls.append(a),
                       cache_dir=str(tmp_path / "cache"))
    assert report.ok and report.count("computed") == 3, report.summary()
    records = list(store.records(NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD))
    assert len(records) == 3 * 2  # checkpoints x seeds
    assert {r["value"]["revision"] for r in records} == {f"checkpoint-{s}" for s in STEPS}
    assert {(x["k"], x["ccr"]) for x in records[0]["value"]["layers"]} == {(8, 0), (8, 1)}
    assert any(stage.endswith("· PGA by layer") for stage, *_ in calls)  # per-job progress
    assert calls[-1] == ("jobs", 3, 3)
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*.json.gz")}
    again = run_sweep(plan_of(series), LocalBackend("cpu"), store)
    assert again.count("stored") == 3 and again.count("computed") == 0
    assert files == {p: p.stat().st_mtime_ns for p in (tmp_path / "store").rglob("*.json.gz")}
    # the dashboard's own across-training call finds the sweep's records: nothing recomputed
    stages = []
    results = training_sweep(str(series), [f"checkpoint-{s}" for s in STEPS], builtin_corpus(), Sampling(48, seed=1),
                             PGASettings(ks=(8,), ccrs=(0, 1), n_null=10, seed=1), "cpu",
                             lambda stage, *_: stages.append(stage), ResultCache(tmp_path / "other"), store,
                             dtype="float32").results
    assert set(stages) == {"checkpoints"} and [r.step for r in results] == list(STEPS)
    assert isinstance(results[0], CheckpointResult) and results[0].layers[0].null.shape == (10,)


def test_failures_are_retried_a_bounded_number_of_times(series, tmp_path, monkeypatch):
    real, attempts = series_module.measure_checkpoint, []

    def flaky(loaded, *args, **kwargs):
        attempts.append(loaded.ref.revision)
        if loaded.ref.revision == "checkpoint-10" or len(attempts) == 1:
            raise RuntimeError("CUDA error: an illegal memory access")
        return real(loaded, *args, **kwargs)

    monkeypatch.setattr(series_module, "measure_checkpoint", flaky)
    report = run_sweep(plan_of(series, retries=2), LocalBackend("cpu"), ResultStore(tmp_path / "store"),
                       cache_dir=str(tmp_path / "cache"))
    outcome = {o.label.split("@")[1].split()[0]: o for o in report.outcomes}
    assert outcome["checkpoint-0"].status == "computed" and outcome["checkpoint-0"].attempts == 2
    assert outcome["checkpoint-10"].status == "failed" and outcome["checkpoint-10"].attempts == 3
    assert outcome["checkpoint-20"].attempts == 1 and not report.ok
    assert "attempt 3: RuntimeError: CUDA error" in report.summary()


def test_input_errors_are_not_retried_and_a_full_store_stops_the_sweep(series, tmp_path, monkeypatch):
    def short_text(*args, **kwargs):
        raise InputError("The text is too short for 48 tokens.")

    monkeypatch.setattr(series_module, "measure_checkpoint", short_text)
    report = run_sweep(plan_of(series), LocalBackend("cpu"), ResultStore(tmp_path / "a"), cache_dir=str(tmp_path))
    assert [o.attempts for o in report.outcomes] == [1, 1, 1]
    monkeypatch.undo()

    from analysis.storage import store as store_module

    def full(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store_module, "write_bytes", full)
    report = run_sweep(plan_of(series), LocalBackend("cpu"), ResultStore(tmp_path / "b"), cache_dir=str(tmp_path))
    assert [o.status for o in report.outcomes] == ["failed", "not run", "not run"]
    assert "StoreFull" in report.summary() and "cancelled: the store is full" in report.summary()


@pytest.mark.slow  # two CLI sweeps over a checkpoint series (~25 s)
def test_cli_sweep_twice(series, tmp_path):
    args = ["sweep", "--model", str(series), "--revisions", "checkpoint-0,checkpoint-20", "--n-tokens", "48",
            "--k", "8", "--ccr", "1", "--null-subspaces", "10", "--dtype", "float32", "--device", "cpu",
            "--store", str(tmp_path / "store"), "--json", str(tmp_path / "report.json")]
    planned = run_cli(*args, "--dry-run")
    assert planned.returncode == 0 and "2 jobs: 2 to run, 0 already stored" in planned.stderr
    assert planned.stdout.count("to run  ") == 2 and not (tmp_path / "store").exists()
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr
    assert "2 jobs: 2 computed, 0 already stored" in first.stderr
    second = run_cli(*args)
    assert "2 jobs: 0 computed, 2 already stored" in second.stderr
    assert "2 jobs: 0 to run, 2 already stored" in run_cli(*args, "--dry-run").stderr
    assert json.loads((tmp_path / "report.json").read_text())["ok"] is True
    bad = run_cli("sweep", "--model", str(tmp_path / "missing"), "--store", str(tmp_path / "store"))
    assert bad.returncode == 2 and "no such file or folder" in bad.stderr


def test_records_written_where_this_machine_cannot_see_them_are_a_failure(series, tmp_path):
    class ElsewhereBackend(LocalBackend):  # workers on another machine with their own, unshared store
        def submit(self, job, store_url, progress=None):
            return super().submit(job, str(tmp_path / "worker-local"), progress)

    report = run_sweep(plan_of(series), ElsewhereBackend("cpu"), ResultStore(tmp_path / "store"),
                       cache_dir=str(tmp_path / "cache"))
    assert report.count("failed") == 3 and "give --store a shared folder" in report.summary()
    assert [o.attempts for o in report.outcomes] == [1, 1, 1]


def test_two_sweeps_writing_one_store_at_once(series, tmp_path):
    import subprocess
    import sys

    from tests.test_cli import ROOT

    args = [sys.executable, "-m", "analysis", "sweep", "--model", str(series), "--revisions", "all", "--n-tokens",
            "48", "--k", "8", "--ccr", "0,1", "--null-subspaces", "10", "--dtype", "float32", "--device", "cpu",
            "--store", str(tmp_path / "store")]
    sweeps = [subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    outputs = [sweep.communicate(timeout=600) for sweep in sweeps]
    assert [sweep.returncode for sweep in sweeps] == [0, 0], [err for _, err in outputs]
    records = list(ResultStore(tmp_path / "store").records(NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD))
    assert len(records) == 3 and {r["value"]["revision"] for r in records} == {f"checkpoint-{s}" for s in STEPS}
    assert not list((tmp_path / "store").rglob(".tmp-*")) and not list((tmp_path / "store").rglob("*.corrupt-*"))


def test_a_hub_model_is_planned_from_its_config_and_swept_by_commit(neox_folder, tmp_path, monkeypatch):
    from huggingface_hub import constants

    from tests.test_refs import SHA, _fake_hub_cache

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(_fake_hub_cache(tmp_path / "hf", neox_folder, ref="step1000")))
    plan = parse_plan({**PLAN, "models": [{"model": "acme/tiny", "revisions": ["step1000"]}], "seeds": [0]})
    store = ResultStore(tmp_path / "store")
    report = run_sweep(plan, LocalBackend("cpu"), store, cache_dir=str(tmp_path / "cache"))
    assert report.ok, report.summary()
    (record,) = [r["value"] for r in store.records(NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD)]
    assert (record["name"], record["revision"], record["step"], record["identity"]) == ("acme/tiny", "step1000",
                                                                                        1000, SHA)
