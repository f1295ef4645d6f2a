"""scripts/compare_torch.py on small hand-written cuda_layer_bench and torch_reference JSON files,
and scripts/torch_reference.py's contract where no GPU (or no torch) is present."""

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPARE = ROOT / "scripts" / "compare_torch.py"
TORCH_REF = ROOT / "scripts" / "torch_reference.py"
SHAPE = "seq4096/mb1/bf16"

# ppbench / PyTorch ms per part, and how often the layer runs it. With the layer at 40 / 30 ms the
# per-layer gaps are swiglu 4.0, attention 3.0, rest 2.4, qkv 0.3, rmsnorm 0.2, out 0.1 (sum 10).
PARTS = {"rmsnorm": (0.5, 0.4, 2), "qkv_proj": (3.0, 2.7, 1), "attention_core": (9.0, 6.0, 1),
         "out_proj": (2.0, 1.9, 1), "swiglu_mlp": (20.0, 16.0, 1)}


def gbench_row(name, suffix, error=None, **counters):
    """One iteration row as Google Benchmark writes it (user counters are top-level keys)."""
    full = name + suffix
    t = counters.get("total_ms", counters.get("FIW_ms", 1.0))
    row = {"name": full, "run_name": full, "run_type": "iteration", "repetitions": 1,
           "repetition_index": 0, "threads": 1, "iterations": 50, "real_time": t,
           "cpu_time": 0.01, "time_unit": "ms", **counters}
    if error is not None:
        row.update(error_occurred=True, error_message=error, real_time=0.0)
    return row


def layer_row(fiw=40.0, **kw):
    return gbench_row(f"BM_LlamaLayer/llama3-8b/{SHAPE}", "/iterations:30/manual_time",
                      F_ms=fiw * 0.3, I_ms=fiw * 0.5, W_ms=fiw * 0.2, FIW_ms=fiw,
                      arena_peak_GiB=3.5, **kw)


def part_row(part, total, per_layer=1, error=None):
    passes = ({"F_ms": total / 3, "B_ms": 2 * total / 3} if part.startswith("attention")
              else {"F_ms": total / 3, "I_ms": total / 3, "W_ms": total / 3})
    return gbench_row(f"BM_LlamaPart/llama3-8b/{part}/{SHAPE}", "/iterations:50/manual_time",
                      error=error, total_ms=total, per_layer=float(per_layer),
                      **{"TFLOP/s": 500.0}, **passes)


def default_bench_rows():
    rows = [layer_row()]
    rows += [part_row(name, p, n) for name, (p, _, n) in PARTS.items()]
    rows.append(part_row("attention_core_materialised", 18.0, per_layer=0))
    return rows


def write_bench(tmp_path, rows, context=None):
    path = tmp_path / "cuda_layer_bench.json"
    path.write_text(json.dumps({"context": context or {"gpu": "Test GPU 80GB"},
                                "benchmarks": rows}))
    return path


def torch_doc(median=30.0, parts="default", **over):
    doc = {"what": "llama decoder layer forward+backward, PyTorch reference", "hidden": 4096,
           "heads": 32, "kv_heads": 8, "ffn": 14336, "seq": 4096, "micro_batch": 1,
           "dtype": "bf16", "iters": 20, "median_ms": median, "min_ms": median,
           "max_ms": median, "fwd_median_ms": median / 3, "bwd_median_ms": 2 * median / 3,
           "tflops": 400.0, "gpu": "Test GPU 80GB", "torch": "2.9.0"}
    if parts == "default":
        parts = {name: {"median_ms": t, "per_layer": n, "fwd_median_ms": t / 3,
                        "bwd_median_ms": 2 * t / 3} for name, (_, t, n) in PARTS.items()}
    if parts is not None:
        doc["parts"] = parts
    doc.update(over)
    return doc


def write_torch(tmp_path, doc):
    path = tmp_path / "torch_reference.json"
    path.write_text(json.dumps(doc))
    return path


