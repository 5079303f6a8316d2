"""Serve the dashboard warm: ``python -m dashboard [streamlit options] [-- app options]``.

The same server as ``streamlit run app.py`` (every option passes through), except that the libraries behind the
pages are loaded before it listens: torch, transformers and the library (4-5 s on a laptop), the built-in
model's architecture (about 2 s) and the compiled rank kernel. The first visitor then sees the model card in
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
from analysis.geometry.radix import rho_parts

APP = Path(__file__).resolve().parent.parent / "app.py"


def main() -> None:
    three = np.arange(3)  # the rank kernel compiled (or read from disk) before the first visitor
    rho_parts(np.zeros((1, 3), np.float32), three, three.astype(np.uint64), np.zeros(3), np.empty(1), np.empty(1))
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
