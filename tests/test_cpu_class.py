"""The choice that depends on the CPU (the ``auto`` dtype; the preview's projection does not), both ways: with
bfloat16 arithmetic and without it, and with the project's setting that turns the native-bfloat16 choice off."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from analysis.models import devices
from analysis.models.devices import NATIVE_BF16_SETTING, cpu_description, pick_dtype
from analysis.runs.settings import PREVIEW_N_NULL, pga_settings, preview_settings, preview_subspaces

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("flags, setting, native", [
    ({"avx2", "avx512f", "avx512_bf16"}, None, True),  # a server CPU with bfloat16 arithmetic
    ({"avx2", "amx_bf16"}, "1", True),
    ({"avx2", "avx512f", "avx512_bf16"}, "0", False),  # the same CPU, run as a laptop would
    ({"avx2"}, None, False),  # a laptop: AVX2, no bfloat16
    (set(), None, False),  # no /proc/cpuinfo (macOS)
])
def test_the_cpu_dependent_choices_follow_the_cpu_and_the_setting(flags, setting, native, monkeypatch):
    monkeypatch.setattr(devices, "cpu_flags", lambda: flags)
    if setting is None:
        monkeypatch.delenv(NATIVE_BF16_SETTING, raising=False)
    else:
        monkeypatch.setenv(NATIVE_BF16_SETTING, setting)
    assert devices.cpu_has_native_bf16() is native
    assert pick_dtype("auto", torch.device("cpu")) == (torch.bfloat16 if native else torch.float32)
    # in float32 either way: what a preview projects serves the exact run after it
    assert preview_settings(pga_settings(64), 64).projection == "float32"
    assert preview_subspaces(pga_settings(64), 64, "cpu") == PREVIEW_N_NULL + 1
    assert f"native bfloat16 choice: {'on' if native else 'off'}" in cpu_description()


def test_the_flags_are_read_from_the_flags_line():
    flags = devices.cpu_flags()
    assert not flags or ("fpu" in flags and not any(" " in flag for flag in flags))


@pytest.mark.skipif("avx2" not in devices.cpu_flags(), reason="the laptop class is an x86 CPU with AVX2")
def test_the_laptop_launcher_holds_every_library_to_avx2():
    """``bench/laptop.py`` runs its script in a process where torch, MKL, oneDNN, OpenBLAS and numba all run AVX2
    kernels and bfloat16 is not chosen; each setting is read as its library loads, so only a new process shows it."""
    script = ("import analysis, numpy, torch; from analysis.models.devices import cpu_description; "
              "print(cpu_description())")
    shown = subprocess.run([sys.executable, str(ROOT / "bench" / "laptop.py"), "-c", script], capture_output=True,
                           text=True, check=True, cwd=ROOT).stdout
    assert "kernels: torch AVX2, MKL AVX2, oneDNN AVX2, OpenBLAS Haswell, numba haswell;" in shown
    assert "native bfloat16 choice: off (RG_NATIVE_BF16=0)" in shown


@pytest.mark.parametrize("given, threads", [(None, 1), ("2", 2)])
def test_numpy_blas_runs_one_thread_unless_the_user_says(given, threads):
    """The library, imported first, keeps OpenBLAS to one thread (its idle thread spun beside the engine's own work on
    every core); a value the user sets wins. Read as OpenBLAS loads: a new process."""
    script = ("import analysis, numpy, threadpoolctl; print(sorted({i['num_threads'] "
              "for i in threadpoolctl.threadpool_info() if i['internal_api'] == 'openblas'}))")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT,
                           env=env).stdout
    assert shown.strip() == f"[{threads}]"
