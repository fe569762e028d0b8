"""Run Triton's fused-softmax and layer-norm tutorial kernels on the GPU and keep their PTX,
launch shape, inputs and outputs (``python -m warpsim.validation.sfu_triton OUT``), so that
tests can run the same PTX through ``warpsim.Module.launch`` and compare byte for byte.
Writes ``OUT/triton_sfu.npz``.  Needs torch and triton (the device image has both)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def main(out: Path) -> None:
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(in_ptr + row * in_stride + offs, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        den = tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_stride + offs, num / den, mask=mask)

    @triton.jit
    def layernorm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, n_cols, eps, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        mask = offs < n_cols
        x = tl.load(x_ptr + row * stride + offs, mask=mask, other=0.0).to(tl.float32)
        mean = tl.sum(x, axis=0) / n_cols
        xc = tl.where(mask, x - mean, 0.0)
        var = tl.sum(xc * xc, axis=0) / n_cols
        rstd = 1 / tl.sqrt(var + eps)
        w = tl.load(w_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs, mask=mask)
        tl.store(y_ptr + row * stride + offs, xc * rstd * w + b, mask=mask)

    g = torch.Generator().manual_seed(21)
    rows, cols = 64, 781
    x = (torch.randn(rows, cols, generator=g) * 4).cuda()
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    k1 = softmax_kernel[(rows,)](y, x, x.stride(0), y.stride(0), cols, BLOCK=block)
    w = torch.randn(cols, generator=g).cuda()
    bias = torch.randn(cols, generator=g).cuda()
    z = torch.empty_like(x)
    k2 = layernorm_kernel[(rows,)](x, z, w, bias, x.stride(0), cols, 1e-5, BLOCK=block)
    torch.cuda.synchronize()

    def info(k):
        md = k.metadata
        return {"name": k.name, "num_warps": md.num_warps, "shared": md.shared,
                "ptx": k.asm["ptx"]}

    meta = {"triton": triton.__version__, "torch": torch.__version__,
            "device": torch.cuda.get_device_name(0), "rows": rows, "cols": cols, "eps": 1e-5,
            "softmax": info(k1), "layernorm": info(k2)}
    out.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out / "triton_sfu.npz", x=x.cpu().numpy(), softmax=y.cpu().numpy(),
                        w=w.cpu().numpy(), b=bias.cpu().numpy(), layernorm=z.cpu().numpy(),
                        meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    for name in ("softmax", "layernorm"):
        ptx = meta[name]["ptx"]
        print(name, meta[name]["name"], meta[name]["num_warps"], meta[name]["shared"],
              [ln.strip() for ln in ptx.splitlines() if any(t in ln for t in ("ex2", "div.", "rsqrt", "sqrt", "rcp", ".version", ".entry", ".param"))][:20])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
