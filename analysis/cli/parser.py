"""The command line's arguments: every subcommand, its flags, and their defaults (read from
``analysis.runs.settings``). Comma lists are parsed by argparse ``type=`` functions, so a bad value
is reported by argparse itself (exit status 2, one line naming the flag)."""

from __future__ import annotations

import argparse
from pathlib import Path

from analysis.data.corpus import BUILTIN_CORPUS, DEFAULT_MAX_MB, Sampling
from analysis.models.builtin import BUILTIN_NAME
from analysis.runs.settings import (
    BATCH_SIZE,
    CONVERGENCE_N_NULL,
    CONVERGENCE_UNITS,
    DEFAULT_CCR,
    DEFAULT_N_NULL,
    HISTOGRAM_BINS,
    SEED,
    SENSITIVITY_DELTA,
)

SAMPLING = Sampling()


def int_list(text: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> ``(1, 5, 10)``."""
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers, e.g. 1,5,10; got {text!r}") from None
    if not values:
        raise argparse.ArgumentTypeError(f"takes at least one integer; got {text!r}")
    return values


def str_list(text: str) -> tuple[str, ...]:
    """``"a, b"`` -> ``("a", "b")``."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def layers_arg(text: str) -> tuple[int, ...] | None:
    """``all`` -> None (every layer); else comma-separated layers (negative counts from the end)."""
    return None if text == "all" else int_list(text)


def revisions_arg(text: str) -> tuple[str, ...] | None:
    """``all`` -> None (every checkpoint); else comma-separated revisions."""
    return None if text == "all" else str_list(text)


def _model_args(parser: argparse.ArgumentParser, default_model: bool = True) -> None:
    parser.add_argument("model", nargs="?" if default_model else None, default=BUILTIN_NAME,
                        help=f"Hub id, folder, checkpoint folder, .gguf file or {BUILTIN_NAME} (default)")
    parser.add_argument("--revision", help="Hub branch/tag/SHA, or checkpoint (checkpoint-1000, step1000, 1000)")
    parser.add_argument("--allow-pickle", action="store_true", help="allow pickled .bin weights")
    parser.add_argument("--trust-remote-code", action="store_true", help="run the model repo's own code")
    parser.add_argument("--tokenizer", help="a folder to load the tokenizer from (local models without their own)")


def _compute_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    parser.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16")


def _text_args(parser: argparse.ArgumentParser) -> None:
    _compute_args(parser)
    parser.add_argument("--corpus", default=BUILTIN_CORPUS,
                        help="builtin | FILE.txt | FILE.jsonl | hf:NAME:SPLIT:COLUMN")
    parser.add_argument("--jsonl-field", default="text")
    parser.add_argument("--max-corpus-mb", type=float, default=DEFAULT_MAX_MB)
    parser.add_argument("--n-tokens", type=int, default=SAMPLING.n_tokens, help="N sampled token positions")
    parser.add_argument("--window", type=int, default=SAMPLING.window)
    parser.add_argument("--skip", type=int, default=SAMPLING.skip, help="positions skipped at each window's start")
    parser.add_argument("--per-window", type=int, default=SAMPLING.per_window)
    parser.add_argument("--seed", type=int, default=SEED, help="token sample and null subspaces")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)


