#!/usr/bin/env python3
"""Time one Llama-shaped decoder layer forward + backward in PyTorch: the reference that ppbench's
CUDA layer (F + I + W) is compared with in the same run on the same GPU.

Defaults are a Llama-3-8B layer: hidden 4096, 32 heads, 8 kv heads, ffn 14336, sequence 4096,
micro-batch 1, bf16. The layer is built as ppbench builds it (pre-norm RMSNorm, one fused qkv
projection without bias, rotate-half RoPE, causal GQA through scaled_dot_product_attention,
SwiGLU with a fused gate|up projection, residuals), so the FLOPs are the same.

Prints one JSON object (and writes it to --out atomically when given). Exit 2 with a one-line
message when torch or a CUDA GPU is missing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--out", help="also write the JSON here (atomically)")
    return p.parse_args()


def fail(msg: str) -> None:
    print(f"torch_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def layer_flops(a: argparse.Namespace) -> float:
    """Model FLOPs of F + B (backward = 2x forward), causal attention counted at half."""
    t, h, d = a.micro_batch * a.seq, a.hidden, a.hidden // a.heads
    proj = 2 * t * h * (a.heads + 2 * a.kv_heads) * d + 2 * t * a.heads * d * h
    mlp = 2 * t * h * 2 * a.ffn + 2 * t * a.ffn * h
    attn = 0.5 * (2 * 2 * a.micro_batch * a.heads * a.seq * a.seq * d)
    return 3.0 * (proj + mlp + attn)


def main() -> int:
    a = parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        fail(f"PyTorch is not installed ({e}); install torch with CUDA to time the reference")
    if not torch.cuda.is_available():
        fail("no CUDA GPU visible to PyTorch (torch.cuda.is_available() is False)")
    if a.hidden % a.heads or a.heads % a.kv_heads:
        fail("heads must divide hidden and kv-heads must divide heads")

    dev = torch.device("cuda")
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    torch.backends.cuda.matmul.allow_tf32 = False
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
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def rmsnorm(x, w):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * w

    gqa_native = "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")

    def layer(x):
        b, s, _ = x.shape
        qkv = rmsnorm(x, g1) @ w_qkv.t()
        q, k, v = qkv.split([a.heads * d, a.kv_heads * d, a.kv_heads * d], -1)
        q = rope(q.view(b, s, a.heads, d).transpose(1, 2))
        k = rope(k.view(b, s, a.kv_heads, d).transpose(1, 2))
        v = v.view(b, s, a.kv_heads, d).transpose(1, 2)
        if gqa_native:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            rep = a.heads // a.kv_heads
            o = F.scaled_dot_product_attention(
                q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1), is_causal=True)
        h = x + o.transpose(1, 2).reshape(b, s, a.heads * d) @ w_o.t()
        gate, up = (rmsnorm(h, g2) @ w_gu.t()).chunk(2, -1)
        return h + (F.silu(gate) * up) @ w_down.t()

    x = torch.randn(a.micro_batch, a.seq, a.hidden, device=dev, dtype=dt, requires_grad=True)
    dy = torch.randn_like(x)
    params = [w_qkv, w_o, w_gu, w_down, g1, g2]

    def step():
        y = layer(x)
        y.backward(dy)
        for p in params + [x]:
            p.grad = None

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(a.iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        step()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    result = {
        "what": "llama decoder layer forward+backward, PyTorch reference",
        "hidden": a.hidden, "heads": a.heads, "kv_heads": a.kv_heads, "ffn": a.ffn,
        "seq": a.seq, "micro_batch": a.micro_batch, "dtype": a.dtype,
        "sdpa_gqa_native": gqa_native, "iters": a.iters,
        "median_ms": ms, "min_ms": min(times), "max_ms": max(times),
        "tflops": layer_flops(a) / (ms * 1e-3) / 1e12,
        "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }
    text = json.dumps(result)
    print(text)
    if a.out:
        directory = os.path.dirname(os.path.abspath(a.out))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".torch_reference.")
        with os.fdopen(fd, "w") as f:
            f.write(text + "\n")
        os.replace(tmp, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
