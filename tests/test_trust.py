"""Careless and hostile input: what a hosted dashboard reads, what is cached, and one clear line for
every failure (each case once failed: it read a server file, kept a wrong result, or was a traceback)."""

import gzip
import json
import os
import shutil
import threading

import diskcache
import numpy as np
import pytest
from gguf import GGUFWriter

from analysis.errors import InputError
from analysis.models.loading import remove_stale_partials
from analysis.models.refs import check_gguf, resolve
from analysis.storage.paths import cache_dir
from tests.test_app import charts, run_page, shown
from tests.test_cli import run_cli
from tests.test_sweep import PLAN

FAST = ("--n-tokens", "48", "--window", "32", "--device", "cpu")


# --- a public instance reads nothing it should not ---------------------------------------------------------------

def everything_shown(app) -> str:
    texts = [shown(e.value) for kind in ("error", "warning", "info", "caption", "markdown") for e in getattr(app, kind)]
    return json.dumps(texts) + json.dumps(charts(app))


def test_url_paths_outside_the_allowed_roots_are_refused(allowed):
    app = run_page("pages/token_map.py", model=allowed / "model", corpus="/etc/passwd", n_tokens=128)
    assert not app.exception and not charts(app)
    assert str(allowed) in shown(app.error[0].value) and "root:" not in everything_shown(app)
    refusals = []
    for path in ("/etc", "/no/such/place", str(allowed / ".." / ".." / "etc")):
        app = run_page("pages/triage.py", model=path)
        assert not app.exception and not charts(app)
        refusals.append(shown(app.error[0].value).replace(repr(path), "PATH"))
    assert len(set(refusals)) == 1 and str(allowed) in refusals[0]  # exists or not: the same words
    app = run_page("pages/triage.py", model=allowed / "model", n_tokens=128)
    assert not app.exception and not app.error and charts(app)  # inside the root it works


def test_a_link_out_of_an_allowed_root_is_refused(allowed, tmp_path):
    (allowed / "escape").symlink_to("/etc")
    app = run_page("pages/triage.py", model=allowed / "escape")
    assert not app.exception and "opens files only under" in app.error[0].value


def test_the_cli_reads_any_path(neox_folder):
    result = run_cli("model-info", str(neox_folder), env={"RG_ALLOWED_ROOTS": "/nowhere"})
    assert result.returncode == 0, result.stderr


# --- demo mode spends no one's CPU without a limit ----------------------------------------------------------------

def test_demo_mode_has_no_training_and_a_bounded_seed(tiny_models, monkeypatch):
    monkeypatch.setenv("RG_DEMO", "1")
    app = run_page("pages/training.py", seed=123)
    assert not app.exception
    assert not [b for b in app.button if "Train" in b.label] and "Training is off" in everything_shown(app)
    seed = next(n for n in app.sidebar.number_input if n.label == "Seed")
    assert seed.max == 9 and seed.value == 9


def test_demo_mode_runs_one_computation_at_a_time(monkeypatch):
    from dashboard.compute import Bar, policy
    from tests.test_live import waiting

    monkeypatch.setenv("RG_DEMO", "1")
    lock, inside, peak, entered = threading.Lock(), [], [], threading.Event()

    def computation(number):
        with Bar("work"):
            with lock:
                inside.append(number)
                peak.append(len(inside))
            entered.set()
            if number == 0:
                waiting(policy(), 2)  # the other two have asked meanwhile: they wait instead of running
            with lock:
                inside.remove(number)

    first = threading.Thread(target=computation, args=(0,))
    first.start()
    assert entered.wait(30)
    others = [threading.Thread(target=computation, args=(n,)) for n in (1, 2)]
    for thread in others:
        thread.start()
    for thread in [first, *others]:
        thread.join()
    assert peak == [1, 1, 1]


# --- nothing wrong is ever cached ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", ["-1", "0"])
def test_batch_size_below_one_is_refused(neox_folder, tmp_path, size):
    result = run_cli("hidden-states", str(neox_folder), *FAST, "--batch-size", size, "--out", str(tmp_path / "h.npy"))
    assert result.returncode == 2 and "batch size must be a whole number of at least 1" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "h.npy").exists()