def run(*args):
    proc = subprocess.run([sys.executable, str(COMPARE), *map(str, args)],
                          capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def compare(tmp_path, rows=None, doc=None, *extra):
    bench = write_bench(tmp_path, default_bench_rows() if rows is None else rows)
    torch = write_torch(tmp_path, torch_doc() if doc is None else doc)
    out = tmp_path / "out" / "layer_vs_torch.json"
    rc, stdout, stderr = run(bench, torch, "--out", out, *extra)
    assert rc == 0, stderr
    return json.loads(out.read_text()), stdout


def by_part(result):
    return {r["part"]: r for r in result["parts"]}


def test_layer_and_part_ratios(tmp_path):
    result, out = compare(tmp_path)
    layer = result["layer"]
    assert layer["ppbench_ms"] == pytest.approx(40.0)
    assert layer["torch_ms"] == pytest.approx(30.0)
    assert layer["ratio"] == pytest.approx(40 / 30)
    assert layer["gap_ms"] == pytest.approx(10.0)
    assert layer["goal_met"] is False
    assert layer["ppbench_passes"] == pytest.approx({"F_ms": 12.0, "I_ms": 20.0, "W_ms": 8.0})
    parts = by_part(result)
    for name, (p, t, n) in PARTS.items():
        assert parts[name]["ratio"] == pytest.approx(p / t), name
        assert parts[name]["per_layer"] == n
        assert parts[name]["layer_gap_ms"] == pytest.approx(n * (p - t)), name
    # The rest is the layer minus its parts on each side: 40 - 35 and 30 - 27.4.
    assert parts["rest"]["ppbench_ms"] == pytest.approx(5.0)
    assert parts["rest"]["torch_ms"] == pytest.approx(2.6)
    # With the rest the gaps explain the layer's gap exactly.
    assert sum(r["layer_gap_ms"] for r in result["parts"]) == pytest.approx(10.0)
    assert sum(r["share_of_layer_gap"] for r in result["parts"]) == pytest.approx(1.0)
    assert "ratio 1.333 (goal <= 1.25: NOT met)" in out


def test_parts_sorted_by_absolute_gap(tmp_path):
    result, out = compare(tmp_path)
    order = [r["part"] for r in result["parts"]]
    assert order == ["swiglu_mlp", "attention_core", "rest", "qkv_proj", "rmsnorm", "out_proj"]
    table = [line.split()[0] for line in out.splitlines()
             if line.split() and line.split()[0] in PARTS or line.startswith("rest ")]
    assert table == order


def test_goal_is_met_at_the_ratio(tmp_path):
    rows = [layer_row(fiw=37.5)] + default_bench_rows()[1:]
    result, out = compare(tmp_path, rows)
    assert result["layer"]["ratio"] == pytest.approx(1.25)
    assert result["layer"]["goal_met"] is True
    assert "goal <= 1.25: met" in out
    result, _ = compare(tmp_path, rows, None, "--goal", "1.2")
    assert result["layer"]["goal_met"] is False


def test_parts_matched_by_name_not_order(tmp_path):
    rows = list(reversed(default_bench_rows()))
    doc = torch_doc()
    doc["parts"] = dict(reversed(list(doc["parts"].items())))
    result, _ = compare(tmp_path, rows, doc)
    parts = by_part(result)
    assert parts["attention_core"]["ppbench_ms"] == pytest.approx(9.0)
    assert parts["attention_core"]["torch_ms"] == pytest.approx(6.0)
    assert parts["attention_core"]["ppbench_passes"] == pytest.approx({"F_ms": 3.0, "B_ms": 6.0})
    assert result["missing"] == {"torch": [], "ppbench": []}
    # The parts' TFLOP/s count attention's recomputation, the layer's MFU does not: both named.
    assert "2.5 x forward" in result["parts_flops_convention"]
    assert "no recomputation" in result["layer"]["flops_convention"]


def test_alternative_core_shown_beside_torch_not_summed(tmp_path):
    result, out = compare(tmp_path)
    assert "attention_core_materialised" not in by_part(result)
    (alt,) = result["alternatives"]
    assert alt["part"] == "attention_core_materialised"
    assert alt["compared_with"] == "attention_core"
    assert alt["ratio"] == pytest.approx(18.0 / 6.0)
    assert "not in the layer: attention_core_materialised 18.000 ms" in out


def test_missing_part_reported(tmp_path):
    doc = torch_doc()
    del doc["parts"]["swiglu_mlp"]
    doc["parts"]["rope"] = {"median_ms": 0.3, "per_layer": 1}
    result, out = compare(tmp_path, None, doc)
    assert result["missing"] == {"torch": ["swiglu_mlp"], "ppbench": ["rope"]}
    assert "missing on the PyTorch side: swiglu_mlp" in out
    assert "missing on the ppbench side: rope" in out
    parts = by_part(result)
    assert "swiglu_mlp" not in parts and "rope" not in parts
    # An unmatched part stays in its side's rest: 40 - (1 + 3 + 9 + 2), 30 - (0.8 + 2.7 + 6 + 1.9).
    assert parts["rest"]["ppbench_ms"] == pytest.approx(25.0)
    assert parts["rest"]["torch_ms"] == pytest.approx(18.6)


def test_failed_ppbench_part_is_missing_with_its_error(tmp_path):
    rows = [r for r in default_bench_rows() if "/attention_core/" not in r["name"]]
    rows.append(part_row("attention_core", 0.0, error="does not fit on this device: arena"))
    result, out = compare(tmp_path, rows)
    assert result["missing"]["ppbench"] == ["attention_core"]
    assert result["ppbench_failed"] == {"attention_core": "does not fit on this device: arena"}
    assert "ppbench part attention_core failed: does not fit on this device" in out


def test_torch_without_parts_compares_the_layer(tmp_path):
    result, out = compare(tmp_path, None, torch_doc(parts=None))
    assert result["layer"]["ratio"] == pytest.approx(40 / 30)
    assert result["parts"] == []
    assert result["torch_parts_timed"] is False
    assert "ran without --parts" in out


def test_repetitions_reduce_to_their_median(tmp_path):
    rows = [layer_row(fiw=38.0), layer_row(fiw=45.0), layer_row(fiw=40.0)]
    rows.append({**layer_row(fiw=99.0), "run_type": "aggregate", "aggregate_name": "mean",
                 "name": f"BM_LlamaLayer/llama3-8b/{SHAPE}/iterations:30/manual_time_mean"})
    result, _ = compare(tmp_path, rows + default_bench_rows()[1:])
    assert result["layer"]["ppbench_ms"] == pytest.approx(40.0)


def test_default_output_beside_the_torch_json_written_whole(tmp_path):
    bench = write_bench(tmp_path, default_bench_rows())
    torch = write_torch(tmp_path, torch_doc())
    rc, out, err = run(bench, torch)
    assert rc == 0, err
    written = tmp_path / "layer_vs_torch.json"
    assert json.loads(written.read_text())["layer"]["ratio"] == pytest.approx(40 / 30)
    assert f"wrote {written}" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "cuda_layer_bench.json", "layer_vs_torch.json", "torch_reference.json"]


