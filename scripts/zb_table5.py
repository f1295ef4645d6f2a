#!/usr/bin/env python3
"""Reproduce the Zero Bubble paper's bubble-rate table with `ppbench simulate`.

Qi, Wan, Huang & Lin, "Zero Bubble Pipeline Parallelism" (ICLR 2024, arXiv 2401.10241),
section 5.3, Table 5: the bubble rates of 1F1B, 1F1B-I, ZB-H1, ZB-H2, ZB-1p and ZB-2p for four
GPT-3-like models (Table 3) at three micro-batch counts each. The paper computes them, it does not
measure them ("based on theoretical calculations instead of real experiments"), from the F, B, W
and communication times it profiled in its ZB-2p runs (Appendix D, Table 9), with

    bubble rate = (cost - m (T_F + T_B + T_W)) / cost,  cost = the longest stage's execution time

which is ppbench's zb_bubble_rate (docs/metrics.md) when every stage costs the same.

Each cell here is one `ppbench simulate --format json` with that row's profiled costs on every
stage (the paper's B is ppbench's I; 1F1B runs the full backward B = I + W):

  1F1B    1f1b
  1F1B-I  interleaved-1f1b with one chunk per transformer layer, as the paper's runs ("each
          transformer layer serves as a chunk"): v = the layers of a middle stage, (layers + 2) / p
          (3, 4, 3, 2), each chunk costing 1/v of the stage's profiled time; the same delay per
          transfer
  ZB-H1, ZB-H2
  ZB-1p, ZB-2p  limit p M_B and 2p M_B, with the paper's memory accounting (Table 1: F holds
          M_B = sb(34h + 5as), I frees all but M_W = 32sbh, W frees M_W), so --w-memory
          M_W / M_B = 32h / (34h + 5as) from Table 3's hidden size h, heads a and s = 1024

Writes results/reference/zb_table5.json (atomically): per row the costs, the paper's and
ppbench's rates, and a markdown table (also printed). Not run in CI (it needs a built ppbench).

  scripts/zb_table5.py --ppbench build/ppbench
"""
from __future__ import annotations

import sys

from results_io import PpbenchError, ppbench_json, record_value, table_script_main

PAPER = "Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024 (arXiv 2401.10241)"
COLUMNS = ["1F1B", "1F1B-I", "ZB-H1", "ZB-H2", "ZB-1p", "ZB-2p"]

# Table 3: transformer layers and pipeline stages; the first and last stage hold one layer fewer
# than the others, so a middle stage holds (layers + 2) / p of them.
MODELS = {"1.5B": (22, 8), "6.2B": (30, 8), "14.6B": (46, 16), "28.3B": (62, 32)}
# Table 3: hidden size h, attention heads a; every model has sequence length s = 1024.
SHAPES = {"1.5B": (2304, 24), "6.2B": (4096, 32), "14.6B": (5120, 40), "28.3B": (6144, 48)}
SEQUENCE = 1024

# Table 9 (Appendix D): model, m, T_F, T_B, T_W, T_comm (ms).
PROFILED = [
    ("1.5B", 24, 18.522, 18.086, 9.337, 0.601),
    ("1.5B", 32, 18.513, 18.086, 9.331, 0.626),
    ("1.5B", 64, 18.546, 18.097, 9.321, 0.762),
    ("6.2B", 24, 29.718, 29.444, 19.927, 0.527),
    ("6.2B", 32, 29.802, 29.428, 19.530, 0.577),
    ("6.2B", 64, 29.935, 29.621, 19.388, 0.535),
    ("14.6B", 48, 11.347, 11.248, 8.132, 0.377),
    ("14.6B", 64, 11.307, 11.254, 8.101, 0.379),
    ("14.6B", 128, 11.325, 11.308, 8.109, 0.378),
    ("28.3B", 96, 10.419, 10.207, 7.715, 0.408),
    ("28.3B", 128, 10.408, 10.204, 7.703, 0.408),
    ("28.3B", 256, 10.402, 10.248, 7.698, 0.460),
]

