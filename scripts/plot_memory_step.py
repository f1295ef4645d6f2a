#!/usr/bin/env python3
"""Figures of the whole-step memory model (`ppbench memory --format json`).

1. OUT_DIR/memory_8b_pp_seq.png: the Llama-3-8B-shaped transformer (bf16, AdamW, micro-batch 1)
   under 1F1B with N = 2D micro-batches: the most loaded rank's memory, stacked as parameters,
   gradients, optimizer states, peak activations and communication buffers, for pipeline degrees
   D = 1, 2, 4, 8 (bars) at sequence lengths 1k to 16k (one panel each, each on its own y-scale),
   with a dashed line at 80 GiB (one GPU's memory).
2. OUT_DIR/memory_per_rank_d4.png: the same model at sequence length 4096, D = 4, N = 8: every
   rank's stacked memory, one panel per schedule family of `ppbench list`.

Every number comes from the built ppbench; nothing is recomputed here. Activations are what
ppbench's kernels keep (the CPU kernels materialise the s x s attention probabilities, so they
grow with s^2; a fused attention kernel would keep much less).

Usage: scripts/plot_memory_step.py [--ppbench build/ppbench] [--out-dir plots/reference]
(with the project's .venv python where matplotlib lives).
"""

from __future__ import annotations

import sys
from pathlib import Path

from results_io import atomic_savefig, check_ppbench, ppbench_json, pyplot
from script_cli import OneLineParser, output_path, run, shaped

GIB = 1024.0**3
PARTS = [
    ("params", "parameters (bf16)", "#0072B2"),
    ("grads", "gradients (bf16)", "#56B4E9"),
    ("optimizer", "AdamW m, v + fp32 master", "#E69F00"),
    ("activations", "peak activations", "#D55E00"),
    ("comm", "communication buffers", "#009E73"),
]
BASE = ["--workload", "transformer", "--preset", "llama3-8b", "--dtype", "bf16",
        "--optimizer", "adamw", "--microbatch-size", "1"]


def record(ppbench: str, *args: str) -> dict:
    """`ppbench ARGS --format json`'s record (PpbenchError where ppbench fails)."""
    return ppbench_json(ppbench, [*args, "--format", "json"])


def stacked(ax, x, ranks_bytes: list[dict], width: float) -> None:
    bottom = [0.0] * len(ranks_bytes)
    for key, label, colour in PARTS:
        values = [b[key] / GIB for b in ranks_bytes]
        ax.bar(x, values, width, bottom=bottom, color=colour, label=label)
        bottom = [a + v for a, v in zip(bottom, values)]


def pp_seq_figure(ppbench: str, out: Path) -> None:
    degrees = [1, 2, 4, 8]
    seqs = [1024, 2048, 4096, 8192, 16384]
    plt = pyplot("plot_memory_step")
    fig, axes = plt.subplots(1, len(seqs), figsize=(3.2 * len(seqs), 4.2))
    for ax, seq in zip(axes, seqs):
        worst = []
        for d in degrees:
            j = record(ppbench, "memory", *BASE, "--seq", str(seq), "--schedule", "1f1b",
                       "--devices", str(d), "--microbatches", str(2 * d))
            worst.append(max((r["bytes"] for r in j["ranks"]), key=lambda b: b["total"]))
        stacked(ax, range(len(degrees)), worst, 0.7)
        ax.axhline(80, color="black", linestyle="--", linewidth=1, label="80 GiB GPU")
        ax.set_xticks(range(len(degrees)), [f"D={d}" for d in degrees])
        ax.set_title(f"seq {seq // 1024}k")
    # Each panel its own linear scale: activations grow with s^2 across the panels.
    axes[0].set_ylabel("most loaded rank, GiB")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle("Llama-3-8B shape, bf16, AdamW, 1F1B, micro-batch 1, N = 2D: memory of one "
                 "step on the most loaded rank (ppbench memory)", fontsize=10)
    fig.tight_layout(rect=(0, 0.08, 1, 0.95))
    atomic_savefig(fig, out, dpi=120)
    plt.close(fig)


def per_rank_figure(ppbench: str, out: Path, seq: int = 4096) -> None:
    names = [s["name"] for s in record(ppbench, "list")["schedules"]]
    cols = 4
    rows = (len(names) + cols - 1) // cols
    plt = pyplot("plot_memory_step")
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.9 * rows), sharey=True,
                             squeeze=False)
    for ax, name in zip(axes.flat, names):
        j = record(ppbench, "memory", *BASE, "--seq", str(seq), "--schedule", name,
                   "--devices", "4", "--microbatches", "8")
        stacked(ax, range(len(j["ranks"])), [r["bytes"] for r in j["ranks"]], 0.7)
        ax.axhline(80, color="black", linestyle="--", linewidth=1, label="80 GiB GPU")
        ax.set_xticks(range(len(j["ranks"])), [str(r["rank"]) for r in j["ranks"]])
        ax.set_title(f"{name} ({j['stages']} stages)", fontsize=9)
    for ax in axes.flat[len(names):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("GiB")
    for ax in axes[-1, :]:
        ax.set_xlabel("rank")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=8)
    fig.suptitle(f"Llama-3-8B shape (32 layers), seq {seq}, bf16, AdamW, D = 4, N = 8, "
                 "micro-batch 1: memory of one step per rank (ppbench memory)", fontsize=10)
    fig.tight_layout(rect=(0, 0.04, 1, 0.96))
    atomic_savefig(fig, out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = OneLineParser(prog="plot_memory_step", description=__doc__.splitlines()[0])
    ap.add_argument("--ppbench", default="build/ppbench")
    ap.add_argument("--out-dir", default="plots/reference", type=Path)
    a = ap.parse_args(argv)
    pyplot("plot_memory_step")  # before any folder is made or ppbench is asked
    check_ppbench(a.ppbench)  # a --ppbench that names no program: no folder made
    output_path(a.out_dir, "--out-dir", folder=True)
    # ppbench's refusal or failure is a PpbenchError with its own exit status (run says it); a
    # --ppbench that prints records of another shape is not the ppbench these figures need.
    with shaped(f"the records of --ppbench {a.ppbench}"):
        pp_seq_figure(a.ppbench, a.out_dir / "memory_8b_pp_seq.png")
        per_rank_figure(a.ppbench, a.out_dir / "memory_per_rank_d4.png")
    print(f"wrote {a.out_dir / 'memory_8b_pp_seq.png'} and {a.out_dir / 'memory_per_rank_d4.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(run("plot_memory_step", main))
