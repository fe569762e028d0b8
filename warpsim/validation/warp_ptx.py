"""Hardware validation of the warp-level PTX machine: every case of
:mod:`warpsim.validation.warp_cases` runs as a PTX kernel on the GPU and in warpsim, and every
output register word and every byte of shared and global memory is compared.

Kernel layout: one warp per CTA.  Thread (warp w, lane l) loads its inputs from
``in[w][l][k]`` (one little-endian u64 slot per input register, narrowed to the register's
width; predicates are ``slot != 0``), the CTA copies its shared-memory image in, the body runs,
then every output register is stored widened into ``out[w][l][k]`` (pre-filled with a poison
pattern) and shared memory is copied out.  ``%sb`` holds the shared buffer's address, ``%gp``
the warp's global buffer.  All cases are entries of ONE PTX module built into one cubin.

``python -m warpsim.validation.warp_ptx build DIR`` (ptxas only), ``run DIR OUT`` (GPU, CuPy),
``compare OUT`` (warpsim against the saved words), ``all DIR`` (the three in one go),
``fixture OUT FILE`` (the first warps of every case, for tests/data).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np

from warpsim.ptx.parser import parse_body, statements, strip_comments
from warpsim.facts.types import TYPE_BITS

from warpsim.validation.warp_cases import CASES, GENERATORS, Case, smem_bytes

SEED = 2027
POISON = np.uint64(0xA5A5A5A5A5A5A5A5)
HARNESS_REGS = {"%sb": 32, "%gp": 64}


def widths(case: Case) -> dict[str, int]:
    body = parse_body(case.body)
    out = dict(HARNESS_REGS)
    for name in [n for n, _ in case.inputs] + list(case.outputs):
        t = body.reg_type(name)
        if t is None and name not in out:
            raise ValueError(f"{case.name}: register {name} is not declared in the body")
        if t is not None:
            out[name] = TYPE_BITS[t]
    return out


def _split(body: str) -> tuple[list[str], list[str]]:
    decls, rest = [], []
    for kind, s, _ in statements(strip_comments(body)):
        if kind == "label":
            rest.append(f"{s}:")
        elif s.startswith("."):
            decls.append(s + ";")
        else:
            rest.append(s + ";")
    return decls, rest


def entry(case: Case) -> str:
    w = widths(case)
    nin, nout = len(case.inputs), max(1, len(case.outputs))
    decls, rest = _split(case.body)
    L = [f".visible .entry {case.name}(.param .u64 pin, .param .u64 pout, .param .u64 psin, "
         ".param .u64 psout, .param .u64 pg)", "{",
         "  .reg .b64 %hx<12>; .reg .b32 %hi<12>; .reg .pred %hp<2>; .reg .b32 %sb; .reg .b64 %gp;"]
    if case.smem:
        L.append(f"  .shared .align 128 .b8 hsm[{case.smem}];")
    L += ["  " + d for d in decls]
    L += ["  ld.param.u64 %hx0, [pin]; ld.param.u64 %hx1, [pout];",
          "  ld.param.u64 %hx2, [psin]; ld.param.u64 %hx3, [psout]; ld.param.u64 %hx4, [pg];",
          "  mov.u32 %hi0, %tid.x; mov.u32 %hi1, %ctaid.x;",
          "  mad.lo.u32 %hi2, %hi1, 32, %hi0;",
          f"  mul.wide.u32 %hx5, %hi2, {nin * 8}; add.u64 %hx5, %hx0, %hx5;",
          f"  mul.wide.u32 %hx6, %hi2, {nout * 8}; add.u64 %hx6, %hx1, %hx6;",
          f"  mul.wide.u32 %hx7, %hi1, {max(case.gmem, 1)}; add.u64 %gp, %hx4, %hx7;",
          "  mov.u32 %sb, 0;"]
    for k, (name, _) in enumerate(case.inputs):
        b = w[name]
        if b == 1:
            L.append(f"  ld.global.u32 %hi3, [%hx5+{8 * k}]; setp.ne.u32 {name}, %hi3, 0;")
        else:
            L.append(f"  ld.global.b{b} {name}, [%hx5+{8 * k}];")
    if case.smem:
        nw = case.smem // 4
        L += ["  mov.u32 %sb, hsm;",
              f"  mul.wide.u32 %hx8, %hi1, {case.smem}; add.u64 %hx9, %hx2, %hx8; add.u64 %hx10, %hx3, %hx8;",
              "  mov.u32 %hi4, %hi0;",
              f"HS_IN: setp.ge.u32 %hp0, %hi4, {nw}; @%hp0 bra HS_IND;",
              "  mul.wide.u32 %hx11, %hi4, 4; add.u64 %hx11, %hx9, %hx11; ld.global.u32 %hi5, [%hx11];",
              "  shl.b32 %hi6, %hi4, 2; add.u32 %hi6, %hi6, %sb; st.shared.u32 [%hi6], %hi5;",
              "  add.u32 %hi4, %hi4, 32; bra HS_IN;",
              "HS_IND: bar.sync 0;"]
    L.append("  // ---- body ----")
    L += ["  " + r if not r.endswith(":") else r for r in rest]
    L.append("  // ---- epilogue ----")
    for k, name in enumerate(case.outputs):
        b = w[name]
        if b == 1:
            L.append(f"  selp.u32 %hi3, 1, 0, {name}; st.global.u32 [%hx6+{8 * k}], %hi3;")
        else:
            L.append(f"  st.global.b{b} [%hx6+{8 * k}], {name};")
    if case.smem:
        nw = case.smem // 4
        L += ["  bar.sync 0;", "  mov.u32 %hi4, %hi0;",
              f"HS_OUT: setp.ge.u32 %hp0, %hi4, {nw}; @%hp0 bra HS_OUTD;",
              "  shl.b32 %hi6, %hi4, 2; add.u32 %hi6, %hi6, %sb; ld.shared.u32 %hi5, [%hi6];",
              "  mul.wide.u32 %hx11, %hi4, 4; add.u64 %hx11, %hx10, %hx11; st.global.u32 [%hx11], %hi5;",
              "  add.u32 %hi4, %hi4, 32; bra HS_OUT;",
              "HS_OUTD:"]
    L += ["  ret;", "}"]
    return "\n".join(L)


def module(cases=CASES, arch: str = "sm_90", version: str = "8.7") -> str:
    head = f".version {version}\n.target {arch}\n.address_size 64\n\n"
    return head + "\n\n".join(entry(c) for c in cases) + "\n"


def build(outdir, arch: str = "sm_90", ptxas: str = "ptxas") -> Path:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "warp.ptx").write_text(module(CASES, arch))
    r = subprocess.run([ptxas, f"-arch={arch}", str(out / "warp.ptx"), "-o", str(out / "warp.cubin")],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"ptxas failed: {r.stderr.strip()[:2000]}")
    (out / "manifest.json").write_text(json.dumps({"arch": arch, "cases": [c.name for c in CASES]}))
    return out / "warp.cubin"


# --------------------------------------------------------------------------------------------
# inputs, simulation, GPU
# --------------------------------------------------------------------------------------------
def inputs(case: Case, seed: int = SEED, warps: int | None = None) -> dict:
    warps = warps or case.warps
    rng = np.random.default_rng([seed, zlib.crc32(case.name.encode())])
    w = widths(case)
    ins = np.zeros((warps, 32, max(1, len(case.inputs))), np.uint64)
    for k, (name, gen) in enumerate(case.inputs):
        ins[..., k] = GENERATORS[gen](rng, warps, w[name])
        if w[name] == 1:
            ins[..., k] = ins[..., k] != 0
    sm = smem_bytes(case.smem_dist, rng, warps, case.smem) if case.smem else np.zeros((warps, 0), np.uint8)
    gm = rng.integers(0, 256, (warps, case.gmem), dtype=np.uint8)
    return {"in": ins, "smem": sm, "gmem": gm}


def simulate(case: Case, data: dict, arch: str = "sm_90") -> dict:
    """Run the case in warpsim on ``data`` (from :func:`inputs`); outputs like the GPU's."""
    from warpsim.kernel.warp import Warp
    from warpsim.ptx.memory import SHARED_WINDOW, FlatMemory, GlobalMemory

    ins = data["in"]
    warps = ins.shape[0]
    w = widths(case)
    warp = Warp(arch, batch=(warps,))
    for k, (name, _) in enumerate(case.inputs):
        b = w[name]
        v = ins[..., k]
        warp.write(name, v != 0 if b == 1 else (v & np.uint64((1 << b) - 1)).astype(
            {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[b]), bits=b)
    warp.write("%sb", 0, bits=32)
    g = GlobalMemory()
    gbase = g.alloc(np.ascontiguousarray(data["gmem"]).reshape(-1), nbytes=None) if case.gmem else g.alloc(nbytes=8)
    warp.write("%gp", (gbase + np.arange(warps, dtype=np.uint64) * np.uint64(max(case.gmem, 1)))[:, None]
               * np.ones(32, np.uint64), bits=64)
    shared = FlatMemory("shared", case.smem, (warps,), window=SHARED_WINDOW)
    if case.smem:
        shared.fill(data["smem"], per_warp=True)
    specials = {"%ctaid.x": np.arange(warps, dtype=np.uint32)[:, None], "%nctaid.x": warps}
    warp.run(case.body, shared=shared, global_memory=g, specials=specials)
    out = np.full((warps, 32, max(1, len(case.outputs))), POISON, np.uint64)
    for k, name in enumerate(case.outputs):
        out[..., k] = warp.read(name).astype(np.uint64)
    gm = g.view(gbase, np.uint8, warps * case.gmem).reshape(warps, case.gmem) if case.gmem else data["gmem"]
    return {"out": out, "smem": shared.read(np.uint8).reshape(warps, case.smem), "gmem": gm}


def _masks(case: Case) -> np.ndarray:
    w = widths(case)
    return np.array([np.uint64((1 << (32 if w[n] == 1 else w[n])) - 1) for n in case.outputs]
                    or [np.uint64(0)], np.uint64)


def gpu_run(cubin, cases=CASES, seed: int = SEED) -> dict:
    import cupy as cp
    mod = cp.RawModule(path=str(cubin))
    res = {}
    for c in cases:
        d = inputs(c, seed)
        warps = d["in"].shape[0]
        fn = mod.get_function(c.name)
        dev_in = cp.asarray(d["in"])
        outs = []
        for poison in (POISON, ~POISON):
            dev_out = cp.full((warps, 32, max(1, len(c.outputs))), poison, dtype=cp.uint64)
            sin = cp.asarray(d["smem"].reshape(-1) if c.smem else np.zeros(8, np.uint8))
            sout = cp.zeros(max(8, warps * c.smem), dtype=cp.uint8)
            gm = cp.asarray(d["gmem"].reshape(-1) if c.gmem else np.zeros(8, np.uint8))
            fn((warps,), (32,), (dev_in, dev_out, sin, sout, gm))
            cp.cuda.Device().synchronize()
            outs.append((cp.asnumpy(dev_out), cp.asnumpy(sout)[:warps * c.smem].reshape(warps, c.smem),
                         cp.asnumpy(gm)[:warps * c.gmem].reshape(warps, c.gmem)))
        m = _masks(c)
        if not (np.array_equal(outs[0][0] & m, outs[1][0] & m) and np.array_equal(outs[0][1], outs[1][1])
                and np.array_equal(outs[0][2], outs[1][2])):
            raise RuntimeError(f"{c.name}: two GPU runs differ (unwritten output or nondeterminism)")
        res[c.name] = {"in": d["in"], "smem_in": d["smem"], "gmem_in": d["gmem"],
                       "out": outs[0][0], "smem": outs[0][1], "gmem": outs[0][2]}
    return res


_MEM_KEYS = ("smem_in", "smem", "gmem_in", "gmem")


def save(res: dict, path) -> None:
    """Register words to ``path`` (npz), memories beside it (``*_mem.npz``)."""
    path = Path(path)
    regs = {f"{name}/{k}": v for name, r in res.items() for k, v in r.items() if k not in _MEM_KEYS}
    mems = {f"{name}/{k}": v for name, r in res.items() for k, v in r.items() if k in _MEM_KEYS}
    np.savez_compressed(path, **regs)
    np.savez_compressed(path.with_name(path.stem + "_mem.npz"), **mems)


def load(path) -> dict:
    path = Path(path)
    res: dict = {}
    for p in (path, path.with_name(path.stem + "_mem.npz")):
        z = np.load(p)
        for key in z.files:
            name, k = key.split("/")
            res.setdefault(name, {})[k] = z[key]
    return res


def compare(res: dict, arch: str = "sm_90", cases=CASES) -> dict:
    """Per case: words / bytes compared and mismatches, warpsim against the saved GPU words."""
    by_name = {c.name: c for c in cases}
    report = {}
    for name, r in res.items():
        c = by_name[name]
        sim = simulate(c, {"in": r["in"], "smem": r["smem_in"], "gmem": r["gmem_in"]}, arch)
        m = _masks(c)
        differ = (sim["out"] & m) != (r["out"] & m)
        bad_w = np.count_nonzero(differ) if c.outputs else 0
        bad_s = int(np.count_nonzero(sim["smem"] != r["smem"]))
        bad_g = int(np.count_nonzero(sim["gmem"] != r["gmem"]))
        first = None
        if bad_w:
            i = np.argwhere(differ)[0]
            first = (f"warp {i[0]} lane {i[1]} {c.outputs[i[2]]}: gpu {int(r['out'][tuple(i)] & m[i[2]]):#x} "
                     f"warpsim {int(sim['out'][tuple(i)] & m[i[2]]):#x}")
        report[name] = {"family": c.family, "warps": int(r["in"].shape[0]),
                        "words": int(r["in"].shape[0] * 32 * len(c.outputs)),
                        "smem_bytes": int(r["smem"].size), "gmem_bytes": int(r["gmem"].size),
                        "word_mismatches": int(bad_w), "smem_mismatches": bad_s,
                        "gmem_mismatches": bad_g, "first": first}
    return report


def summary(report: dict) -> str:
    lines = ["| case | family | warps | register words | shared bytes | global bytes | mismatches |",
             "|---|---|---|---|---|---|---|"]
    tot = [0, 0, 0, 0]
    for name, r in report.items():
        bad = r["word_mismatches"] + r["smem_mismatches"] + r["gmem_mismatches"]
        lines.append(f"| {name} | {r['family']} | {r['warps']} | {r['words']:,} | {r['smem_bytes']:,} | "
                     f"{r['gmem_bytes']:,} | {bad}{' (' + r['first'] + ')' if r['first'] else ''} |")
        tot = [tot[0] + r["words"], tot[1] + r["smem_bytes"], tot[2] + r["gmem_bytes"], tot[3] + bad]
    lines.append(f"| **total** | | | {tot[0]:,} | {tot[1]:,} | {tot[2]:,} | {tot[3]} |")
    return "\n".join(lines)


def fixture(res: dict, path, warps: int = 2) -> None:
    save({n: {k: v[:warps] for k, v in r.items()} for n, r in res.items()}, path)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m warpsim.validation.warp_ptx", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("dir")
    b.add_argument("--arch", default="sm_90")
    b.add_argument("--ptxas", default="ptxas")
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("out")
    c = sub.add_parser("compare")
    c.add_argument("out")
    a = sub.add_parser("all")
    a.add_argument("dir")
    a.add_argument("--out", default=None, help="where words and report go (default: dir)")
    a.add_argument("--ptxas", default="ptxas")
    f = sub.add_parser("fixture")
    f.add_argument("out")
    f.add_argument("file")
    f.add_argument("--warps", type=int, default=2)
    args = p.parse_args(argv)
    if args.cmd == "build":
        print(build(args.dir, args.arch, args.ptxas))
        return 0
    if args.cmd in ("run", "all"):
        cubin = build(args.dir, ptxas=args.ptxas) if args.cmd == "all" else Path(args.dir) / "warp.cubin"
        out = Path(args.out if args.cmd == "run" or args.out else args.dir)
        out.mkdir(parents=True, exist_ok=True)
        res = gpu_run(cubin)
        save(res, out / "warp_words.npz")
        try:
            from warpsim.validation.gpu import device_info
            (out / "device.json").write_text(json.dumps(device_info(), indent=1))
        except Exception as e:  # pragma: no cover
            print("device info unavailable:", e)
        if args.cmd == "run":
            return 0
        rep = compare(res)
    else:
        rep = compare(load(Path(args.out) / "warp_words.npz"))
        out = Path(args.out)
    (out / "warp_report.json").write_text(json.dumps(rep, indent=1))
    text = summary(rep)
    (out / "warp_report.md").write_text(text + "\n")
    print(text)
    bad = sum(r["word_mismatches"] + r["smem_mismatches"] + r["gmem_mismatches"] for r in rep.values())
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
