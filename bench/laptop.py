"""Run a bench as on a laptop-class CPU: AVX2, no AVX-512, no bfloat16 arithmetic.

Usage: python bench/laptop.py bench/pga.py [its arguments]

Every library that picks its kernels by the CPU is held to AVX2, each by its own setting: torch's own kernels
(``ATEN_CPU_CAPABILITY``), its matrix products (MKL: ``MKL_ENABLE_INSTRUCTIONS``; oneDNN, behind ``nn.Linear``:
``ONEDNN_MAX_CPU_ISA``), numpy's and scipy's (OpenBLAS: ``OPENBLAS_CORETYPE``) and the project's compiled rank code
(numba: ``NUMBA_CPU_NAME``); the project's native-bfloat16 choice is off (``RG_NATIVE_BF16=0``). Torch's kernels
alone are not enough: on an AVX-512 CPU its matrix products still ran AVX-512 kernels, 1.5-1.7x the speed of AVX2
ones. Each library reads its setting when it loads, so the bench runs in a new process with them set (and the app a
bench starts inherits them); it prints them as the first line (``cpu_description``).
"""

import os
import sys

LAPTOP = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "OPENBLAS_CORETYPE": "Haswell",
    "NUMBA_CPU_NAME": "haswell",
    "RG_NATIVE_BF16": "0",
}

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    os.execve(sys.executable, [sys.executable, *sys.argv[1:]], {**os.environ, **LAPTOP})
