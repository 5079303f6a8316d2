"""Every source a visitor can name goes through the allowed roots (``analysis.runs.sources``).

The list of entry points is walked with a path outside the roots, a missing path, a link loop and a
NUL byte: each gives the same refusal. A static check keeps the list whole: every URL parameter and
free-text widget of the dashboard is either a listed source or a listed non-source.
"""

import ast
import re
from pathlib import Path

import pytest

from analysis.errors import InputError
from analysis.runs.sources import ENTRY_POINTS, NOT_SOURCES
from analysis.storage.paths import restrict_to, roots_in_force

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD_FILES = sorted([*ROOT.glob("dashboard/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"])


@pytest.fixture
def policy(tmp_path):
    """A policy allowing one folder, holding a link loop; restored afterwards."""
    root = tmp_path / "allowed"
    root.mkdir()
    (root / "loop").symlink_to(root / "loop")
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "loop").symlink_to(outside / "loop")
    before = roots_in_force()
    restrict_to((root.resolve(),))
    yield root, outside
    restrict_to(before)


def refusal_of(entry, value: str, path: str = "") -> str:
    """The refusal's words, the value (or the path inside it) replaced by VALUE."""
    with pytest.raises(InputError) as refused:
        entry.open(value)
    return str(refused.value).replace(repr(value), "VALUE").replace(repr(path), "VALUE")


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=lambda e: e.name)
def test_every_entry_point_refuses_alike_outside_the_roots(entry, policy):
    root, outside = policy
    for form in entry.forms:
        paths = [str(outside / "folder"), str(outside / "missing"), str(outside / "loop"), str(root / "loop"),
                 str(root / "a\x00b"), str(root / ".." / "outside" / "folder")]
        refusals = {refusal_of(entry, form.format(path), path) for path in paths}
        assert len(refusals) == 1, (form, refusals)  # exists, missing, a loop, a NUL byte: the same words
        (refusal,) = refusals
        assert "this server opens files only under" in refusal and str(root) in refusal
        assert str(outside) not in refusal


@pytest.mark.parametrize("source", ["hf:..:train:text", "hf:/etc:train:text", "hf:./cache:train:text",
                                    "hf:a/b/c:train:text", "hf:json:train:text", "hf:~/x:train:text"])
def test_hub_dataset_names_that_are_no_dataset_ids_are_refused(source, policy):
    text = next(e for e in ENTRY_POINTS if e.name == "text")
    assert "this server opens files only under" in refusal_of(text, source)


def test_hub_dataset_ids_are_looked_up_on_the_hub_only(policy, monkeypatch, tmp_path):
    """A valid id that is also a folder here (``tests``) is asked of the Hub, not read from the folder; the dataset
    cache lies under the project's cache."""
    import datasets

    asked = []
    monkeypatch.setattr(datasets, "load_dataset", lambda path, *a, **k: asked.append((path, k["cache_dir"])) or 1 / 0)
    monkeypatch.chdir(ROOT)
    text = next(e for e in ENTRY_POINTS if e.name == "text")
    assert "Cannot load Hub dataset" in refusal_of(text, "hf:tests:train:text")
    assert asked[0][0] == "hf://datasets/tests" and "datasets" in asked[0][1]


def called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


def arguments_given(tree: ast.Module, function: str, position: int) -> set[str]:
    """The constants passed as argument ``position`` wherever ``function`` is called in ``tree``."""
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and called(node) == function]
    return {call.args[position].value for call in calls
            if len(call.args) > position and isinstance(call.args[position], ast.Constant)}


def widget_labels(tree: ast.Module) -> set[str]:
    """Labels of the free-text widgets in ``tree``: constants, or a function's parameter read from its callers;
    any other expression as its source text."""
    enclosing = {id(node): function for function in ast.walk(tree) if isinstance(function, ast.FunctionDef)
                 for node in ast.walk(function)}
    labels = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and called(node) in ("text_input", "text_area")):
            continue
        first, function = node.args[0], enclosing.get(id(node))
        parameters = [a.arg for a in function.args.args] if function else []
        if isinstance(first, ast.Constant):
            labels.add(first.value)
        elif isinstance(first, ast.Name) and first.id in parameters:
            labels |= arguments_given(tree, function.name, parameters.index(first.id))
        else:
            labels.add(ast.unparse(first))
    return labels


def source_inputs() -> tuple[set[str], set[str]]:
    """(URL parameters, free-text widget labels) the dashboard reads, found in its source."""
    keys, labels = set(), set()
    for path in DASHBOARD_FILES:
        tree = ast.parse(path.read_text())
        labels |= widget_labels(tree)
        for node in ast.walk(tree):
            first = node.args[0] if isinstance(node, ast.Call) and node.args else None
            if not isinstance(first, ast.Constant):
                continue
            if called(node) in ("url_int", "query_value") or ast.unparse(node.func).endswith("query_params.get"):
                keys.add(first.value)
    view = (ROOT / "dashboard" / "view.py").read_text()
    fields = re.search(r"class ViewState:.*?\n\n    @property", view, re.S).group(0)
    keys |= set(re.findall(r"^    (\w+): ", fields, re.M))  # every sidebar field is a URL parameter
    return keys, labels


def test_every_url_parameter_and_free_text_widget_is_listed():
    from dashboard.sidebar import SOURCES

    keys, labels = source_inputs()
    assert {"model", "corpus", "a", "b", "k"} <= keys and "Model A" in labels  # the scan finds what it should
    listed_keys = {key for entry in ENTRY_POINTS for key in entry.url_keys}
    listed_widgets = {label for entry in ENTRY_POINTS for label in entry.widgets}
    assert keys <= listed_keys | set(NOT_SOURCES), keys - listed_keys - set(NOT_SOURCES)
    # the model field's label is the chosen Source (a Hub id, a local folder ...): each is a listed widget
    dynamic = {label for label in labels if label == "source"}
    assert dynamic <= {"source"} and set(SOURCES[2:]) <= listed_widgets
    assert labels - dynamic <= listed_widgets, labels - dynamic - listed_widgets
