#!/usr/bin/env python3
"""Put ppbench's Llama layer and its parts beside PyTorch's, measured in the same gpu-check run.

    scripts/compare_torch.py CUDA_LAYER_BENCH.json TORCH_REFERENCE.json
                             [--gemm CUDA_GEMM_BENCH.json] [--out FILE] [--goal 1.25]

Inputs: the Google Benchmark JSON of benchmarks/cuda_layer_bench (BM_LlamaLayer/<model>/seq<S>/
mb<M>/<dtype> with counters F_ms, I_ms, W_ms, FIW_ms; BM_LlamaPart/<model>/<part>/seq<S>/mb<M>/
<dtype> with total_ms, per_layer and the pass times) and the JSON of scripts/torch_reference.py
(median_ms of the layer forward + backward; with --parts, parts.<part>.median_ms). The ppbench
rows compared are those at the PyTorch run's sequence, micro-batch and dtype.

Output: FILE (default layer_vs_torch.json beside the PyTorch JSON), written atomically, and a table:
  - the whole layer: ppbench F + I + W ms against PyTorch forward + backward ms, the ratio
    ppbench / PyTorch and whether it meets the goal (ratio <= --goal, default 1.25);
  - each side's model TFLOP/s (torch_reference's layer_flops: backward = 2 x forward, no
    recomputation) and MFU against the best dense GEMM rate measured in the same run: PyTorch's
    torch.mm (the JSON's gemm_peak) and, with --gemm, benchmarks/cuda_gemm_bench's
    BM_SquarePeak rows at the layer's dtype (bf16), whichever is higher;
  - each part matched by name: both sides' ms, ratio, TFLOP/s (torch_reference's part_flops,
    attention's backward with its recomputation: parts_flops_convention), and its gap in the
    layer (its gap times how often the layer runs it, per_layer), sorted by the absolute gap,
    so the rows explain the layer's gap per kernel. "rest" is the layer minus its matched parts
    on each side (RoPE and head permutes, residual adds, gaps between kernels): with it the gaps
    add up to the layer's.
    Where a part is missing or failed on either side, its time is in "rest" too, which is then
    labelled as holding it;
  - parts found on one side only, or whose ppbench row failed, as missing; ppbench rows with
    per_layer 0 (alternatives the layer does not run, e.g. the materialised attention core) beside
    the PyTorch part whose name they extend, outside the sum.

Exit 0 when the comparison was written (met goal or not: see goal_met); 2 with a one-line message
when an input is missing or not what is expected, an option is out of range or --out cannot be
written; 3 when the machine fails the write (a full disk).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

from types import SimpleNamespace

from compare_perf import normalize_name
from results_io import atomic_write
from script_cli import InputError, OneLineParser, json_kind, number, output_path, read_json, \
    run, shaped
from torch_reference import FLOPS_CONVENTION, PART_FLOPS_CONVENTION, layer_flops

# The layer shapes cuda_layer_bench names, to check that PyTorch ran the same one.
MODELS = {"llama3-8b": {"hidden": 4096, "heads": 32, "kv_heads": 8, "ffn": 14336}}
# torch_reference's dtype names -> cuda_layer_bench's.
DTYPES = {"fp32": "f32"}
_SHAPE = r"seq(?P<seq>\d+)/mb(?P<mb>\d+)/(?P<dtype>[^/]+)$"
LAYER_RE = re.compile(r"^BM_LlamaLayer/(?P<model>[^/]+)/" + _SHAPE)
PART_RE = re.compile(r"^BM_LlamaPart/(?P<model>[^/]+)/(?P<part>[^/]+)/" + _SHAPE)
SQUARE_PEAK_RE = re.compile(r"^BM_SquarePeak/(?P<dtype>[^/]+)/\d+$")
_MS_PER_UNIT = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


@dataclass
class Bench:
    """One benchmark of the ppbench file: numeric fields (medians over its rows) or its error."""

    values: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def ms(self, counter: str) -> float | None:
        v = self.values.get(counter, self.values.get("real_time_ms"))
        return v if v is not None and math.isfinite(v) and v > 0 else None


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def load_bench(path: Path) -> tuple[dict, dict[str, Bench]]:
    """The run's context and its benchmarks by name without option suffixes. Repetitions reduce
    to their median; aggregate rows are ignored (as scripts/compare_perf.py does)."""
    data = read_json(path, "benchmark file")
    rows = data.get("benchmarks")
    if not isinstance(rows, list):
        raise InputError(f"{path}: no 'benchmarks' list (not Google Benchmark JSON)")
    context = data.get("context", {})
    if not isinstance(context, dict):
        raise InputError(f"{path}: 'context' is a JSON {json_kind(type(context))}, not an "
                         "object")
    runs: dict[str, list[dict]] = {}
    for b in rows:
        if not isinstance(b, dict) or not isinstance(b.get("name"), str):
            raise InputError(f"{path}: a benchmark entry without a name")
        full = b.get("run_name") or b["name"]
        if not isinstance(full, str):
            raise InputError(f"{path}: {b['name']!r} has a run_name that is not a string: "
                             f"{full!r}")
        if b.get("run_type", "iteration") == "iteration":
            runs.setdefault(normalize_name(full), []).append(b)
    out: dict[str, Bench] = {}
    for name, rs in runs.items():
        failed = [r for r in rs if r.get("error_occurred")]
        if failed:
            out[name] = Bench(error=str(failed[0].get("error_message") or "error"))
            continue
        per_row = []
        for r in rs:
            v = {k: float(x) for k, x in r.items() if is_number(x)}
            unit = r.get("time_unit", "ns")
            if not isinstance(unit, str) or unit not in _MS_PER_UNIT:
                raise InputError(f"{path}: {r['name']!r} has an unknown time_unit {unit!r} "
                                 f"(allowed: {', '.join(_MS_PER_UNIT)})")
            if is_number(r.get("real_time")):
                v["real_time_ms"] = r["real_time"] * _MS_PER_UNIT[unit]
            per_row.append(v)
        common = set.intersection(*(set(v) for v in per_row))
        out[name] = Bench({k: statistics.median(v[k] for v in per_row) for k in common})
    return context, out


def positive(v) -> bool:
    return is_number(v) and math.isfinite(v) and v > 0


def load_torch(path: Path) -> dict:
    data = read_json(path, "PyTorch reference")
    for key in ("seq", "micro_batch", "dtype", "median_ms"):
        if key not in data:
            raise InputError(f"{path}: no '{key}' (not torch_reference.py output)")
    if not positive(data["median_ms"]):
        raise InputError(f"{path}: median_ms is not a positive number: {data['median_ms']!r}")
    # The layer's shape, which its FLOPs (MFU) and the shape check read.
    for key in ("seq", "micro_batch", "hidden", "heads", "kv_heads", "ffn"):
        v = data.get(key)
        if not (isinstance(v, int) and not isinstance(v, bool) and v > 0):
            raise InputError(f"{path}: {key} is not a positive integer: {v!r}")
    parts = data.get("parts", {})
    if not isinstance(parts, dict):
        raise InputError(f"{path}: 'parts' is not an object")
    for name, p in parts.items():
        if not isinstance(p, dict) or not positive(p.get("median_ms")):
            raise InputError(f"{path}: part '{name}' has no positive median_ms")
    return data


def select(bench: dict[str, Bench], torch: dict, bench_path: Path):
    """(model, layer row, {part: row}) of the ppbench rows at PyTorch's shape."""
    want = (str(torch["seq"]), str(torch["micro_batch"]),
            DTYPES.get(str(torch["dtype"]), str(torch["dtype"])))
    layers, parts = [], {}
    for name, b in bench.items():
        m = LAYER_RE.match(name)
        if m and (m["seq"], m["mb"], m["dtype"]) == want:
            layers.append((m["model"], b))
        m = PART_RE.match(name)
        if m and (m["seq"], m["mb"], m["dtype"]) == want:
            parts.setdefault(m["model"], {})[m["part"]] = b
    shape = f"seq {want[0]}, micro-batch {want[1]}, {want[2]}"
    # Where the file has several models at this shape, keep the one PyTorch ran.
    if len(layers) > 1:
        layers = [(m, b) for m, b in layers if m in MODELS and same_dims(MODELS[m], torch)]
    if len(layers) != 1:
        what = "no" if not layers else "more than one"
        raise InputError(f"{bench_path}: {what} BM_LlamaLayer row at {shape} (the PyTorch run's)")
    model, layer = layers[0]
    if layer.error is not None:
        raise InputError(f"{bench_path}: the layer row failed: {layer.error}")
    if layer.ms("FIW_ms") is None:
        raise InputError(f"{bench_path}: the layer row has no positive FIW_ms or real_time")
    dims = MODELS.get(model)
    if dims and not same_dims(dims, torch):
        ran = ", ".join(f"{k} {torch.get(k)}" for k in dims)
        raise InputError(f"shape mismatch: ppbench's {model} is "
                         + ", ".join(f"{k} {v}" for k, v in dims.items())
                         + f"; the PyTorch run had {ran}")
    return model, layer, parts.get(model, {})


