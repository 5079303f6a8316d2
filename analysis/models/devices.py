"""Device and dtype choice: CUDA when present, float32 on the CPU, each checked before use."""

from __future__ import annotations

import os
from pathlib import Path

import torch

from analysis.errors import InputError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(name: str = "auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is an InputError."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"Device {name!r} asked for, but no CUDA GPU is visible; use 'cpu' or 'auto'.")
    if name not in ("cpu",) and not name.startswith("cuda"):
        raise InputError(f"Device {name!r} is not one of auto, cpu, cuda, cuda:N.")
    return torch.device(name)


NATIVE_BF16_SETTING = "RG_NATIVE_BF16"  # "0": never choose bfloat16 on this CPU (run as on an AVX2 laptop)
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16")


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where there is none, e.g. macOS)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {flag for line in text.splitlines() if line.startswith("flags") for flag in line.split(":", 1)[1].split()}


def cpu_has_native_bf16() -> bool:
    """True on CPUs with bfloat16 arithmetic (AVX512-BF16 or AMX), unless ``RG_NATIVE_BF16=0`` turns the choice
    off. It decides the CPU's ``auto`` dtype (``bench/laptop.py`` sets it, with every
    library's kernels held to AVX2, to run as a laptop with AVX2 and no bfloat16 would)."""
    if os.environ.get(NATIVE_BF16_SETTING, "").strip().lower() in ("0", "false", "no", "off"):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & cpu_flags())


def cpu_description() -> str:
    """One line for benchmarks: the CPU flags that matter, the kernels each library runs (torch's own, its matrix
    products through MKL and oneDNN, numpy's through OpenBLAS, numba's compiled code; ``bench/laptop.py`` holds them
    all to AVX2), and the bfloat16 choice."""
    import threadpoolctl
    from numba.core import config

    flags = cpu_flags()
    present = " ".join(flag for flag in REPORTED_FLAGS if flag in flags) or "none of " + ", ".join(REPORTED_FLAGS)
    openblas = {info.get("architecture") for info in threadpoolctl.threadpool_info()
                if info["internal_api"] == "openblas"}
    kernels = [f"torch {torch.backends.cpu.get_cpu_capability()}",
               f"MKL {os.environ.get('MKL_ENABLE_INSTRUCTIONS', 'best')}",
               f"oneDNN {os.environ.get('ONEDNN_MAX_CPU_ISA', 'best')}",
               f"OpenBLAS {'/'.join(sorted(map(str, openblas))) or 'not loaded'}",
               f"numba {config.CPU_NAME or 'host CPU'}"]
    setting = os.environ.get(NATIVE_BF16_SETTING, "unset")
    return (f"CPU flags: {present}; kernels: {', '.join(kernels)}; native bfloat16 choice: "
            f"{'on' if cpu_has_native_bf16() else 'off'} ({NATIVE_BF16_SETTING}={setting})")


def pick_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto`` -> bfloat16 on a GPU that supports it, float16 on older GPUs; on the CPU bfloat16 where
    the CPU computes it natively (2x faster), else float32.

    bfloat16 moved z by at most 0.08 (median 0.01) across the 31 layers of the built-in model at N = 512,
    a fifth of the width of z's own 95 % interval (BENCHMARKS.md); pass float32 for exact states.

    Any explicit dtype is test-run on the device (a matmul, a norm, a softmax) so an unsupported
    combination fails here with a clear message rather than deep inside a forward pass.
    """
    if name == "auto":
        if device.type != "cuda":
            return torch.bfloat16 if cpu_has_native_bf16() else torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if name not in DTYPES:
        raise InputError(f"dtype {name!r} is not one of auto, {', '.join(DTYPES)}.")
    dtype = DTYPES[name]
    try:
        x = torch.ones(4, 8, device=device, dtype=dtype)
        torch.softmax(torch.nn.functional.layer_norm(x @ x.T, (4,)), dim=-1)
    except (RuntimeError, TypeError) as error:
        raise InputError(f"dtype {name!r} cannot run on device {device} ({error}); use float32.") from None
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """``torch.float32`` -> ``float32``."""
    return str(dtype).removeprefix("torch.")
