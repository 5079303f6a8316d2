"""Serve the dashboard warm: ``python -m dashboard [streamlit options] [-- app options]``.

The same server as ``streamlit run app.py`` (every option passes through), except that the libraries behind the
pages are loaded before it listens: torch, transformers and the library (4-5 s on a laptop), the built-in
model's architecture (about 2 s) and the compiled rank and PCA kernels. The first visitor then sees the model card in
about a second instead of after those imports (BENCHMARKS.md).
"""

# isort: off
import analysis  # noqa: F401  (first: its OpenMP setting must precede torch)
# isort: on
import sys
from pathlib import Path

import numpy as np
import transformers.models.llama.modeling_llama  # noqa: F401  (the built-in model's architecture)
from streamlit.web import cli

import analysis.results.figures  # noqa: F401
import analysis.runs.analyses  # noqa: F401
from analysis.geometry.eigen import top_eigh
from analysis.geometry.ranks import compile_kernels

APP = Path(__file__).resolve().parent.parent / "app.py"


def main() -> None:
    compile_kernels()  # before the first visitor
    top_eigh(np.eye(4), 1)  # the PCA's compiled route, likewise
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
