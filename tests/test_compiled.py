"""numba's cache where numba has no folder of its own to write to: the project's cache folder, else none, and never
an import error (``analysis.compiled``). Each case runs in fresh processes in which numba's folders refuse writes, as
a read-only install's and a missing home's do."""

import os
import subprocess
import sys

import pytest

# numba's places refuse writes, as the folders of a read-only install and of a user without a writable home do
REFUSE = """
import numba.core.caching as caching
def refuse(self):
    raise OSError(30, "Read-only file system")
for place in {places}:
    getattr(caching, place).ensure_cache_path = refuse
"""
# the kernels' modules import, one kernel counts three values into four bins, and says how often it read the cache
COUNT = """
import torch
import analysis.geometry.eigen, analysis.geometry.radix
from analysis.capacity.binning import _count, count_bins
print(count_bins(torch.tensor([[-1.0, 0.0, 0.5]]), 4).tolist(), sum(_count.stats.cache_hits.values()))
"""


def run_twice(tmp_path, places: str, extra: str = "") -> list[str]:
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_CACHE_DIR"}
    env["RG_CACHE_DIR"] = str(tmp_path)
    script = REFUSE.format(places=places) + COUNT + extra
    return [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           check=True).stdout.strip() for _ in range(2)]


@pytest.mark.slow  # two processes, each importing umap-learn
def test_without_numbas_folders_the_kernels_are_cached_in_the_projects_cache(tmp_path):
    """The first process compiles and writes to ``cache/compiled``, the second reads it; umap-learn, which caches
    some of its functions at import, imports too."""
    places = "('InTreeCacheLocator', 'UserWideCacheLocator')"
    umap = "from analysis.geometry.token_map import umap_module; print(umap_module().__name__)"
    first, second = run_twice(tmp_path, places, umap)
    assert first.splitlines() == ["[1, 0, 1, 1] 0", "umap"]
    assert second.splitlines() == ["[1, 0, 1, 1] 1", "umap"]
    assert any(path.suffix == ".nbi" for path in (tmp_path / "compiled").rglob("*"))


@pytest.mark.slow  # two processes compiling
def test_with_no_folder_writable_the_kernels_are_compiled_in_each_process(tmp_path):
    assert run_twice(tmp_path, "('_CacheLocator',)") == ["[1, 0, 1, 1] 0"] * 2
    assert not (tmp_path / "compiled").exists() or not any((tmp_path / "compiled").rglob("*.nbi"))
