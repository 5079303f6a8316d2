"""What each ``python -m analysis`` subcommand does, given its parsed arguments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from analysis.progress import TqdmProgress


def emit_json(payload: dict, out: Path | None) -> None:
    """Write ``payload`` to ``out``, or print it when ``out`` is None or '-'."""
    text = json.dumps(payload, indent=2, allow_nan=False)
    if out is None or str(out) == "-":
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def resolve_model(args: argparse.Namespace):
    """The ModelRef the arguments name."""
    from analysis.models.refs import resolve

    return resolve(args.model, args.revision, allow_pickle=args.allow_pickle)


def load_model(args: argparse.Namespace, progress=None):
    """Resolve and load the model the arguments name."""
    from analysis.models.loading import load

    return load(resolve_model(args), args.device, args.dtype, args.trust_remote_code, progress)


def sampling_from(args: argparse.Namespace):
    """The Sampling the arguments describe."""
    from analysis.data.corpus import Sampling

    return Sampling(args.n_tokens, args.window, args.skip, args.per_window, args.seed)


def corpus_from(args: argparse.Namespace):
    """The Corpus the arguments name."""
    from analysis.data.corpus import load_corpus

    return load_corpus(args.corpus, args.jsonl_field, args.max_corpus_mb)


def model_info(args: argparse.Namespace) -> int:
    from analysis.models.card import describe

    info = describe(resolve_model(args), args.trust_remote_code)
    if args.json:
        emit_json(info, None)
    else:
        for key, value in info.items():
            if key == "checkpoints":
                value = f"{len(value)} ({value[0]} .. {value[-1]})" if value else "none"
            print(f"{key:16} {value}")
    return 0


def hidden_states(args: argparse.Namespace) -> int:
    from analysis.activations.hidden import hidden_states as cached_hidden_states

    progress = TqdmProgress()
    sampling, corpus = sampling_from(args), corpus_from(args)
    loaded = load_model(args, progress)
    entry = cached_hidden_states(loaded, corpus, sampling, args.batch_size, progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, entry.value.states)
    if args.prenorm_out:
        np.save(args.prenorm_out, entry.value.last_prenorm)
    source = "computed" if entry.computed else f"from cache ({entry.provenance['computed_at']})"
    print(f"wrote {args.out} {entry.value.states.shape} {source}; model {loaded.ref.label}",
          file=sys.stderr)
    return 0


def pga(args: argparse.Namespace) -> int:
    from analysis.cli.parser import int_list
    from analysis.errors import require
    from analysis.geometry.pga import PGASettings, pga_sweep, validate_states
    from analysis.geometry.readout import readout_basis
    from analysis.runs.pipeline import cached_pga, model_readout, model_states

    progress = TqdmProgress()
    settings = PGASettings(ks=int_list(args.k, "k"), ccrs=int_list(args.ccr, "ccr"), n_null=args.n_null,
                           seed=args.seed, max_pairs=args.max_pairs, ccr_fit=args.ccr_fit)
    if args.hidden or args.unembedding:
        require(bool(args.hidden and args.unembedding), "--hidden and --unembedding go together.")
        w_u = _load_npy(args.unembedding, "--unembedding")
        require(w_u.ndim == 2, f"--unembedding must be a [V, d] array; got shape {w_u.shape}.")
        states = validate_states(_load_npy(args.hidden, "--hidden"), w_u.shape[1])
        basis, identity = readout_basis(w_u), None
        results = pga_sweep(states, basis, settings, _layers(args.layers, len(states)), args.device, progress)
    else:
        loaded = load_model(args, progress)
        hidden, provenance = model_states(loaded, corpus_from(args), sampling_from(args), progress)
        basis, identity = model_readout(loaded), loaded.ref.identity
        layers = _layers(args.layers, hidden.n_layers)
        results = cached_pga(hidden, provenance["spec"], basis, loaded.spec, settings, layers, args.device,
                             progress)
    first = results[0]
    runs = [{"k": k, "ccr": c, "layers": [r.to_json() for r in results if (r.k, r.ccr) == (k, c)]}
            for k in settings.ks for c in settings.ccrs]
    emit_json({"n_tokens": first.n_tokens, "n_pairs": first.n_pairs, "n_null": settings.n_null,
               "seed": settings.seed, "identity": identity, "settings": settings.spec, "runs": runs}, args.json)
    return 0


def _layers(text: str, n_layers: int) -> list[int]:
    from analysis.cli.parser import int_list

    return list(range(n_layers)) if text == "all" else list(int_list(text, "layers"))


def _load_npy(path: Path, option: str) -> np.ndarray:
    from analysis.errors import InputError

    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"{option} {str(path)!r} is not a readable .npy array ({error}).") from None


def capacity(args: argparse.Namespace) -> int:
    from analysis.capacity.formulas import capacity_report
    from analysis.errors import require

    if args.d is not None or args.eps is not None:
        require(args.d is not None and args.eps is not None, "--d and --eps go together.")
        payload = capacity_report(args.d, args.eps, args.delta).to_json()
    else:
        from analysis.models.refs import resolve
        from analysis.runs.pipeline import matrix_geometry

        ref = resolve(args.model, args.revision, allow_pickle=args.allow_pickle, weights=False)
        geometry = matrix_geometry(ref, args.matrix, args.bins, args.sample_pairs, args.seed, args.device,
                                   TqdmProgress())
        stats = geometry.stats
        payload = {
            **capacity_report(stats.d, max(stats.epsilon, 1e-9), args.delta).to_json(),
            "model": args.model, "identity": ref.identity, "matrix": args.matrix,
            "tensor": geometry.tensor_name, "mu": stats.mu, "sigma": stats.sigma, "n_rows": stats.n_rows,
            "n_zero_rows": stats.n_zero_rows, "d_model": stats.d, "tied_embeddings": geometry.tied_embeddings,
            "histogram": {"edges": geometry.histogram.edges.tolist(), "counts": geometry.histogram.counts.tolist(),
                          "sampled_pairs": geometry.histogram.sampled},
        }
    if args.json is None:
        subject = payload.get("model", f"d = {payload['d']}")
        print(f"{subject}: eps = {payload['eps']:.4f}, {payload['class']}")
        for name, value in payload["capacity"].items():
            print(f"  {name:12} {value:.4g}" if name != "extrapolated" else f"  {name:12} {value}")
    else:
        emit_json(payload, args.json)
    return 0


def packing(args: argparse.Namespace) -> int:
    from analysis.capacity.packing import fit_formulas, optimized_packing, random_packing
    from analysis.cli.parser import int_list

    progress = TqdmProgress()
    cells = []
    for d in int_list(args.d, "d"):
        for k in int_list(args.k, "k"):
            if args.method == "random":
                cells.append(random_packing(k, d, args.trials, args.seed, args.device, progress))
            else:
                cells.append(optimized_packing(k, d, args.steps, args.seed, args.device, progress))
    payload = {"method": args.method, "seed": args.seed, "cells": [c.to_json() for c in cells]}
    if args.fit:
        payload["fit"] = fit_formulas(cells)
    emit_json(payload, args.json)
    return 0


def checkpoints(args: argparse.Namespace) -> int:
    from analysis.models.refs import list_checkpoints

    found = [{"step": c.step, "revision": c.revision} for c in list_checkpoints(args.model)]
    if args.json:
        emit_json({"model": args.model, "checkpoints": found}, None)
    else:
        print("\n".join(c["revision"] for c in found) or f"{args.model}: no checkpoints found")
    return 0


def training_sweep(args: argparse.Namespace) -> int:
    from analysis.cli.parser import int_list
    from analysis.geometry.pga import PGASettings
    from analysis.models.refs import list_checkpoints
    from analysis.runs.series import training_sweep as sweep

    revisions = ([c.revision for c in list_checkpoints(args.model)] if args.revisions == "all"
                 else [r.strip() for r in args.revisions.split(",") if r.strip()])
    settings = PGASettings(ks=int_list(args.k, "k"), ccrs=int_list(args.ccr, "ccr"), n_null=args.n_null,
                           seed=args.seed)
    results = sweep(args.model, revisions, corpus_from(args), sampling_from(args), settings, args.device,
                    TqdmProgress())
    emit_json({"model": args.model, "settings": settings.spec, "checkpoints": [
        {"step": r.step, "revision": r.revision, "identity": r.identity, "fingerprint": r.fingerprint,
         "duplicate_of": r.duplicate_of, "loss": r.loss, "seconds": r.seconds,
         "layers": [{"k": x.k, "ccr": x.ccr, **x.to_json()} for x in r.layers]} for r in results]}, args.json)
    return 0


def train_demo(args: argparse.Namespace) -> int:
    from analysis.cli.parser import int_list
    from analysis.models.train_demo import DemoSettings
    from analysis.models.train_demo import train_demo as train

    settings = DemoSettings(widths=int_list(args.widths, "widths"), steps=args.steps, seed=args.seed)
    summary = train(args.out, settings, TqdmProgress())
    payload = {"out": str(args.out), "checkpoint_steps": settings.checkpoint_steps,
               "models": {str(w): {"folder": v["folder"], "final_train_loss": v["train_loss"][-1]}
                          for w, v in summary.items()}}
    if args.json:
        emit_json(payload, None)
    else:
        for width, model in payload["models"].items():
            print(f"width {width}: {model['folder']} (final training loss {model['final_train_loss']:.3f})")
    return 0


def convergence(args: argparse.Namespace) -> int:
    from analysis.activations.pooling import text_chunks
    from analysis.data.corpus import load_corpus
    from analysis.geometry.convergence import convergence as converge
    from analysis.models.loading import load
    from analysis.models.refs import resolve
    from analysis.runs.pipeline import model_pooled, model_readout

    texts = text_chunks(load_corpus(args.corpus).text, args.units)
    progress, pooled, bases, identities = TqdmProgress(), [], [], []
    for name, revision in ((args.model_a, args.revision_a), (args.model_b, args.revision_b)):
        loaded = load(resolve(name, revision), args.device, progress=progress)
        pooled.append(model_pooled(loaded, texts, progress=progress))
        bases.append(model_readout(loaded))
        identities.append(loaded.ref.identity)
        del loaded
    results = converge(pooled[0], pooled[1], bases[0], bases[1], args.k, args.n_null, args.seed)
    emit_json({"model_a": args.model_a, "model_b": args.model_b, "identities": identities, "units": len(texts),
               "k": min(args.k, pooled[0].shape[2], pooled[1].shape[2]), "n_null": args.n_null,
               "pairs": [{"layer_a": r.layer_a, "layer_b": r.layer_b, "full": r.full, "readout": r.readout,
                          "null_mean": r.null_mean, "null_std": r.null_std} for r in results]}, args.json)
    return 0


def probe(args: argparse.Namespace) -> int:
    from analysis.geometry.probes import builtin_task, labelled_from_bytes, labelled_from_hub, probe_layers
    from analysis.runs.pipeline import model_pooled

    if args.data == "builtin":
        data = builtin_task()
    elif args.data.startswith("hf:"):
        data = labelled_from_hub(args.data)
    else:
        path = Path(args.data)
        from analysis.errors import require

        require(path.is_file(), f"--data {args.data!r} is not a file; give builtin, a .csv or .jsonl file, or "
                                "hf:NAME:SPLIT.")
        data = labelled_from_bytes(path.read_bytes(), path.name)
    loaded = load_model(args, TqdmProgress())
    result = probe_layers(model_pooled(loaded, data.texts, progress=TqdmProgress()), data.labels, seed=args.seed)
    emit_json({"model": args.model, "identity": loaded.ref.identity, "data": data.name, "classes": result.classes,
               "n_train": result.n_train, "n_test": result.n_test, "baseline": result.baseline,
               "accuracy": result.accuracy.tolist()}, args.json)
    return 0


def plan_from(args: argparse.Namespace) -> dict:
    """The plan file's mapping with the flags given on the command line laid over it."""
    from analysis.cli.parser import int_list
    from analysis.runs.plan import read_plan

    raw = read_plan(args.plan) if args.plan else {}
    if args.model:
        revisions = None if args.revisions is None else "all" if args.revisions == "all" else [
            r.strip() for r in args.revisions.split(",") if r.strip()]
        raw["models"] = [{"model": m, **({"revisions": revisions} if revisions else {})} for m in args.model]
    for key, value in (("corpus", args.corpus), ("n_tokens", args.n_tokens), ("dtype", args.dtype),
                       ("null_subspaces", args.null_subspaces), ("retries", args.retries)):
        if value is not None:
            raw[key] = value
    for key, value in (("seeds", args.seeds), ("k", args.k), ("ccr", args.ccr)):
        if value is not None:
            raw[key] = list(int_list(value, key))
    return raw


