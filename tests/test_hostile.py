"""A hosted instance under a hostile visitor, and a careless user's inputs: one test per class of hole.

1. text and probe sources that skip the allowed roots (Hub-dataset names that are server folders);
2. script in the HTML report (a model's config carrying HTML);
3. echoed values rendered as Markdown (a crafted link in a URL parameter);
4. stored records of the right format but the wrong shape (the cache and the result store);
5. tracebacks for odd input (a NUL byte, an invalid Hub id, a link loop, a text of one repeated token).
"""

import gzip
import hashlib
import html
import io
import json
import re
import shutil

import diskcache
import numpy as np
import pytest
from markdown_it import MarkdownIt

from analysis.capacity.formulas import capacity_report
from analysis.errors import InputError
from analysis.models.refs import resolve
from analysis.storage.cache import pack
from analysis.storage.paths import PROJECT_ROOT, allowed_roots
from dashboard.text import literal
from tests.test_app import charts, run_page, shown
from tests.test_cli import run_cli

PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'
FAST = ("--n-tokens", "48", "--window", "32", "--device", "cpu")


@pytest.fixture
def secret(tmp_path):
    """A server folder outside the allowed root (``allowed``), holding a text no visitor may read."""
    folder = tmp_path / "server" / "notes"
    folder.mkdir(parents=True)
    (folder / "train.txt").write_text("SECRET-LINE of the server\n" * 50)
    return folder


def all_text(app) -> str:
    kinds = ("error", "warning", "info", "caption", "markdown", "success")
    return json.dumps([shown(e.value) for kind in kinds for e in getattr(app, kind)]) + json.dumps(charts(app))


# --- 1. every text source goes through the allowed roots ---------------------------------------------------------

def test_a_hub_dataset_name_that_is_a_server_folder_is_refused_alike(allowed, secret):
    root = allowed
    refusals = []
    for name in (str(secret), str(secret.parent / "missing"), "..", "json"):
        source = f"hf:{name}:train:text"
        app = run_page("pages/token_map.py", model=root / "model", corpus=source, n_tokens=48)
        assert not app.exception and not charts(app) and "SECRET" not in all_text(app)
        refusals.append(shown(app.error[0].value).replace(repr(source), "SOURCE"))
    assert len(set(refusals)) == 1 and "opens files only under" in refusals[0]  # no oracle of what exists


def test_the_probe_pages_dataset_field_is_refused_alike(allowed, secret):
    root = allowed
    refusals = []
    for name in (str(secret), str(secret.parent / "missing")):
        app = run_page("pages/probes.py", model=root / "model", n_tokens=48)
        app.radio[0].set_value("Hub dataset").run()
        field = next(t for t in app.text_input if t.label.startswith("hf:"))
        field.set_value(f"hf:{name}:train").run()
        assert not app.exception and "SECRET" not in all_text(app)
        refusals.append(shown(app.error[0].value).replace(repr(f"hf:{name}:train"), "SOURCE"))
    assert len(set(refusals)) == 1 and "opens files only under" in refusals[0]


# --- 2. nothing written into HTML runs ----------------------------------------------------------------------------