def _pga_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--k", type=int_list,
                        help="readout dimensions, e.g. 100 or 50,100 (default d / 4, at most 100)")
    parser.add_argument("--ccr", type=int_list, default=(DEFAULT_CCR,), help="CCR depths, e.g. 1 or 0,1,5,10")
    parser.add_argument("--n-null", type=int, default=DEFAULT_N_NULL, help="R random subspaces")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m analysis", description="Subspace PGA and representational "
                                     "capacity of language models (also installed as readout-geometry).")
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser("model-info", help="architecture, sizes, identity and checkpoints")
    _model_args(info)
    info.add_argument("--json", action="store_true", help="print one JSON object")

    hidden = commands.add_parser("hidden-states", help="write [n_layers+1, N, d] hidden states to .npy")
    _model_args(hidden)
    _text_args(hidden)
    hidden.add_argument("--out", required=True, type=Path)
    hidden.add_argument("--prenorm-out", type=Path, help="also write the last block's pre-norm output [N, d]")

    pga = commands.add_parser("pga", help="Subspace PGA per layer: z, null, PC angles, spectral metrics")
    _model_args(pga)
    _text_args(pga)
    _pga_args(pga)
    pga.add_argument("--hidden", type=Path, help="bring your own states: H.npy, [N, d] or [L, N, d]")
    pga.add_argument("--unembedding", type=Path, help="with --hidden: W.npy, [V, d]")
    pga.add_argument("--layers", type=layers_arg, default=None, help="all | 0,5,10 (negative counts from the end)")
    pga.add_argument("--max-pairs", type=int, help="seeded uniform sample of pairs (default: all pairs)")
    pga.add_argument("--ccr-fit", choices=["same", "half"], default="same",
                     help="fit CCR on the scored tokens, or on a held-out half")
    pga.add_argument("--json", type=Path, required=True, help="output file ('-' for stdout)")

    capacity = commands.add_parser("capacity", help="epsilon, class and capacity of a model, or of --d/--eps")
    _model_args(capacity)
    capacity.add_argument("--d", type=int, help="with --eps: formulas only, no model")
    capacity.add_argument("--eps", type=float, help="with --d: formulas only, no model")
    capacity.add_argument("--matrix", choices=["embedding", "unembedding"], default="embedding")
    capacity.add_argument("--bins", type=int, default=HISTOGRAM_BINS)
    capacity.add_argument("--sample-pairs", type=int, help="histogram from a seeded sample of pairs")
    capacity.add_argument("--seed", type=int, default=SEED)
    capacity.add_argument("--device", default="auto")
    capacity.add_argument("--delta", type=float, default=SENSITIVITY_DELTA,
                          help="sensitivity: capacity at eps +- delta")
    capacity.add_argument("--json", nargs="?", const="-", type=Path, help="print JSON, or write it to a file")

    atlas = commands.add_parser("atlas", help="the 45 published models' epsilon and class (Guha 2026, Table 1), "
                                             "or one of them measured here")
    atlas.add_argument("--measure", metavar="NAME", help="a published model's Hub id or name: measure its epsilon "
                                                        "from the embedding shard alone, beside the published value")
    atlas.add_argument("--device", default="auto")
    atlas.add_argument("--json", nargs="?", const="-", type=Path, help="print JSON, or write it to a file")

    packing = commands.add_parser("packing", help="vector-packing simulations and formula fits")
    packing.add_argument("--d", type=int_list, required=True, help="dimensions, e.g. 64,128")
    packing.add_argument("--k", type=int_list, required=True, help="vector counts, e.g. 2000,4000")
    packing.add_argument("--method", choices=["random", "optimized"], default="random")
    packing.add_argument("--trials", type=int, default=1000, help="random: trials per cell")
    packing.add_argument("--steps", type=int, default=5000, help="optimized: Adam steps per cell")
    packing.add_argument("--seed", type=int, default=SEED)
    packing.add_argument("--device", default="auto")
    packing.add_argument("--fit", action="store_true", help="fit the JL, adjusted and full forms to the cells")
    packing.add_argument("--json", type=Path, help="output file (default: stdout)")

    checkpoints = commands.add_parser("checkpoints", help="a model's training checkpoints")
    checkpoints.add_argument("model")
    checkpoints.add_argument("--json", action="store_true")

    series = commands.add_parser("training-sweep", help="PGA and loss per checkpoint (each cached; resumable)")
    _model_args(series, default_model=False)
    _text_args(series)
    _pga_args(series)
    series.add_argument("--revisions", type=revisions_arg, default=None, help="all | comma-separated checkpoints")
    series.add_argument("--json", type=Path, default=Path("-"), help="output file (default: stdout)")

    report = commands.add_parser("report", help="a self-contained HTML triage report per model (batch triage)")
    report.add_argument("models", nargs="+", metavar="MODEL",
                        help="model references, each optionally NAME@REVISION")
    report.add_argument("--revision", help="a revision for every model without @REVISION; 'all': every checkpoint")
    report.add_argument("--allow-pickle", action="store_true", help="allow pickled .bin weights")
    report.add_argument("--trust-remote-code", action="store_true", help="run the model repo's own code")
    report.add_argument("--tokenizer", help="a folder to load the tokenizer from (local models without their own)")
    _text_args(report)
    report.add_argument("--out", dest="out_dir", type=Path, default=Path("reports"),
                        help="folder for the reports (default reports/)")
    report.add_argument("--json", action="store_true", help="print the paths written and the verdicts as JSON")

    plan = commands.add_parser("sweep", help="a plan of models x revisions x settings, locally or on a Ray cluster")
    plan.add_argument("--plan", type=Path, help="YAML or JSON plan (format: analysis/runs/plan.py); flags override it")
    plan.add_argument("--model", action="append", help="a model to sweep (repeat for several)")
    plan.add_argument("--revisions", type=str_list, help="all | comma-separated revisions, for every --model")
    plan.add_argument("--corpus", help="builtin | FILE.txt | FILE.jsonl | hf:NAME:SPLIT:COLUMN")
    plan.add_argument("--n-tokens", type=int)
    plan.add_argument("--seeds", type=int_list, help="comma-separated seeds, e.g. 0,1")
    plan.add_argument("--k", type=int_list, help="comma-separated k (default d / 4, at most 100, per model)")
    plan.add_argument("--ccr", type=int_list, help="comma-separated CCR depths")
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
    demo.add_argument("--widths", type=int_list, default=(64, 128))
    demo.add_argument("--steps", type=int, default=512)
    demo.add_argument("--seed", type=int, default=SEED)
    demo.add_argument("--json", action="store_true")

    converge = commands.add_parser("convergence", help="do two models arrange the same texts alike?")
    converge.add_argument("model_a", help="a model reference, optionally NAME@REVISION")
    converge.add_argument("model_b", help="a model reference, optionally NAME@REVISION")
    converge.add_argument("--revision-a", help="revision of model A (instead of @REVISION)")
    converge.add_argument("--revision-b", help="revision of model B (instead of @REVISION)")
    _compute_args(converge)
    converge.add_argument("--corpus", default=BUILTIN_CORPUS)
    converge.add_argument("--units", type=int, default=CONVERGENCE_UNITS, help="text passages (~400 characters)")
    converge.add_argument("--k", type=int, help="readout dimensions (default: the smaller d / 4, at most 100)")
    converge.add_argument("--n-null", type=int, default=CONVERGENCE_N_NULL)
    converge.add_argument("--seed", type=int, default=SEED)
    converge.add_argument("--json", type=Path, default=Path("-"))

    probe = commands.add_parser("probe", help="linear probe accuracy per layer")
    _model_args(probe)
    _compute_args(probe)
    probe.add_argument("--data", default="builtin",
                       help="builtin (four help topics) | builtin:word-order (original or shuffled) | FILE.csv | "
                            "FILE.jsonl (text,label columns) | hf:ag_news:test")
    probe.add_argument("--seed", type=int, default=SEED)
    probe.add_argument("--json", type=Path, default=Path("-"))
    return parser