def bad_bench_not_json(tmp_path):
    (tmp_path / "b.json").write_text("{not json")
    return tmp_path / "b.json", write_torch(tmp_path, torch_doc())


def bad_bench_missing(tmp_path):
    return tmp_path / "nope.json", write_torch(tmp_path, torch_doc())


def bad_bench_not_gbench(tmp_path):
    (tmp_path / "b.json").write_text(json.dumps({"context": {}}))
    return tmp_path / "b.json", write_torch(tmp_path, torch_doc())


def bad_torch_not_json(tmp_path):
    (tmp_path / "t.json").write_text("")
    return write_bench(tmp_path, default_bench_rows()), tmp_path / "t.json"


def bad_torch_no_median(tmp_path):
    doc = torch_doc()
    del doc["median_ms"]
    return write_bench(tmp_path, default_bench_rows()), write_torch(tmp_path, doc)


def bad_torch_part(tmp_path):
    doc = torch_doc()
    doc["parts"]["qkv_proj"] = {"median_ms": "fast"}
    return write_bench(tmp_path, default_bench_rows()), write_torch(tmp_path, doc)


def bad_no_layer_at_shape(tmp_path):
    return write_bench(tmp_path, default_bench_rows()), write_torch(tmp_path, torch_doc(seq=8192))


def bad_layer_failed(tmp_path):
    rows = [layer_row(error="does not fit on this device")] + default_bench_rows()[1:]
    return write_bench(tmp_path, rows), write_torch(tmp_path, torch_doc())


def bad_shape_mismatch(tmp_path):
    return write_bench(tmp_path, default_bench_rows()), write_torch(tmp_path,
                                                                    torch_doc(hidden=2048))