def hostile_model(folder, neox_folder):
    """A copy of the tiny model whose config's architecture name carries HTML."""
    shutil.copytree(neox_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    config["architectures"] = [PAYLOAD]
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_report_escapes_the_models_config_and_names(neox_folder, tmp_path):
    from analysis.data.corpus import Sampling, load_corpus
    from analysis.runs import analyses
    from analysis.runs.settings import Compute, ModelChoice

    model = hostile_model(tmp_path / "m<b>x</b>", neox_folder)
    text = tmp_path / "text.txt"
    text.write_text(f"{PAYLOAD} some words of prose to sample from.\n" * 400)
    loaded = analyses.open_model(ModelChoice(str(model)), Compute("cpu"))
    page = analyses.model_report(loaded, load_corpus(str(text)), Sampling(n_tokens=48, window=32),
                                 Compute("cpu")).html()
    assert PAYLOAD not in page and "<b>x</b>" not in page
    assert "&lt;img src=x onerror=&quot;window.__pwned=1&quot;&gt;" in page  # shown, as text


# --- 3. echoed values are literal text ----------------------------------------------------------------------------

HOSTILE_MARKDOWN = ["[log in again](http://evil.example/login)", "![x](http://evil.example/x.png)",
                    "http://evil.example/", "see https://evil.example/x now", "www.evil.example", "me@evil.example",
                    "<a href='http://evil.example'>x</a>", ":red[alert] :material/warning:",
                    "**bold** _it_ `code` # heading\n- item", "$x^2$"]


@pytest.mark.parametrize("text", HOSTILE_MARKDOWN)
def test_literal_text_renders_as_written(text):
    rendered = MarkdownIt("gfm-like").render(literal(text))
    assert "<a " not in rendered and "<img" not in rendered and "<strong>" not in rendered
    assert "<code>" not in rendered and "<h1>" not in rendered and "<li>" not in rendered
    visible = html.unescape(re.sub(r"<[^>]+>", "", rendered)).replace("\u2060", "")  # the word joiner is invisible
    assert visible.strip() == text.strip()


def test_an_ignored_url_parameter_is_echoed_literally(neox_folder):
    link = "[log in again](http://evil.example/login)"
    app = run_page("pages/capacity.py", model=neox_folder, n_tokens=link)
    assert not app.exception
    (warning,) = [w for w in app.warning if "Ignoring the URL parameter" in shown(w.value)]
    assert link in shown(warning.value) and "<a " not in MarkdownIt("gfm-like").render(warning.value)


# --- 4. a record of the right format but the wrong shape is set aside ------------------------------------------

def npz_with_header(header: str) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, __json__=np.frombuffer(header.encode(), dtype=np.uint8))
    return buffer.getvalue()


