"""Project rules a test can enforce: the library never imports streamlit; the code passes ruff."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

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