def sweep(args: argparse.Namespace) -> int:
    from analysis.runs.backends import make_backend
    from analysis.runs.plan import parse_plan
    from analysis.runs.sweep import is_stored, plan_jobs, run_sweep
    from analysis.storage.store import ResultStore

    plan = parse_plan(plan_from(args))
    store = ResultStore(args.store)
    backend = make_backend(args.backend, args.address, args.device)
    if args.dry_run:
        jobs = plan_jobs(plan, backend.concrete_dtype(plan.dtype), backend.device)
        waiting = {job.label for job in jobs if not is_stored(job, store)}
        for job in jobs:
            print(f"{'to run' if job.label in waiting else 'stored'}  {job.label}")
        print(f"{len(jobs)} jobs: {len(waiting)} to run, {len(jobs) - len(waiting)} already stored in {store.url}",
              file=sys.stderr)
        return 0
    outcome = run_sweep(plan, backend, store, TqdmProgress())
    print(outcome.summary(), file=sys.stderr)
    if args.json:
        emit_json({"store": outcome.store, "ok": outcome.ok, "jobs": [vars(o) for o in outcome.outcomes]}, args.json)
    return 0 if outcome.ok else 1


COMMANDS = {"model-info": model_info, "hidden-states": hidden_states, "pga": pga, "capacity": capacity,
            "packing": packing, "checkpoints": checkpoints, "training-sweep": training_sweep, "sweep": sweep,
            "train-demo": train_demo, "convergence": convergence, "probe": probe}
