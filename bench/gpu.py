"""The GPU path, measured in one run: the card's matmul throughput, hidden-state extraction against the
model's forward FLOPs, the null draws orthonormalised on the GPU against the CPU (d = 2048, k = 1024, R = 100), and
the PGA sweep at N = 2048, d = 4096, 32 layers, R = 100.

No download: the model is built from a Pythia-shaped config with random weights (speed does not depend on
the weights), saved with save_pretrained and loaded through the project's loader; the hidden states for
the PGA sweep are Gaussian, the unembedding a random 50304 x d matrix.

Usage (GPU):   python bench/gpu.py [--shape pythia-1.4b] [--n 2048] [--layers 32] [--parts hidden nulls pga]
Usage (check): python bench/gpu.py --smoke      (tiny sizes, CPU, seconds)
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.activations.hidden import extract, token_sample  # noqa: E402
from analysis.data.corpus import Sampling, builtin_corpus  # noqa: E402
from analysis.geometry.pga import PGASettings, null_bases, pga_sweep  # noqa: E402
from analysis.geometry.readout import readout_basis  # noqa: E402
from analysis.models.loading import load  # noqa: E402
from analysis.models.refs import resolve  # noqa: E402
from analysis.models.tiny import train_tokenizer  # noqa: E402
from analysis.storage.cache import ResultCache  # noqa: E402

SHAPES = {  # (d_model, layers, heads) of the Pythia suite
    "pythia-160m": (768, 12, 12), "pythia-410m": (1024, 24, 16), "pythia-1b": (2048, 16, 8),
    "pythia-1.4b": (2048, 24, 16),
    "pythia-2.8b": (2560, 32, 32), "pythia-6.9b": (4096, 32, 32), "smoke": (64, 2, 4),
}
VOCAB = 50304


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 20) -> float:
    """Measured dense matmul throughput (TFLOP/s) of ``size``-square matrices."""
    a, b = (torch.randn(size, size, device=device, dtype=dtype) for _ in range(2))
    a @ b
    synchronise(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    synchronise(device)
    return 2 * size**3 * repeats / (time.perf_counter() - start) / 1e12


def build_model(shape: str, folder: Path, tokenizer) -> int:
    """Save a random Pythia-shaped GPT-NeoX model; returns its parameter count without embedding and head."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    d, layers, heads = SHAPES[shape]
    config = GPTNeoXConfig(vocab_size=VOCAB, hidden_size=d, num_hidden_layers=layers, num_attention_heads=heads,
                           intermediate_size=4 * d, max_position_embeddings=2048, bos_token_id=0, eos_token_id=0)
    with torch.device("meta"):
        n_body = sum(p.numel() for name, p in GPTNeoXForCausalLM(config).named_parameters()
                     if "embed" not in name and "lm_head" not in name)
    model = GPTNeoXForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return n_body


def extraction(args, device: torch.device) -> None:
    tokenizer = train_tokenizer(builtin_corpus().text, vocab_size=512)
    folder = Path(tempfile.mkdtemp()) / args.shape
    n_body = build_model(args.shape, folder, tokenizer)
    loaded = load(resolve(str(folder)), device=str(device), dtype=args.dtype)
    sampling = Sampling(n_tokens=args.n, window=args.window, per_window=args.per_window)
    sample = token_sample(loaded, builtin_corpus(), sampling, ResultCache(tempfile.mkdtemp()))
    tokens = sample.windows.size
    extract(loaded, sample, batch_size=args.batch_size)  # warm-up
    synchronise(device)
    start = time.perf_counter()
    extract(loaded, sample, batch_size=args.batch_size)
    synchronise(device)
    seconds = time.perf_counter() - start
    d, layers, _ = SHAPES[args.shape]
    flops = tokens * (2 * n_body + 2 * layers * args.window * d)  # Kaplan et al.: 2N + 2 n_layer n_ctx d
    peak = matmul_tflops(device, loaded.dtype, args.matmul_size)
    achieved = flops / seconds / 1e12
    print(f"hidden states: {args.shape} ({n_body / 1e6:.0f} M body parameters, {loaded.dtype}), {tokens} tokens "
          f"in {seconds:.2f} s = {tokens / seconds:,.0f} tokens/s")
    print(f"  forward FLOPs {flops / 1e12:.1f} T -> {achieved:.1f} TFLOP/s; measured {loaded.dtype} matmul "
          f"{peak:.1f} TFLOP/s; ratio {achieved / peak:.2f}")


def nulls(args, device: torch.device) -> None:
    """The R null bases at k = d / 2 (Cholesky QR in float64) orthonormalised on ``device`` against the CPU."""
    d, k = (2048, 1024) if not args.smoke else (64, 32)
    drawn = {}  # device type -> (seconds, bases)
    for where in (device, torch.device("cpu")):
        out = torch.empty((args.n_null, d, k), device=where)
        start = time.perf_counter()
        null_bases(d, k, args.n_null, 0, out=out)
        synchronise(where)
        drawn[where.type] = (time.perf_counter() - start, out.cpu())
    (gpu, on_gpu), (cpu, on_cpu) = drawn[device.type], drawn["cpu"]
    print(f"null bases: d = {d}, k = {k}, R = {args.n_null}: {gpu:.2f} s orthonormalised on {device.type}, "
          f"{cpu:.2f} s on the CPU ({torch.get_num_threads()} threads); largest difference "
          f"{(on_gpu - on_cpu).abs().max().item():.1e}")


def pga(args, device: torch.device) -> None:
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    states = rng.standard_normal((args.layers, args.n, args.d), dtype=np.float32)
    w_u = torch.randn(VOCAB if not args.smoke else 200, args.d)
    start = time.perf_counter()
    basis = readout_basis(w_u, device=device)
    synchronise(device)
    t_basis = time.perf_counter() - start
    settings = PGASettings(ks=(args.k,), ccrs=(1,), n_null=args.n_null)
    pga_sweep(states[:1], basis, PGASettings(ks=(8,), n_null=2), device=str(device))  # warm-up
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    results = pga_sweep(states, basis, settings, device=str(device))
    synchronise(device)
    seconds = time.perf_counter() - start
    memory = f", peak GPU memory {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB" if device.type == "cuda" else ""
    print(f"PGA sweep: {args.layers} layers, N = {args.n}, d = {args.d}, k = {args.k}, R = {args.n_null}: "
          f"{seconds:.2f} s ({seconds / args.layers:.3f} s per layer){memory}; readout basis {t_basis:.2f} s; "
          f"max |z| {max(abs(r.z) for r in results):.2f} (Gaussian states: expect |z| < 4)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="pythia-1.4b", choices=sorted(SHAPES))
    parser.add_argument("--dtype", default="bfloat16")
    parser.add_argument("--n", type=int, default=2048)
    parser.add_argument("--window", type=int, default=512)
    parser.add_argument("--per-window", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--d", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--n-null", type=int, default=100)
    parser.add_argument("--matmul-size", type=int, default=8192)
    parser.add_argument("--parts", nargs="+", choices=("hidden", "nulls", "pga"), default=["hidden", "nulls", "pga"])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on the CPU: checks the script runs")
    args = parser.parse_args()
    if args.smoke:
        args.shape, args.dtype, args.n, args.window, args.d, args.layers = "smoke", "float32", 64, 32, 64, 3
        args.k, args.n_null, args.matmul_size, args.batch_size = 8, 10, 256, 4
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"device: {name}; torch {torch.__version__}")
    for part in args.parts:
        {"hidden": extraction, "nulls": nulls, "pga": pga}[part](args, device)


if __name__ == "__main__":
    main()
