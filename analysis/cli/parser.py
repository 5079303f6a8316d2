"""``python -m analysis``: the command-line contract (JSON out, clear errors, tqdm progress)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from analysis.errors import InputError
from analysis.models.builtin import BUILTIN_NAME


def _model_args(parser: argparse.ArgumentParser, default_model: bool = True) -> None:
    parser.add_argument("model", nargs="?" if default_model else None, default=BUILTIN_NAME,
                        help=f"Hub id, folder, checkpoint folder, .gguf file or {BUILTIN_NAME} (default)")
    parser.add_argument("--revision", help="Hub branch/tag/SHA, or checkpoint (checkpoint-1000, step1000, 1000)")
    parser.add_argument("--allow-pickle", action="store_true", help="allow pickled .bin weights")
    parser.add_argument("--trust-remote-code", action="store_true", help="run the model repo's own code")


def _run_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")
    parser.add_argument("--corpus", default="builtin", help="builtin | FILE.txt | FILE.jsonl | hf:NAME:SPLIT:COLUMN")
    parser.add_argument("--jsonl-field", default="text")
    parser.add_argument("--max-corpus-mb", type=float, default=256)
    parser.add_argument("--n-tokens", type=int, default=512, help="N sampled token positions")
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--skip", type=int, default=4, help="positions skipped at each window's start")
    parser.add_argument("--per-window", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=8)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser("model-info", help="architecture, sizes, identity and checkpoints")
    _model_args(info)
    info.add_argument("--json", action="store_true", help="print one JSON object")

    hidden = commands.add_parser("hidden-states", help="write [n_layers+1, N, d] hidden states to .npy")
    _model_args(hidden)
    _run_args(hidden)
    hidden.add_argument("--out", required=True, type=Path)
    hidden.add_argument("--prenorm-out", type=Path, help="also write the last block's pre-norm output [N, d]")

    pga = commands.add_parser("pga", help="Subspace PGA per layer: z, null, PC angles, spectral metrics")
    _model_args(pga)
    _run_args(pga)
    pga.add_argument("--hidden", type=Path, help="bring your own states: H.npy, [N, d] or [L, N, d]")
    pga.add_argument("--unembedding", type=Path, help="with --hidden: W.npy, [V, d]")
    pga.add_argument("--layers", default="all", help="all | 0,5,10 (negative counts from the end)")
    pga.add_argument("--k", default="100", help="readout dimensions, e.g. 100 or 50,100")
    pga.add_argument("--ccr", default="1", help="CCR depths, e.g. 1 or 0,1,5,10")
    pga.add_argument("--n-null", type=int, default=100, help="R random subspaces")
    pga.add_argument("--max-pairs", type=int, help="seeded uniform sample of pairs (default: all pairs)")
    pga.add_argument("--ccr-fit", choices=["same", "half"], default="same",
                     help="fit CCR on the scored tokens, or on a held-out half")
    pga.add_argument("--json", type=Path, required=True, help="output file ('-' for stdout)")

    capacity = commands.add_parser("capacity", help="epsilon, class and capacity of a model, or of --d/--eps")
    _model_args(capacity)
    capacity.add_argument("--d", type=int, help="with --eps: formulas only, no model")
    capacity.add_argument("--eps", type=float, help="with --d: formulas only, no model")
    capacity.add_argument("--matrix", choices=["embedding", "unembedding"], default="embedding")
    capacity.add_argument("--bins", type=int, default=300)
    capacity.add_argument("--sample-pairs", type=int, help="histogram from a seeded sample of pairs")
    capacity.add_argument("--seed", type=int, default=0)
    capacity.add_argument("--device", default="auto")
    capacity.add_argument("--delta", type=float, default=0.005, help="sensitivity: capacity at eps +- delta")
    capacity.add_argument("--json", nargs="?", const="-", type=Path, help="print JSON, or write it to a file")

    packing = commands.add_parser("packing", help="vector-packing simulations and formula fits")
    packing.add_argument("--d", required=True, help="dimensions, e.g. 64,128")
    packing.add_argument("--k", required=True, help="vector counts, e.g. 2000,4000")
    packing.add_argument("--method", choices=["random", "optimized"], default="random")
    packing.add_argument("--trials", type=int, default=1000, help="random: trials per cell")
    packing.add_argument("--steps", type=int, default=5000, help="optimized: Adam steps per cell")
    packing.add_argument("--seed", type=int, default=0)
    packing.add_argument("--device", default="auto")
    packing.add_argument("--fit", action="store_true", help="fit the JL, adjusted and full forms to the cells")
    packing.add_argument("--json", type=Path, help="output file (default: stdout)")

    checkpoints = commands.add_parser("checkpoints", help="a model's training checkpoints")
    checkpoints.add_argument("model")
    checkpoints.add_argument("--json", action="store_true")

    sweep = commands.add_parser("training-sweep", help="PGA and loss per checkpoint (each cached; resumable)")
    _model_args(sweep, default_model=False)
    _run_args(sweep)
    sweep.add_argument("--revisions", default="all", help="all | comma-separated checkpoints")
    sweep.add_argument("--k", default="100")
    sweep.add_argument("--ccr", default="1")
    sweep.add_argument("--n-null", type=int, default=100)
    sweep.add_argument("--json", type=Path, default=Path("-"), help="output file (default: stdout)")

    plan = commands.add_parser("sweep", help="a plan of models x revisions x settings, locally or on a Ray cluster")
    plan.add_argument("--plan", type=Path, help="YAML or JSON plan (format: analysis/runs/plan.py); flags override it")
    plan.add_argument("--model", action="append", help="a model to sweep (repeat for several)")
    plan.add_argument("--revisions", help="all | comma-separated revisions, for every --model")
    plan.add_argument("--corpus", help="builtin | FILE.txt | FILE.jsonl | hf:NAME:SPLIT:COLUMN")
    plan.add_argument("--n-tokens", type=int)
    plan.add_argument("--seeds", help="comma-separated seeds, e.g. 0,1")
    plan.add_argument("--k", help="comma-separated k (default d / 4, at most 100, per model)")
    plan.add_argument("--ccr", help="comma-separated CCR depths")
    plan.add_argument("--null-subspaces", type=int)
    plan.add_argument("--dtype", choices=["auto", "float32", "bfloat16", "float16"])
    plan.add_argument("--retries", type=int, help="extra attempts for a failed job (default 2)")
    plan.add_argument("--backend", choices=["local", "ray"], default="local")
    plan.add_argument("--address", help="Ray cluster: host:port, ray://host:10001 or auto (default: start a local Ray)")
    plan.add_argument("--store", help="result store folder or fsspec URL (default: $RG_STORE or <cache>/store)")
    plan.add_argument("--device", default="auto", help="local backend: auto | cpu | cuda")
    plan.add_argument("--dry-run", action="store_true", help="check the plan and list its jobs; run nothing")
    plan.add_argument("--json", type=Path, help="write the sweep report as JSON")

    demo = commands.add_parser("train-demo", help="train small GPT-NeoX models offline, saving checkpoints")
    demo.add_argument("--out", type=Path, default=Path("cache/train-demo"))
    demo.add_argument("--widths", default="64,128")
    demo.add_argument("--steps", type=int, default=512)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--json", action="store_true")

    converge = commands.add_parser("convergence", help="do two models arrange the same texts alike?")
    converge.add_argument("model_a")
    converge.add_argument("model_b")
    converge.add_argument("--revision-a")
    converge.add_argument("--revision-b")
    converge.add_argument("--corpus", default="builtin")
    converge.add_argument("--units", type=int, default=200, help="text passages (~400 characters) to compare")
    converge.add_argument("--k", type=int, default=100)
    converge.add_argument("--n-null", type=int, default=20)
    converge.add_argument("--seed", type=int, default=0)
    converge.add_argument("--device", default="auto")
    converge.add_argument("--json", type=Path, default=Path("-"))

    probe = commands.add_parser("probe", help="linear probe accuracy per layer")
    _model_args(probe)
    probe.add_argument("--data", default="builtin",
                       help="builtin | FILE.csv | FILE.jsonl (text,label columns) | hf:ag_news:test")
    probe.add_argument("--seed", type=int, default=0)
    probe.add_argument("--device", default="auto")
    probe.add_argument("--dtype", default="auto")
    probe.add_argument("--json", type=Path, default=Path("-"))
    return parser


def int_list(text: str, name: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> ``(1, 5, 10)``; InputError naming the option otherwise."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise InputError(f"--{name} takes comma-separated integers, e.g. 1,5,10; got {text!r}.") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from analysis.cli.commands import COMMANDS

    try:
        return COMMANDS[args.command](args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing partial was written to the cache", file=sys.stderr)
        return 130


