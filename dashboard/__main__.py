"""Serve the dashboard warm: ``python -m dashboard [streamlit options] [-- app options]``.

The same server as ``streamlit run app.py`` (every option passes through), except that the libraries behind the
pages are loaded before it listens: torch, transformers and the library (4-5 s on a laptop), the built-in
model's architecture (about 2 s) and the compiled rank and PCA kernels. The first visitor then sees the model card in
about a second instead of after those imports (BENCHMARKS.md). On the first start only, the built-in model is fetched
and de-quantised to safetensors before it listens too (:func:`prepare_builtin`).
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
from analysis.errors import InputError
from analysis.geometry.eigen import top_eigh
from analysis.geometry.ranks import compile_kernels
from analysis.models.builtin import BUILTIN_NAME, builtin_gguf_path
from analysis.models.loading import converted_gguf, gguf_as_safetensors
from analysis.models.refs import resolve
from analysis.progress import TqdmProgress

APP = Path(__file__).resolve().parent.parent / "app.py"


def prepare_builtin() -> None:
    """The built-in model (the page's default) fetched and de-quantised to safetensors, said on stderr: on the first
    start only (the server listened after 12 s instead of 4 s on a laptop), which the first visitor's first answer
    waited for instead (z preview after 27.6 s instead of 11 s, BENCHMARKS.md). A failure (offline, a read-only models
    folder) is said here and left to the page, which says it again."""
    try:
        if not builtin_gguf_path().exists():
            print(f"Fetching the built-in model {BUILTIN_NAME} (first start only) ...", file=sys.stderr)
        ref = resolve(BUILTIN_NAME)
        if not (converted_gguf(ref) / "config.json").exists():
            print(f"De-quantising the built-in model {BUILTIN_NAME} (first start only) ...", file=sys.stderr)
            gguf_as_safetensors(ref, TqdmProgress())
    except (InputError, OSError, MemoryError) as error:
        print(f"The built-in model is not ready ({error}); the page will say so.", file=sys.stderr)


def main() -> None:
    prepare_builtin()
    compile_kernels()  # before the first visitor
    top_eigh(np.eye(4), 1)  # the PCA's compiled route, likewise
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    sys.exit(cli.main())


if __name__ == "__main__":
    main()