def test_the_tokenizer_is_part_of_the_identity(series, tmp_path):
    run = tmp_path / "run"
    for name in ("checkpoint-0", "checkpoint-10"):
        shutil.copytree(series / name, run / name)
    before = resolve(str(run), "checkpoint-10").identity
    config = json.loads((run / "checkpoint-10" / "tokenizer_config.json").read_text())
    (run / "checkpoint-10" / "tokenizer_config.json").write_text(json.dumps({**config, "bos_token": "<x>"}))
    assert resolve(str(run), "checkpoint-10").identity != before
    assert resolve(str(run), "checkpoint-0").identity != before


def test_a_checkpoint_without_a_tokenizer_uses_its_runs_or_the_one_given(series, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(series / "checkpoint-10", run / "checkpoint-10")
    tokenizer_files = [p for p in (run / "checkpoint-10").iterdir() if "token" in p.name or p.name == "vocab.json"]
    assert tokenizer_files
    for path in tokenizer_files:
        path.unlink()
    out = tmp_path / "h.npy"
    missing = run_cli("hidden-states", str(run), *FAST, "--out", str(out))
    assert missing.returncode == 2 and "has no tokenizer" in missing.stderr and "corpus allows" not in missing.stderr
    given = run_cli("hidden-states", str(run), *FAST, "--tokenizer", str(series / "checkpoint-0"), "--out", str(out))
    assert given.returncode == 0, given.stderr
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (series / "checkpoint-0" / name).exists():
            shutil.copy(series / "checkpoint-0" / name, run / name)
    from_run = run_cli("hidden-states", str(run), *FAST, "--out", str(out))
    assert from_run.returncode == 0, from_run.stderr
    assert resolve(str(run)).tokenizer_path == run


def test_duplicate_checkpoints_keep_their_own_step_and_revision(series, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(series, run)
    shutil.copytree(run / "checkpoint-10", run / "checkpoint-30")  # a copy under a later step
    listed = json.loads(run_cli("checkpoints", str(run), "--json").stdout)["checkpoints"]
    assert [(c["step"], c["revision"], c["duplicate_of"]) for c in listed] == [
        (0, "checkpoint-0", None), (10, "checkpoint-10", None), (20, "checkpoint-20", None),
        (30, "checkpoint-30", "checkpoint-10")]
    assert all(c["identity"].startswith("sha256:") for c in listed)
    result = run_cli("training-sweep", str(run), "--revisions", "checkpoint-10,checkpoint-30", *FAST, "--n-null", "5",
                     "--json", str(tmp_path / "s.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "s.json").read_text())["checkpoints"]
    assert [(c["step"], c["revision"], c["duplicate_of"]) for c in out] == [
        (10, "checkpoint-10", None), (30, "checkpoint-30", "checkpoint-10")]
    sweep = run_cli("sweep", "--model", str(run), "--revisions", "all", "--n-tokens", "48", "--k", "8", "--seeds",
                    "0", "--null-subspaces", "5", "--dtype", "float32", "--device", "cpu",
                    "--store", str(tmp_path / "store"))
    assert sweep.returncode == 0, sweep.stderr
    assert len(list((tmp_path / "store").rglob("*.json.gz"))) == 4  # no checkpoint disappears


def test_the_store_verifies_what_it_skips(series, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({**PLAN, "seeds": [0], "models": [{"model": str(series), "revisions": "all"}]}))
    store = ["--plan", str(plan), "--store", str(tmp_path / "store"), "--device", "cpu"]
    assert run_cli("sweep", *store).returncode == 0
    victim = sorted((tmp_path / "store").rglob("*.json.gz"))[0]
    record = json.loads(gzip.decompress(victim.read_bytes()))
    record["value"]["loss"] += 1  # a silent change: parses, fails its checksum
    victim.write_bytes(gzip.compress(json.dumps(record).encode()))
    dry = run_cli("sweep", *store, "--dry-run")
    assert "1 to run" in dry.stderr and str(victim) in dry.stderr
    again = run_cli("sweep", *store)
    assert again.returncode == 0 and "1 computed, 2 already stored" in again.stderr
    assert victim.exists() and json.loads(gzip.decompress(victim.read_bytes()))["value"]["loss"] != record["value"][
        "loss"]


def test_a_bad_cache_entry_is_recomputed_and_said_so(neox_folder):
    args = ("capacity", str(neox_folder), "--json")
    first = run_cli(*args)
    assert first.returncode == 0
    with diskcache.Cache(str(cache_dir() / "results")) as plain:
        for key in list(plain.iterkeys()):
            if key.startswith("matrix-geometry/"):
                plain.set(key, b"garbage")
    again = run_cli(*args)
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)
    lines = [line for line in again.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and "computed again" in lines[0]


# --- every failure is one clear line -----------------------------------------------------------------------------

def test_infinite_capacity_is_json_null_with_the_reason():
    result = run_cli("capacity", "--d", "100000", "--eps", "0.099", "--json")  # Class 2, past the float range
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["capacity"]["adjusted"] is None and "adjusted" in out["infinite"]["formulas"]
    assert out["capacity"]["full"] > 1e60 and "largest float" in out["infinite"]["reason"]
    text = run_cli("capacity", "--d", "100000", "--eps", "0.099")
    assert text.returncode == 0 and "infinite" in text.stdout


@pytest.mark.parametrize("args, message", [
    (("capacity", "{model}", "--bins", "0"), "at least 1 bin"),
    (("pga", "{model}", *FAST, "--k", "32", "--json", "-"), "k = 32 is out of range"),
    (("hidden-states", "{model}", "--window", "1024", "--n-tokens", "48", "--out", "{tmp}/h.npy"),
     "longer than .*context of 512"),
])
def test_bad_values_are_one_line(neox_folder, tmp_path, args, message):
    import re

    result = run_cli(*(a.format(model=neox_folder, tmp=tmp_path) for a in args))
    assert result.returncode == 2 and re.search(message, result.stderr), result.stderr
    assert "Traceback" not in result.stderr and len([x for x in result.stderr.splitlines() if "error" in x]) == 1


def test_an_unwritable_json_path_is_found_before_computing(neox_folder, tmp_path):
    (tmp_path / "file").write_text("x")
    result = run_cli("pga", str(neox_folder), *FAST, "--json", str(tmp_path / "file" / "out.json"))
    assert result.returncode == 2 and "cannot be written" in result.stderr
    assert "PGA" not in result.stderr and "forward pass" not in result.stderr  # refused before any computing


def write_gguf(path):
    writer = GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.ones((64, 16), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_a_truncated_gguf_is_named_as_such(tmp_path):
    whole = tmp_path / "whole.gguf"
    write_gguf(whole)
    check_gguf(whole, "whole.gguf")  # a well-formed file passes
    for cut in (16, len(whole.read_bytes()) // 2):
        broken = tmp_path / f"cut-{cut}.gguf"
        broken.write_bytes(whole.read_bytes()[:cut])
        with pytest.raises(InputError, match="truncated or corrupt"):
            check_gguf(broken, broken.name)
        result = run_cli("model-info", str(broken))
        assert result.returncode == 2 and "truncated or corrupt" in result.stderr and "Traceback" not in result.stderr


def test_a_config_that_needs_remote_code_is_refused_in_one_line(neox_folder, tmp_path):
    folder = tmp_path / "remote"
    shutil.copytree(neox_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="acme_lm", auto_map={"AutoConfig": "configuration_acme.AcmeConfig"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_acme.py").write_text("raise SystemExit('remote code ran')\n")
    for command in ("capacity", "model-info"):
        result = run_cli(command, str(folder))
        assert result.returncode == 2 and "--trust-remote-code" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "remote code ran" not in result.stderr


def test_stale_conversion_folders_are_removed(tmp_path):
    converted = tmp_path / "gguf-abc"
    dead, alive = tmp_path / "gguf-abc.partial-999999999", tmp_path / f"gguf-abc.partial-{os.getpid()}"
    for folder in (dead, alive):
        folder.mkdir()
    remove_stale_partials(converted)
    assert not dead.exists() and alive.exists()


def test_deleting_the_cache_folder_under_the_app_is_a_note(neox_folder):
    app = run_page("pages/triage.py", model=neox_folder, n_tokens=128)
    assert not app.exception and charts(app)
    shutil.rmtree(cache_dir() / "results")
    app = run_page("pages/capacity.py", model=neox_folder, n_tokens=128)
    assert not app.exception and not app.error and charts(app)
    assert any("cache" in note.value for note in app.info)