def same_dims(dims: dict, torch: dict) -> bool:
    return all(torch.get(k, v) == v for k, v in dims.items())


def count(v: float) -> int | float:
    """Google Benchmark writes every counter as a float: per_layer 2.0 reads better as 2."""
    return int(v) if float(v).is_integer() else v


def ratio(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def gemm_peaks(torch: dict, gemm: dict[str, Bench] | None) -> dict[str, float]:
    """The dense GEMM rates (TFLOP/s) measured in the run, by source: PyTorch's torch.mm
    (torch_reference's gemm_peak) and cuda_gemm_bench's best square GEMM at the layer's dtype."""
    peaks = {}
    torch_peak = torch.get("gemm_peak")
    if isinstance(torch_peak, dict) and positive(torch_peak.get("tflops")):
        peaks["torch.mm"] = float(torch_peak["tflops"])
    dtype = DTYPES.get(str(torch["dtype"]), str(torch["dtype"]))
    squares = [b.values.get("TFLOP/s") for name, b in (gemm or {}).items()
               if b.error is None and (m := SQUARE_PEAK_RE.match(name)) and m["dtype"] == dtype]
    squares = [v for v in squares if positive(v)]
    if squares:
        peaks["cuda_gemm_bench"] = max(squares)
    return peaks


def mfu_json(torch: dict, layer_p: float, layer_t: float, peaks: dict[str, float]) -> dict:
    """Each side's model TFLOP/s and, where a peak was measured, its MFU."""
    dims = SimpleNamespace(micro_batch=torch["micro_batch"], seq=torch["seq"],
                           **{k: torch[k] for k in ("hidden", "heads", "kv_heads", "ffn")})
    flops = layer_flops(dims)
    tflops = {"ppbench": flops / (layer_p * 1e-3) / 1e12, "torch": flops / (layer_t * 1e-3) / 1e12}
    peak = max(peaks.values()) if peaks else None
    return {"flops": flops, "flops_convention": FLOPS_CONVENTION, "tflops": tflops,
            "gemm_peak_tflops": peak, "gemm_peaks": peaks,
            "mfu": {k: v / peak for k, v in tflops.items()} if peak else None}


def compare(bench: dict[str, Bench], context: dict, torch: dict, bench_path: Path,
            goal: float, gemm: dict[str, Bench] | None = None) -> dict:
    model, layer, pparts = select(bench, torch, bench_path)
    tparts = torch.get("parts", {})
    layer_p, layer_t = layer.ms("FIW_ms"), float(torch["median_ms"])
    layer_gap = layer_p - layer_t

    rows, alternatives, failed = [], [], {}
    missing_torch = []
    for name in sorted(pparts):
        b = pparts[name]
        if b.error is not None:
            failed[name] = b.error
        elif b.values.get("per_layer", 1) == 0:
            alternatives.append(name)
        elif name not in tparts:
            missing_torch.append(name)
    # A part whose ppbench row failed is missing there too (its error is in ppbench_failed).
    missing_ppbench = [n for n in sorted(tparts) if n not in pparts or n in failed]

    def side_by_side(name: str, p: Bench, t: dict, per_layer: float) -> dict:
        pm, tm = p.ms("total_ms"), float(t["median_ms"])
        return {"part": name, "per_layer": per_layer, "ppbench_ms": pm, "torch_ms": tm,
                "ratio": ratio(pm, tm), "gap_ms": pm - tm, "layer_gap_ms": per_layer * (pm - tm),
                "ppbench_passes": {k: p.values[k] for k in ("F_ms", "I_ms", "W_ms", "B_ms")
                                   if k in p.values},
                "torch_passes": {k: t[k] for k in ("fwd_median_ms", "bwd_median_ms") if k in t},
                "ppbench_tflops": p.values.get("TFLOP/s"), "torch_tflops": t.get("tflops")}

    sum_p = sum_t = 0.0
    for name in sorted(set(pparts) & set(tparts)):
        p = pparts[name]
        if p.error is not None or name in alternatives:
            continue
        if p.ms("total_ms") is None:
            raise InputError(f"{bench_path}: part '{name}' has no positive total_ms or real_time")
        per_layer = count(p.values.get("per_layer", tparts[name].get("per_layer", 1)))
        row = side_by_side(name, p, tparts[name], per_layer)
        sum_p += per_layer * row["ppbench_ms"]
        sum_t += per_layer * row["torch_ms"]
        rows.append(row)
    if rows:
        rest_p, rest_t = layer_p - sum_p, layer_t - sum_t
        what = "layer minus its matched parts: RoPE and head permutes, residual adds, gaps " \
               "between kernels"
        unmatched = sorted(set(missing_torch) | set(missing_ppbench))
        if unmatched:
            what += "; and the parts not timed on both sides: " + ", ".join(unmatched)
        rows.append({"part": "rest", "per_layer": 1, "ppbench_ms": rest_p, "torch_ms": rest_t,
                     "ratio": ratio(rest_p, rest_t), "gap_ms": rest_p - rest_t,
                     "layer_gap_ms": rest_p - rest_t, "what": what, "holds": unmatched})
    for row in rows:
        row["share_of_layer_gap"] = row["layer_gap_ms"] / layer_gap if layer_gap else None
    rows.sort(key=lambda r: -abs(r["layer_gap_ms"]))

    alt_rows = []
    for name in alternatives:
        base = max((t for t in tparts if name.startswith(t + "_")), key=len, default=None)
        p = pparts[name]
        row = {"part": name, "ppbench_ms": p.ms("total_ms"), "compared_with": base}
        if base is not None and p.ms("total_ms") is not None:
            row.update(torch_ms=float(tparts[base]["median_ms"]),
                       ratio=ratio(p.ms("total_ms"), float(tparts[base]["median_ms"])))
        alt_rows.append(row)

    r = ratio(layer_p, layer_t)
    return {
        "what": "ppbench Llama layer F+I+W and its parts against PyTorch forward+backward",
        "model": model, "seq": torch["seq"], "micro_batch": torch["micro_batch"],
        "dtype": torch["dtype"],
        "gpu": {"ppbench": context.get("gpu"), "torch": torch.get("gpu")},
        "torch_version": torch.get("torch"), "goal_ratio": goal,
        # Which SDPA kernel PyTorch's attention ran on (torch_reference.py profiles one step):
        # the math path would make the ratio look better than against flash or cuDNN.
        "torch_sdpa_kernel": torch.get("sdpa_kernel"),
        "layer": {"ppbench_ms": layer_p, "torch_ms": layer_t, "ratio": r,
                  "gap_ms": layer_gap, "goal_met": r is not None and r <= goal,
                  "ppbench_passes": {k: layer.values[k] for k in ("F_ms", "I_ms", "W_ms")
                                     if k in layer.values},
                  "torch_passes": {k: torch[k] for k in ("fwd_median_ms", "bwd_median_ms")
                                   if k in torch},
                  **mfu_json(torch, layer_p, layer_t, gemm_peaks(torch, gemm))},
        "torch_rmsnorm": torch.get("rmsnorm"),
        "parts": rows, "alternatives": alt_rows,
        # The rows' ppbench_tflops and torch_tflops, not shares of the layer's model FLOPs.
        "parts_flops_convention": PART_FLOPS_CONVENTION,
        "missing": {"torch": missing_torch, "ppbench": missing_ppbench},
        "ppbench_failed": failed,
        "torch_parts_timed": "parts" in torch,
    }


def fmt(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def print_table(c: dict, out=sys.stdout) -> None:
    L = c["layer"]
    gpu = c["gpu"]["torch"] or c["gpu"]["ppbench"] or "unknown GPU"
    print(f"ppbench vs PyTorch: {c['model']} layer, seq {c['seq']}, micro-batch "
          f"{c['micro_batch']}, {c['dtype']}, on {gpu}", file=out)
    verdict = "met" if L["goal_met"] else "NOT met"
    kernel = c.get("torch_sdpa_kernel")
    if kernel:
        note = " (not a fused kernel: the ratio flatters ppbench)" if kernel == "math" else ""
        print(f"PyTorch's attention ran on SDPA's {kernel} kernels{note}", file=out)
    print(f"layer F+I+W: ppbench {L['ppbench_ms']:.3f} ms, PyTorch {L['torch_ms']:.3f} ms, ratio "
          f"{fmt(L['ratio'], '.3f')} (goal <= {c['goal_ratio']:g}: {verdict})", file=out)
    t = L["tflops"]
    if L["mfu"]:
        sources = ", ".join(f"{k} {v:.0f}" for k, v in L["gemm_peaks"].items())
        print(f"model TFLOP/s: ppbench {t['ppbench']:.0f}, PyTorch {t['torch']:.0f}; MFU ppbench "
              f"{L['mfu']['ppbench'] * 100:.1f} %, PyTorch {L['mfu']['torch'] * 100:.1f} % of "
              f"{L['gemm_peak_tflops']:.0f} TFLOP/s, the best dense GEMM of this run "
              f"({sources})", file=out)
    else:
        print(f"model TFLOP/s: ppbench {t['ppbench']:.0f}, PyTorch {t['torch']:.0f}; no MFU: no "
              "GEMM peak measured in this run (torch_reference's gemm_peak, or --gemm)", file=out)
    if c["parts"]:
        print(f"{'part':<28} {'n':>2} {'ppbench ms':>11} {'torch ms':>9} {'ratio':>7} "
              f"{'layer gap ms':>13} {'share':>6}", file=out)
        for r in c["parts"]:
            share = r["share_of_layer_gap"]
            share = "-" if share is None else f"{share * 100:.0f}%"
            name = r["part"]
            if name == "rest":
                name = "rest (layer - parts)" if not r["holds"] else "rest (+ unmatched parts)"
            print(f"{name:<28} {r['per_layer']:>2g} {r['ppbench_ms']:>11.3f} "
                  f"{r['torch_ms']:>9.3f} {fmt(r['ratio'], '.3f'):>7} "
                  f"{r['layer_gap_ms']:>+13.3f} {share:>6}", file=out)
    for r in c["alternatives"]:
        beside = (f"PyTorch {r['compared_with']} {r['torch_ms']:.3f} ms, ratio "
                  f"{fmt(r['ratio'], '.3f')}" if "torch_ms" in r else "nothing to compare with")
        print(f"not in the layer: {r['part']} {fmt(r['ppbench_ms'], '.3f')} ms ({beside})",
              file=out)
    if not c["torch_parts_timed"]:
        print("PyTorch parts not timed (torch_reference.py ran without --parts)", file=out)
    for side, names in c["missing"].items():
        if names and (side != "torch" or c["torch_parts_timed"]):
            label = "PyTorch" if side == "torch" else "ppbench"
            print(f"missing on the {label} side: {', '.join(names)}", file=out)
    for name, err in c["ppbench_failed"].items():
        print(f"ppbench part {name} failed: {err}", file=out)


def main(argv: list[str] | None = None) -> int:
    p = OneLineParser(prog="compare_torch", description=__doc__.splitlines()[0])
    p.add_argument("bench", type=Path, help="cuda_layer_bench's Google Benchmark JSON")
    p.add_argument("torch", type=Path,
                   help="torch_reference.py's JSON (ideally with --parts)")
    p.add_argument("--gemm", type=Path,
                   help="cuda_gemm_bench's Google Benchmark JSON from the same run: its best "
                        "BM_SquarePeak row at the layer's dtype is a GEMM peak for MFU too")
    p.add_argument("--out", type=Path,
                   help="where to write the comparison (default: layer_vs_torch.json beside the "
                        "PyTorch JSON)")
    p.add_argument("--goal", type=number(float, 0, low_open=True), default=1.25,
                   help="the layer's ppbench / PyTorch time ratio to meet (default 1.25)")
    a = p.parse_args(argv)
    if a.out is not None:
        output_path(a.out, "--out")
    context, bench = load_bench(a.bench)
    torch = load_torch(a.torch)
    gemm = load_bench(a.gemm)[1] if a.gemm is not None else None
    # The default goes beside the PyTorch JSON, so it is checked once that file was read.
    out = a.out or output_path(a.torch.parent / "layer_vs_torch.json", "--out (default)")
    with shaped(f"the inputs {a.bench} and {a.torch}"):
        result = compare(bench, context, torch, a.bench, a.goal, gemm)
    atomic_write(out, json.dumps(result, indent=2) + "\n")
    print_table(result)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(run("compare_torch", main))