@pytest.mark.parametrize("make,words", [
    (bad_bench_not_json, "not JSON"), (bad_bench_missing, "no such file"),
    (bad_bench_not_gbench, "no 'benchmarks' list"), (bad_torch_not_json, "not JSON"),
    (bad_torch_no_median, "no 'median_ms'"), (bad_torch_part, "part 'qkv_proj'"),
    (bad_no_layer_at_shape, "no BM_LlamaLayer row at seq 8192"),
    (bad_layer_failed, "the layer row failed"), (bad_shape_mismatch, "shape mismatch"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, make, words):
    bench, torch = make(tmp_path)
    out = tmp_path / "layer_vs_torch.json"
    rc, stdout, stderr = run(bench, torch, "--out", out)
    assert rc == 2
    assert stdout == ""
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("compare_torch: ") and words in lines[0]
    assert not out.exists()


def test_torch_reference_exits_3_without_torch_or_gpu(tmp_path):
    # No GPU is visible either way (CUDA_VISIBLE_DEVICES=""), so this never times anything. A
    # missing module or GPU is the machine's (exit 3), not the caller's input (exit 2).
    out = tmp_path / "torch.json"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, str(TORCH_REF), "--parts", "--out", str(out)],
                          capture_output=True, text=True, check=False, env=env)
    assert proc.returncode == 3
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("torch_reference: ")
    assert not out.exists()


def test_torch_reference_parts_use_the_benchmark_names_and_flops():
    import torch_reference as tr

    a = tr.parse_args(["--parts"])
    flops = tr.part_flops(a)
    assert set(tr.PARTS) == set(flops) == set(PARTS)
    assert tr.PARTS["rmsnorm"] == 2 and flops["rmsnorm"] is None
    t = 4096
    assert flops["qkv_proj"] == pytest.approx(6 * t * 4096 * 6144)
    assert flops["out_proj"] == pytest.approx(6 * t * 4096 * 4096)
    assert flops["swiglu_mlp"] == pytest.approx(6 * t * (4096 * 28672 + 14336 * 4096))
    assert flops["attention_core"] == pytest.approx(3.5 * 4 * 32 * 4096 ** 2 * 128 / 2)
    # The whole layer's F + B at 3x forward, as torch_reference always reported it.
    assert tr.layer_flops(a) == pytest.approx(
        flops["qkv_proj"] + flops["out_proj"] + flops["swiglu_mlp"]
        + flops["attention_core"] * 3 / 3.5)


def test_sdpa_kernel_family_from_kernel_names():
    import torch_reference as tr

    assert tr.sdpa_kernel_family([]) == "unknown"
    assert tr.sdpa_kernel_family(
        ["void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128>>",
         "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<>"]) == "flash"
    assert tr.sdpa_kernel_family(["fmha_cutlassF_bf16_aligned_64x64_rf_sm80",
                                  "fmha_cutlassB_bf16_aligned_128x64_k128_sm80"]) == "mem_efficient"
    # cuDNN's fused kernels may say "flash" too: cuDNN is named first.
    assert tr.sdpa_kernel_family(["cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma"]) \
        == "cudnn"
    # Matmuls and a softmax without any attention kernel: the unfused math path.
    assert tr.sdpa_kernel_family(["sm90_xmma_gemm_bf16bf16_bf16f32", "softmax_warp_forward",
                                  "elementwise_kernel"]) == "math"


def test_the_sdpa_kernel_pytorch_ran_is_shown_and_kept(tmp_path):
    result, out = compare(tmp_path, None, torch_doc(sdpa_kernel="math"))
    assert result["torch_sdpa_kernel"] == "math"
    assert "PyTorch's attention ran on SDPA's math kernels (not a fused kernel" in out
    result, out = compare(tmp_path, None, torch_doc(sdpa_kernel="flash"))
    assert result["torch_sdpa_kernel"] == "flash" and "SDPA's flash kernels\n" in out
    result, out = compare(tmp_path)  # an older record without the field
    assert result["torch_sdpa_kernel"] is None and "SDPA's" not in out


# The default layer's model FLOPs by hand: QKV 2*t*h*(32 + 2*8)*128 and O 2*t*h*h, gate|up
# 2*t*h*2*14336 and down 2*t*14336*h, causal attention half of 4*32*s^2*128; forward + backward
# = 3x forward.
LAYER_FLOPS = 5_772_436_045_824.0


def gemm_bench(tmp_path, rows):
    path = tmp_path / "cuda_gemm_bench.json"
    path.write_text(json.dumps({"context": {}, "benchmarks": rows}))
    return path


