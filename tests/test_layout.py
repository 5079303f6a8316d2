"""Project rules a test can enforce: the library never imports streamlit; project modules import each
other at the top only, with no circle; the code passes ruff."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_analysis_never_imports_streamlit():
    for path in (ROOT / "analysis").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] == "streamlit" for n in names), f"{path} imports streamlit"


def test_ruff_passes():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in requirements-dev.txt"
    result = subprocess.run([ruff, "check", "--output-format", "concise", "."], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_gpu_benchmark_runs_at_smoke_size():
    """bench/gpu.py is only timed on a GPU machine; here it must at least run end to end."""
    result = subprocess.run([sys.executable, "bench/gpu.py", "--smoke"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "tokens/s" in result.stdout and "PGA sweep: 3 layers" in result.stdout


PROJECT = ("analysis", "dashboard")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project_imports(tree: ast.AST) -> list[tuple[ast.AST, str]]:
    """(node, imported project module) for every import in the tree, at any depth."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, a.name) for a in node.names if a.name.split(".")[0] in PROJECT]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
            found += [(node, f"{node.module}.{a.name}") for a in node.names]
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (``from pkg import mod`` counts as importing pkg.mod)."""
    paths = [p for package in PROJECT for p in (ROOT / package).rglob("*.py")]
    modules = {_module_name(p) for p in paths}
    graph = {}
    for path in paths:
        edges = set()
        for _, target in _project_imports(ast.parse(path.read_text())):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != _module_name(path):
                edges.add(target)
        graph[_module_name(path)] = edges
    return graph


def test_project_modules_import_each_other_at_the_top_only():
    for package in PROJECT:
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            top = {id(node) for node in tree.body}
            inner = [f"{path.relative_to(ROOT)}:{node.lineno} {name}" for node, name in _project_imports(tree)
                     if id(node) not in top]
            assert not inner, f"imports inside functions hide the import graph: {inner}"


def test_the_import_graph_has_no_circle():
    graph, state, path = import_graph(), {}, []

    def visit(module: str) -> None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            assert state.get(target) != "open", "import circle: " + " -> ".join(path[path.index(target):] + [target])
            if target not in state:
                visit(target)
        path.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)


def test_a_planted_circle_is_found(monkeypatch):
    """The circle check finds a circle hidden in a function (guards the test above against passing vacuously)."""
    planted = {"analysis.a": {"analysis.b"}, "analysis.b": {"analysis.a"}}
    monkeypatch.setattr(sys.modules[__name__], "import_graph", lambda: planted)
    with pytest.raises(AssertionError, match="import circle: analysis.a -> analysis.b -> analysis.a"):
        test_the_import_graph_has_no_circle()


def _requirement_names(*files: str) -> set[str]:
    names = set()
    for name in files:
        for line in (ROOT / name).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                names.add(line.split("==")[0].strip().lower().replace("_", "-"))
    return names


def test_every_third_party_import_is_declared():
    """What the library, the dashboard and the pages import is in requirements.txt (optional Ray in its extra)."""
    from importlib.metadata import packages_distributions

    distributions = packages_distributions()
    declared = _requirement_names("requirements.txt", "requirements-ray.txt")
    sources = [*(ROOT / "analysis").rglob("*.py"), *(ROOT / "dashboard").rglob("*.py"), *(ROOT / "pages").glob("*.py"),
               ROOT / "app.py"]
    missing = set()
    for path in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for top in {n.split(".")[0] for n in names} - set(sys.stdlib_module_names) - set(PROJECT):
                owners = {d.lower().replace("_", "-") for d in distributions.get(top, [top])}
                if not owners & declared:
                    missing.add(f"{top} ({path.relative_to(ROOT)})")
    assert not missing, f"imported but not declared in requirements.txt: {sorted(missing)}"


def test_the_console_command_is_python_m_analysis():
    command = Path(sys.executable).parent / "readout-geometry"
    assert command.exists(), "pip install -e . installs the readout-geometry command"
    for args in (["--help"], ["capacity", "--d", "4096", "--eps", "0.0645", "--json"]):
        installed = subprocess.run([str(command), *args], capture_output=True, text=True, cwd=ROOT)
        module = subprocess.run([sys.executable, "-m", "analysis", *args], capture_output=True, text=True, cwd=ROOT)
        assert installed.returncode == module.returncode == 0, installed.stderr
        assert installed.stdout == module.stdout