# Table 5: 1F1B, 1F1B-I, ZB-H1, ZB-H2, ZB-1p, ZB-2p per (model, m).
PAPER_RATES = {
    ("1.5B", 24): [0.2431, 0.1055, 0.1585, 0.1083, 0.1585, 0.0433],
    ("1.5B", 32): [0.1985, 0.0818, 0.1242, 0.0837, 0.1242, 0.0039],
    ("1.5B", 64): [0.1240, 0.0443, 0.0674, 0.0444, 0.0674, 0.0026],
    ("6.2B", 24): [0.2347, 0.0808, 0.1323, 0.0698, 0.1323, 0.0029],
    ("6.2B", 32): [0.1898, 0.0628, 0.1045, 0.0559, 0.1045, 0.0022],
    ("6.2B", 64): [0.1091, 0.0320, 0.0554, 0.0294, 0.0554, 0.0010],
    ("14.6B", 48): [0.2552, 0.1104, 0.1397, 0.0672, 0.1397, 0.0066],
    ("14.6B", 64): [0.2082, 0.0852, 0.1088, 0.0516, 0.1088, 0.0054],
    ("14.6B", 128): [0.1251, 0.0445, 0.0576, 0.0266, 0.0576, 0.0028],
    ("28.3B", 96): [0.2646, 0.1493, 0.1421, 0.0641, 0.1421, 0.0038],
    ("28.3B", 128): [0.2168, 0.1164, 0.1106, 0.0490, 0.1106, 0.0029],
    ("28.3B", 256): [0.1352, 0.0624, 0.0594, 0.0257, 0.0594, 0.0018],
}


def chunks_per_stage(model: str) -> int:
    layers, p = MODELS[model]
    return (layers + 2) // p


def w_memory(model: str) -> float:
    """M_W / M_B of one layer (the paper's Table 1), the share of the activations W still needs."""
    h, a = SHAPES[model]
    return 32 * h / (34 * h + 5 * a * SEQUENCE)


def cell_args(column: str, model: str, p: int, m: int, f: float, b: float, w: float,
              comm: float) -> list[str]:
    """The `ppbench simulate` flags of one cell."""
    scale, extra, name = 1.0, [], {"1F1B": "1f1b", "ZB-H1": "zb-h1", "ZB-H2": "zb-h2",
                                   "ZB-1p": "zb-1p", "ZB-2p": "zb-2p"}.get(column)
    if column == "1F1B-I":
        v = chunks_per_stage(model)
        name, scale, extra = "interleaved-1f1b", 1.0 / v, ["--chunks", str(v)]
    elif column in ("ZB-1p", "ZB-2p"):
        extra = ["--w-memory", repr(w_memory(model))]
    cost = f"F={f * scale!r},I={b * scale!r},W={w * scale!r}"
    return ["--schedule", name, "--devices", str(p), "--microbatches", str(m), "--cost", cost,
            "--comm", repr(comm), "--format", "json", *extra]


def markdown(rows: list[dict]) -> str:
    head = "| Model | p | m | " + " | ".join(COLUMNS) + " |"
    lines = [head, "|" + "---|" * (3 + len(COLUMNS))]
    for r in rows:
        cells = [f"{r['ppbench'][c]:.4f} ({r['paper'][c]:.4f})" for c in COLUMNS]
        lines.append(f"| {r['model']} | {r['p']} | {r['m']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def build(ppbench: str) -> dict:
    rows = []
    for model, m, f, b, w, comm in PROFILED:
        p = MODELS[model][1]
        row = {"model": model, "p": p, "m": m,
               "costs": {"F": f, "B": b, "W": w, "comm": comm},
               "chunks_1f1b_i": chunks_per_stage(model), "w_memory": w_memory(model),
               "paper": dict(zip(COLUMNS, PAPER_RATES[(model, m)])), "ppbench": {},
               "makespan": {}}
        for column in COLUMNS:
            args = ["simulate", *cell_args(column, model, p, m, f, b, w, comm)]
            record = ppbench_json(ppbench, args)
            where = "ppbench " + " ".join(args)
            row["ppbench"][column] = record_value(record, "zb_bubble_rate", where)
            row["makespan"][column] = record_value(record, "makespan", where)
        rows.append(row)
        print(f"{model} p={p} m={m}: " + ", ".join(
            f"{c} {row['ppbench'][c]:.4f} ({row['paper'][c]:.4f})" for c in COLUMNS),
            file=sys.stderr)
    return {
        "source": PAPER + ": Table 5 (bubble rates) from the costs of Table 9 (Appendix D)",
        "definition": "bubble rate = (cost - m(F+B+W)) / cost, cost = the longest stage's span "
                      "(ppbench's zb_bubble_rate)",
        "columns": COLUMNS,
        "rows": rows,
        "markdown": markdown(rows),
    }


def main(argv: list[str] | None = None) -> int:
    return table_script_main(__doc__, "zb_table5", "results/reference/zb_table5.json", build,
                             (OSError, PpbenchError), argv)


if __name__ == "__main__":
    sys.exit(main())