@pytest.mark.parametrize("record", [
    pack(npz_with_header("[1, 2]"), {"spec": {}}),  # a list where a MatrixGeometry was written
    pack(npz_with_header('"a string"'), {"spec": {}}),
    pack(npz_with_header("[" * 5000 + "]" * 5000), {"spec": {}}),  # nested thousands deep
    pack(npz_with_header('{"__class__": "analysis.capacity.epsilon.MatrixGeometry", "fields": {"which": 3}}'), {}),
    b"[1, 2]\n" + npz_with_header("1"),  # the record's own header a list
    b'"x"\n' + npz_with_header("1"),
    b"[" * 5000 + b"\n" + npz_with_header("1"),
], ids=["list", "string", "deep", "fields", "header-list", "header-string", "header-deep"])
def test_a_cache_entry_of_the_wrong_shape_is_recomputed_with_one_warning(neox_folder, record, tmp_path):
    args, own = ("capacity", str(neox_folder), "--json"), {"RG_CACHE_DIR": str(tmp_path / "cache")}
    first = run_cli(*args, env=own)
    assert first.returncode == 0, first.stderr
    with diskcache.Cache(str(tmp_path / "cache" / "results")) as plain:
        keys = [key for key in plain.iterkeys() if key.startswith("matrix-geometry/")]
        for key in keys:
            plain.set(key, record)
    again = run_cli(*args, env=own)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(first.stdout) and "Traceback" not in again.stderr
    lines = [line for line in again.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == len(keys) == 1 and "computed again" in lines[0]


def rewrite_record(path, change) -> None:
    """Change a store record's value and give it a valid checksum again: the right format, the wrong shape."""
    record = json.loads(gzip.decompress(path.read_bytes()))
    record["value"] = change(record["value"])
    record["sha256"] = hashlib.sha256(json.dumps(record["value"], sort_keys=True, separators=(",", ":"))
                                      .encode()).hexdigest()
    path.write_bytes(gzip.compress(json.dumps(record).encode()))


def test_a_malformed_store_record_is_named_and_skipped_by_every_page(series, tmp_path, monkeypatch):
    from analysis.runs.backends import LocalBackend
    from analysis.runs.plan import parse_plan
    from analysis.runs.series import stored_series
    from analysis.runs.sweep import run_sweep
    from analysis.storage.store import ResultStore

    plan = parse_plan({"models": [{"model": str(series), "revisions": "all"}], "n_tokens": 48, "k": [8],
                       "ccr": [1], "null_subspaces": 10, "dtype": "float32"})
    store = ResultStore(tmp_path / "store")
    assert run_sweep(plan, LocalBackend("cpu"), store, cache_dir=str(tmp_path / "cache")).ok
    first, second, _ = sorted((tmp_path / "store").rglob("*.json.gz"))
    rewrite_record(first, lambda value: {**value, "layers": "not a list of layers"})
    rewrite_record(second, lambda value: "a string")
    with pytest.warns(UserWarning, match="wrong shape"):
        (found,) = stored_series(ResultStore(tmp_path / "store"))
    assert len(found.results) == 1  # the good record, alone
    monkeypatch.setenv("RG_STORE", str(tmp_path / "store"))
    for page in ("pages/training.py", "pages/models.py"):
        app = run_page(page)
        assert not app.exception and not app.error and charts(app), page
        assert any(first.name in shown(note.value) for note in app.info), page  # named on the page
    assert first.exists() and second.exists()  # a listing moves nobody's files


# --- 5. one line, never a traceback ----------------------------------------------------------------------------

def test_odd_paths_and_names_are_one_line_in_the_app(allowed, tmp_path):
    root = allowed
    (root / "loop").symlink_to(root / "loop")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    refusals = set()
    for model in (str(root / "a\x00b"), str(root / "loop"), str(tmp_path / "loop"), str(tmp_path / "missing")):
        app = run_page("pages/triage.py", model=model)
        assert not app.exception and not charts(app), model
        refusals.add(shown(app.error[0].value).replace(repr(model), "MODEL"))
    assert len(refusals) == 1 and "opens files only under" in refusals.pop()
    app = run_page("pages/triage.py", model="bad--name")  # the Hub's validator refuses it
    assert not app.exception and "bad--name" in shown(app.error[0].value)


def test_odd_paths_and_names_are_one_line_in_the_cli(tmp_path):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for model in ("bad--name", "a/b/c", str(tmp_path / "loop")):
        result = run_cli("model-info", model)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error:")
    with pytest.raises(InputError, match="NUL byte"):
        resolve("model\x00name")  # an argv cannot hold one; a plan file or the library can


def test_a_text_of_one_repeated_token_gives_numbers_not_a_traceback(neox_folder, tmp_path):
    text = tmp_path / "same.txt"
    text.write_text("the " * 5000)
    result = run_cli("pga", str(neox_folder), "--corpus", str(text), *FAST, "--json", "-")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    layers = json.loads(result.stdout)["runs"][0]["layers"]
    assert layers[0]["z"] is None and layers[0]["rankme"] is None  # identical states: undefined, said as null
    assert all(layer["z"] is not None for layer in layers[1:])  # positions tell the later layers apart
    app = run_page("pages/triage.py", model=neox_folder, corpus=text, n_tokens=48)
    assert not app.exception and not app.error and charts(app)


def test_the_apps_last_handler_shows_one_line_and_logs_the_rest(neox_folder, monkeypatch, caplog):
    from dashboard import compute

    def broken(ref):
        raise RuntimeError("a bug at /srv/secret/path")

    monkeypatch.delenv("RG_DEBUG")
    monkeypatch.setattr(compute, "card", broken)
    app = run_page("pages/triage.py", model=neox_folder)
    assert not app.exception
    (error,) = app.error
    assert "Something went wrong (RuntimeError)" in shown(error.value) and "/srv/secret" not in all_text(app)
    assert "/srv/secret/path" in caplog.text  # the details are in the server's log


# --- the two smaller ones -----------------------------------------------------------------------------------------

def test_capacity_json_agrees_with_its_note():
    class_1, class_2 = capacity_report(4096, 0.5).to_json(), capacity_report(4096, 0.0645).to_json()
    assert class_1["capacity"]["status"] == "indeterminate" and "indeterminate" in class_1["class_note"]
    assert all(class_1["capacity"][name] is None for name in ("full", "adjusted", "jl_fitted", "jl_proven"))
    assert class_1["outside_domain"]["capacity"]["full"] > 1e70  # the formula's value, labelled apart
    assert class_2["capacity"]["status"] == "estimated" and class_2["capacity"]["full"] > 1e7
    out = json.loads(run_cli("capacity", "--d", "4096", "--eps", "0.5", "--json").stdout)
    assert out["capacity"]["full"] is None and out["capacity"]["status"] == "indeterminate"


def test_the_default_roots_are_the_cache_and_data_beside_the_app(monkeypatch, tmp_path):
    monkeypatch.delenv("RG_ALLOWED_ROOTS")
    monkeypatch.setenv("RG_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert allowed_roots() == ((tmp_path / "elsewhere").resolve(), (PROJECT_ROOT / "data").resolve())
    assert (PROJECT_ROOT / "app.py").exists()