def square_row(n, tflops, dtype="bf16", **kw):
    return gbench_row(f"BM_SquarePeak/{dtype}/{n}", "/iterations:30/manual_time",
                      **{"TFLOP/s": tflops}, **kw)


def test_mfu_against_the_best_gemm_measured_in_the_run(tmp_path):
    doc = torch_doc(gemm_peak={"tflops": 700.0, "by_size": {"8192": 700.0}})
    rows = [square_row(4096, 650.0), square_row(8192, 720.0), square_row(16384, 0.0, error="oom"),
            square_row(8192, 900.0, dtype="f32")]
    aggregate = dict(square_row(8192, 5000.0), run_type="aggregate", aggregate_name="mean")
    result, out = compare(tmp_path, None, doc, "--gemm", gemm_bench(tmp_path, rows + [aggregate]))
    layer = result["layer"]
    assert layer["flops"] == pytest.approx(LAYER_FLOPS)
    # The bf16 squares only, without the failed and aggregate rows: 720 beats torch.mm's 700.
    assert layer["gemm_peaks"] == {"torch.mm": 700.0, "cuda_gemm_bench": 720.0}
    assert layer["gemm_peak_tflops"] == 720.0
    assert layer["tflops"]["ppbench"] == pytest.approx(LAYER_FLOPS / 40e-3 / 1e12)
    assert layer["tflops"]["torch"] == pytest.approx(LAYER_FLOPS / 30e-3 / 1e12)
    assert layer["mfu"]["ppbench"] == pytest.approx(LAYER_FLOPS / 40e-3 / 1e12 / 720)
    assert layer["mfu"]["torch"] == pytest.approx(LAYER_FLOPS / 30e-3 / 1e12 / 720)
    assert "MFU ppbench 20.0 %, PyTorch 26.7 % of 720 TFLOP/s" in out
    # Without --gemm, PyTorch's own torch.mm is the peak.
    result, _ = compare(tmp_path, None, doc)
    assert result["layer"]["gemm_peak_tflops"] == 700.0


def test_no_mfu_without_a_peak_from_the_run(tmp_path):
    result, out = compare(tmp_path)
    assert result["layer"]["mfu"] is None and result["layer"]["gemm_peaks"] == {}
    assert result["layer"]["tflops"]["ppbench"] == pytest.approx(LAYER_FLOPS / 40e-3 / 1e12)
    assert "no MFU: no GEMM peak measured in this run" in out


def test_rest_says_it_holds_a_part_that_failed(tmp_path):
    rows = [r for r in default_bench_rows() if "/attention_core/" not in r["name"]]
    rows.append(part_row("attention_core", 0.0, error="does not fit on this device: arena"))
    result, out = compare(tmp_path, rows)
    rest = by_part(result)["rest"]
    assert rest["holds"] == ["attention_core"]
    assert "parts not timed on both sides: attention_core" in rest["what"]
    assert "rest (+ unmatched parts)" in out and "rest (layer - parts)" not in out
    result, out = compare(tmp_path)
    assert by_part(result)["rest"]["holds"] == [] and "rest (layer - parts)" in out


def test_torch_json_without_the_layer_shape_exits_2(tmp_path):
    doc = torch_doc()
    del doc["ffn"]
    bench = write_bench(tmp_path, default_bench_rows())
    rc, _, err = run(bench, write_torch(tmp_path, doc))
    assert rc == 2 and "ffn is not a positive integer: None" in err


def test_torch_reference_uses_pytorchs_own_rmsnorm_where_it_has_one():
    import torch_reference as tr

    calls = []

    def rms_norm(x, shape, w, eps):
        calls.append((shape, w, eps))
        return "normed"

    class X:
        shape = (1, 8, 4096)

    fused = SimpleNamespace(nn=SimpleNamespace(functional=SimpleNamespace(rms_norm=rms_norm)))
    fn, name = tr.rmsnorm_impl(fused, "bf16")
    assert name == "torch.nn.functional.rms_norm"
    assert fn(X(), "w") == "normed" and calls == [((4096,), "w", 1e-5)]
    older = SimpleNamespace(nn=SimpleNamespace(functional=SimpleNamespace()))
    _, name = tr.rmsnorm_impl(older, "bf16")
    assert name.startswith("eager")
