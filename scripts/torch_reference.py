#!/usr/bin/env python3
"""Time one Llama-shaped decoder layer forward + backward in PyTorch: the reference that ppbench's
CUDA layer (F + I + W) is compared with in the same run on the same GPU.

Defaults are a Llama-3-8B layer: hidden 4096, 32 heads, 8 kv heads, ffn 14336, sequence 4096,
micro-batch 1, bf16. The layer is built as ppbench builds it (pre-norm RMSNorm, one fused qkv
projection without bias, rotate-half RoPE, causal GQA through scaled_dot_product_attention,
SwiGLU with a fused gate|up projection, residuals), so the FLOPs are the same; each op is
PyTorch's own best (SDPA, torch.nn.functional.rms_norm where this torch has it). The JSON names
the SDPA kernels the layer ran and the layer's model FLOPs, and holds a dense GEMM rate of the
same GPU measured in the same run (gemm_peak, torch.mm on random values), which
scripts/compare_torch.py turns into each side's MFU.

With --parts it also times the layer's parts alone, forward + backward each, under the names
benchmarks/cuda_layer_bench.cpp gives its BM_LlamaPart rows (see PARTS), in "parts" of the JSON;
scripts/compare_torch.py matches the two by those names.

Prints one JSON object (and writes it to --out atomically when given). Exit 2 with a one-line
message for a bad option (checked first, torch or not), 3 when torch or a CUDA GPU is missing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

from results_io import atomic_write
from script_cli import MachineError, OneLineParser, number, output_path, require_module, run

# The parts, as cuda_layer_bench names them, and how often one layer runs each.
PARTS = {"rmsnorm": 2, "qkv_proj": 1, "attention_core": 1, "out_proj": 1, "swiglu_mlp": 1}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, each checked here, before torch is imported or a GPU looked for."""
    p = OneLineParser(prog="torch_reference", description=__doc__.split("\n\n")[0])
    positive = number(int, 1)
    p.add_argument("--hidden", type=positive, default=4096)
    p.add_argument("--heads", type=positive, default=32)
    p.add_argument("--kv-heads", type=positive, default=8)
    p.add_argument("--ffn", type=positive, default=14336)
    p.add_argument("--seq", type=positive, default=4096)
    p.add_argument("--micro-batch", type=positive, default=1)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--warmup", type=number(int, 0), default=5)
    p.add_argument("--iters", type=positive, default=20,
                   help="timed steps, whose median is reported (>= 1)")
    p.add_argument("--parts", action="store_true",
                   help="also time each part of the layer alone (JSON key 'parts')")
    p.add_argument("--out", type=Path, help="also write the JSON here (atomically)")
    a = p.parse_args(argv)
    if a.hidden % a.heads or a.heads % a.kv_heads:
        p.error(f"--heads {a.heads} must divide --hidden {a.hidden} and --kv-heads {a.kv_heads} "
                f"must divide --heads")
    if (a.hidden // a.heads) % 2:
        p.error(f"the head size --hidden / --heads = {a.hidden // a.heads} must be even (RoPE "
                "rotates its two halves)")
    return a


# What layer_flops counts, for the records that divide by it (MFU).
FLOPS_CONVENTION = ("model FLOPs of forward + backward: the GEMMs and causal attention (half the "
                    "s x s scores), backward = 2 x forward, no recomputation")


# What part_flops counts: the parts' TFLOP/s on both sides of compare_torch. Attention's backward
# includes the flash recomputation of the scores, so a part's rate is not a share of the layer's
# model FLOPs (FLOPS_CONVENTION) and the parts' FLOPs do not add up to layer_flops.
PART_FLOPS_CONVENTION = ("FLOPs each part's kernels do in forward + backward: a bias-free linear "
                         "3 GEMMs; causal attention forward 4 b h s^2 d / 2 and backward 2.5 x "
                         "forward (flash recomputes the scores); RMSNorm none")


def layer_flops(a: argparse.Namespace) -> float:
    """Model FLOPs of F + B (backward = 2x forward), causal attention counted at half; `a` needs
    micro_batch, seq, hidden, heads, kv_heads and ffn."""
    t, h, d = a.micro_batch * a.seq, a.hidden, a.hidden // a.heads
    proj = 2 * t * h * (a.heads + 2 * a.kv_heads) * d + 2 * t * a.heads * d * h
    mlp = 2 * t * h * 2 * a.ffn + 2 * t * a.ffn * h
    attn = 0.5 * (2 * 2 * a.micro_batch * a.heads * a.seq * a.seq * d)
    return 3.0 * (proj + mlp + attn)


def part_flops(a: argparse.Namespace) -> dict[str, float | None]:
    """F + B FLOPs of each part as cuda_layer_bench counts them: a bias-free linear is three
    GEMMs (forward, input and weight gradient); causal attention forward is 4 b h s^2 d / 2 and
    its backward 2.5x that; RMSNorm has no GEMM (None)."""
    t, h, d = a.micro_batch * a.seq, a.hidden, a.hidden // a.heads

    def linear(n_in: int, n_out: int) -> float:
        return 3 * 2.0 * t * n_in * n_out

    attn_forward = 4.0 * a.micro_batch * a.heads * a.seq * a.seq * d / 2
    return {"rmsnorm": None, "qkv_proj": linear(h, (a.heads + 2 * a.kv_heads) * d),
            "attention_core": 3.5 * attn_forward, "out_proj": linear(a.heads * d, h),
            "swiglu_mlp": linear(h, 2 * a.ffn) + linear(a.ffn, h)}


def rmsnorm_impl(torch, dt, eps: float = 1e-5):
    """(fn(x, w), name): PyTorch's own RMSNorm where it has one (torch.nn.functional.rms_norm,
    one fused CUDA kernel in recent releases), else the eager composition of five element-wise
    ops in f32. The reference should be PyTorch at its best: the eager form cost the H100 run
    about 2 ms of a 12 ms layer."""
    F = torch.nn.functional
    if hasattr(F, "rms_norm"):
        return (lambda x, w: F.rms_norm(x, (x.shape[-1],), w, eps)), "torch.nn.functional.rms_norm"

    def eager(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(dt) * w

    return eager, "eager: (x * rsqrt(mean(x^2) + eps)) * w in f32"


def build(a: argparse.Namespace, torch, dev, dt) -> SimpleNamespace:
    """The layer and its parts as functions over one set of parameters.

    Returns layer (x -> y), params (the layer's parameters) and parts: name -> (fn, inputs,
    leaves), where fn(*inputs) is the part alone, inputs are fresh tensors of its input shape
    that require grad, and leaves are every tensor whose gradient its backward makes.
    """
    F = torch.nn.functional
    d = a.hidden // a.heads
    g = torch.Generator(device="cpu").manual_seed(0)

    def param(*shape, scale):
        return (torch.rand(*shape, generator=g) * 2 - 1).mul_(scale).to(dev, dt).requires_grad_()

    s_in = a.hidden ** -0.5
    w_qkv = param((a.heads + 2 * a.kv_heads) * d, a.hidden, scale=s_in)
    w_o = param(a.hidden, a.heads * d, scale=(a.heads * d) ** -0.5)
    w_gu = param(2 * a.ffn, a.hidden, scale=s_in)
    w_down = param(a.hidden, a.ffn, scale=a.ffn ** -0.5)
    g1 = torch.ones(a.hidden, device=dev, dtype=dt, requires_grad=True)
    g2 = torch.ones(a.hidden, device=dev, dtype=dt, requires_grad=True)

    pos = torch.arange(a.seq, device=dev, dtype=torch.float64)
    inv = 10000.0 ** (-2.0 * torch.arange(d // 2, device=dev, dtype=torch.float64) / d)
    ang = torch.outer(pos, inv)
    cos = torch.cat([ang.cos(), ang.cos()], -1).to(dt)
    sin = torch.cat([ang.sin(), ang.sin()], -1).to(dt)

    def rope(x):  # [b, n, s, d], rotate-half
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    rmsnorm, rmsnorm_name = rmsnorm_impl(torch, dt)

    gqa_native = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")

    def attention_core(q, k, v):  # q [b, heads, s, d], k and v [b, kv_heads, s, d]
        if gqa_native:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        rep = a.heads // a.kv_heads
        return F.scaled_dot_product_attention(
            q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)

    def swiglu(x):
        gate, up = (x @ w_gu.t()).chunk(2, -1)
        return (F.silu(gate) * up) @ w_down.t()

    def layer(x):
        b, s, _ = x.shape
        qkv = rmsnorm(x, g1) @ w_qkv.t()
        q, k, v = qkv.split([a.heads * d, a.kv_heads * d, a.kv_heads * d], -1)
        q = rope(q.view(b, s, a.heads, d).transpose(1, 2))
        k = rope(k.view(b, s, a.kv_heads, d).transpose(1, 2))
        v = v.view(b, s, a.kv_heads, d).transpose(1, 2)
        o = attention_core(q, k, v)
        h = x + o.transpose(1, 2).reshape(b, s, a.heads * d) @ w_o.t()
        return h + swiglu(rmsnorm(h, g2))

    def fresh(*shape):
        return torch.randn(*shape, device=dev, dtype=dt, requires_grad=True)

    b, s = a.micro_batch, a.seq
    x, xo = fresh(b, s, a.hidden), fresh(b, s, a.heads * d)
    q, k, v = fresh(b, a.heads, s, d), fresh(b, a.kv_heads, s, d), fresh(b, a.kv_heads, s, d)
    parts = {
        "rmsnorm": (lambda t: rmsnorm(t, g1), [x], [x, g1]),
        "qkv_proj": (lambda t: t @ w_qkv.t(), [x], [x, w_qkv]),
        "attention_core": (attention_core, [q, k, v], [q, k, v]),
        "out_proj": (lambda t: t @ w_o.t(), [xo], [xo, w_o]),
        "swiglu_mlp": (swiglu, [x], [x, w_gu, w_down]),
    }
    assert set(parts) == set(PARTS)
    return SimpleNamespace(layer=layer, params=[w_qkv, w_o, w_gu, w_down, g1, g2], parts=parts,
                           gqa_native=gqa_native, rmsnorm=rmsnorm_name)


def time_fwd_bwd(torch, fn, inputs, leaves, warmup: int, iters: int) -> dict:
    """Median forward, backward and total milliseconds of y = fn(*inputs); y.backward(dy), timed
    with CUDA events; gradients are dropped after each step, as an optimizer step would."""
    with torch.no_grad():
        dy = torch.randn_like(fn(*inputs))

    def step(events=None):
        if events:
            events[0].record()
        y = fn(*inputs)
        if events:
            events[1].record()
        y.backward(dy)
        if events:
            events[2].record()
        for t in leaves:
            t.grad = None

    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    fwd, bwd, total = [], [], []
    for _ in range(iters):
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
        step(ev)
        torch.cuda.synchronize()
        fwd.append(ev[0].elapsed_time(ev[1]))
        bwd.append(ev[1].elapsed_time(ev[2]))
        total.append(ev[0].elapsed_time(ev[2]))
    return {"median_ms": statistics.median(total), "min_ms": min(total), "max_ms": max(total),
            "fwd_median_ms": statistics.median(fwd), "bwd_median_ms": statistics.median(bwd)}


def gemm_peak(torch, dev, dt, warmup: int, iters: int, sizes=(4096, 8192, 16384)) -> dict:
    """The best dense GEMM rate of this GPU at the layer's dtype, measured in this run: the
    median of `iters` timed torch.mm calls of n x n x n for each size, on values uniform in
    [-1, 1) (a GPU runs a GEMM on zeros at a higher clock). What the layer's MFU divides by."""
    by_size = {}
    for n in sizes:
        a = torch.rand(n, n, device=dev, dtype=dt) * 2 - 1
        b = torch.rand(n, n, device=dev, dtype=dt) * 2 - 1
        for _ in range(max(warmup, 1)):
            torch.mm(a, b)
        torch.cuda.synchronize()
        times = []
        for _ in range(iters):
            start, stop = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            start.record()
            torch.mm(a, b)
            stop.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(stop))
        by_size[str(n)] = 2.0 * n ** 3 / (statistics.median(times) * 1e-3) / 1e12
        del a, b
    return {"tflops": max(by_size.values()), "by_size": by_size, "op": "torch.mm",
            "inputs": "uniform in [-1, 1)"}


def sdpa_backends(torch) -> dict:
    """Which scaled-dot-product-attention backends this torch may pick (enabled, not chosen)."""
    out = {}
    for name in ("flash", "mem_efficient", "cudnn", "math"):
        enabled = getattr(torch.backends.cuda, f"{name}_sdp_enabled", None)
        if enabled is not None:
            out[name] = bool(enabled())
    return out


def sdpa_kernel_family(kernel_names) -> str:
    """Which SDPA implementation ran, from the names of the CUDA kernels one attention step
    launched: cudnn, flash, mem_efficient, math (attention kernels of none of the three: the
    unfused path, matmuls and a softmax) or unknown (no kernel seen, e.g. no profiler)."""
    names = [n.lower() for n in kernel_names]
    if not names:
        return "unknown"
    if any("cudnn" in n or "fort_native_sdpa" in n for n in names):
        return "cudnn"
    if any("flash" in n for n in names):
        return "flash"
    if any("fmha" in n or "efficient_attention" in n or "mem_eff" in n for n in names):
        return "mem_efficient"
    return "math"


def sdpa_kernel_used(torch, fn, inputs, leaves) -> dict:
    """One forward and backward of the whole layer under the profiler: the backend the enabled
    list leaves open is not necessarily the one that runs (GQA, a head size or the layer's
    transposed views can send a call to the slower math path, which would flatter ppbench's
    ratio), so the record says. The GEMMs' and norms' kernels name no attention backend."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn(*inputs).sum().backward()
            torch.cuda.synchronize()
        names = sorted({e.key for e in prof.key_averages()
                        if getattr(e, "device_type", None) is not None
                        and "cuda" in str(e.device_type).lower()})
    except Exception as e:  # the profiler (CUPTI) may be missing on a rented machine
        return {"sdpa_kernel": "unknown", "sdpa_kernel_why": f"{type(e).__name__}: {e}"[:200]}
    finally:
        for t in leaves:
            t.grad = None
    # The attention kernels among the layer's, or (none: the math path) the first few of all.
    attention = [n for n in names if sdpa_kernel_family([n]) != "math"]
    return {"sdpa_kernel": sdpa_kernel_family(names),
            "sdpa_kernel_names": (attention or names)[:12]}


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.out is not None:
        output_path(a.out, "--out")
    torch = require_module("torch", "timing the PyTorch reference (install torch with CUDA)")
    if not torch.cuda.is_available():
        raise MachineError("no CUDA GPU visible to PyTorch (torch.cuda.is_available() is False)")

    dev = torch.device("cuda")
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
    m = build(a, torch, dev, dt)

    x = torch.randn(a.micro_batch, a.seq, a.hidden, device=dev, dtype=dt, requires_grad=True)
    layer = time_fwd_bwd(torch, m.layer, [x], m.params + [x], a.warmup, a.iters)
    ms = layer["median_ms"]
    result = {
        "what": "llama decoder layer forward+backward, PyTorch reference",
        "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
        "seq": a.seq, "micro_batch": a.micro_batch, "dtype": a.dtype,
        "sdpa_gqa_native": m.gqa_native, "sdpa_backends": sdpa_backends(torch),
        "rmsnorm": m.rmsnorm,
        "iters": a.iters, **layer,
        "flops": layer_flops(a), "flops_convention": FLOPS_CONVENTION,
        "tflops": layer_flops(a) / (ms * 1e-3) / 1e12,
        "gemm_peak": gemm_peak(torch, dev, dt, a.warmup, a.iters),
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    if a.parts:
        flops = part_flops(a)
        result["parts"] = {}
        result["parts_flops_convention"] = PART_FLOPS_CONVENTION
        for name, (fn, inputs, leaves) in m.parts.items():
            r = time_fwd_bwd(torch, fn, inputs, leaves, a.warmup, a.iters)
            f = flops[name]
            r.update(per_layer=PARTS[name],
                     tflops=f / (r["median_ms"] * 1e-3) / 1e12 if f else None)
            result["parts"][name] = r
    # Last: the profiler it runs may leave CUPTI attached and slow the launches of whatever is
    # timed after it (the GEMM peak, the short parts).
    result.update(sdpa_kernel_used(torch, m.layer, [x], m.params + [x]))
    text = json.dumps(result)
    print(text)
    if a.out:
        atomic_write(a.out, text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run("torch_reference", main))
