"""Symbolic SIMT reading of the SASS that ptxas emits for one warpsim validation kernel.

All 32 lanes are interpreted together, following the kernel's control flow, CALL/RET included. Lane
arithmetic and predicates are concrete integers; the data are symbolic.  An f16x2 word is a pair of
half expressions, an f32 register holds one expression, and a loaded register is named
``a0@5.lo`` (operand, register, source lane, half).  SHFL.IDX moves values between lanes; SEL and
PRMT select and permute the halves.  Each stored D element is then rewritten with
:mod:`warpsim.tensorcore.layouts` into matrix coordinates (A[i][k], B[k][j], C[i][j]), and into a
*k-pattern* in which ``pK`` stands for the exact product A[i][K]*B[K][j] and ``c`` for C[i][j].

    python docs/sass/sass_expr.py out/h100/manifest.json mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32

Opcodes it does not model become opaque ``OPCODE(...)`` terms, so the output shows them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: warpsim

#: Constant-bank offset of the first kernel parameter, per architecture generation
#: (sm_7x/8x: 0x160, sm_90: 0x210, sm_100 and later: 0x380); the kernels take a, b, c, d.
PARAM_BASES = (0x160, 0x210, 0x380)


def _param(off: int) -> str | None:
    """The operand ('a'..'d') whose pointer sits at constant-bank offset ``off``, if any."""
    for base in PARAM_BASES:
        if base <= off < base + 0x20 and (off - base) % 8 == 0:
            return "abcd"[(off - base) // 8]
    return None


def _const_param(arg: str) -> str | None:
    m = re.search(r"c\[0x0\]\[(0x[0-9a-f]+)\]", arg)
    return _param(int(m.group(1), 16)) if m else None
M32 = 0xFFFFFFFF


def _lut(a: int, b: int, c: int, lut: int) -> int:
    r = 0
    for i in range(8):
        if lut >> i & 1:
            r |= (a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c)
    return r & M32


def _halves(v):
    """(lo, hi) half expressions of a word value."""
    if isinstance(v, tuple) and v[0] == "h":
        return v[1], v[2]
    if isinstance(v, int):
        return f"0x{v & 0xFFFF:04x}", f"0x{v >> 16 & 0xFFFF:04x}"
    return f"lo16({v[1]})", f"hi16({v[1]})"


def _scalar(v) -> str:
    if isinstance(v, int):
        return "0" if v == 0 else f"0x{v:x}"
    if v[0] == "f":
        return v[1]
    return f"word({v[1]},{v[2]})"


class Simt:
    def __init__(self, lines: list[str], types: dict[str, str]):
        self.prog = []
        for ln in lines:
            m = re.match(r"/\*([0-9a-f]+)\*/ (.*) ;$", ln)
            self.prog.append((int(m.group(1), 16), m.group(2)))
        self.addr = {a: i for i, (a, _) in enumerate(self.prog)}
        self.types = types
        self.R = [dict() for _ in range(32)]
        self.P = [dict() for _ in range(32)]
        self.ptr: dict[str, str] = {}
        self.stores: list[dict[int, object]] = [dict() for _ in range(32)]
        self.hmma: dict[int, list[dict]] = {}

    # -- operand access
    def get(self, lane: int, a: str):
        a = a.replace(".reuse", "")
        neg = a.startswith("-")
        a = a.lstrip("-")
        sel = None
        for h in (".H0_H0", ".H1_H1", ".H0", ".H1"):
            if a.endswith(h):
                a, sel = a[: -len(h)], h
        if a in ("RZ", "URZ"):
            v = 0
        elif re.fullmatch(r"-?0x[0-9a-f]+|-?\d+", a):
            v = int(a, 0)
        else:
            v = self.R[lane].get(a, ("f", f"?{a}"))
        if sel:
            lo, hi = _halves(v)
            v = ("half", lo if "H0" in sel else hi)
        if neg:
            v = -v if isinstance(v, int) else (v[0], f"-{v[1]}") if v[0] in ("f", "half") else v
        return v

    def pred(self, lane: int, p: str) -> bool:
        if p in ("PT", "!PT"):
            return p == "PT"
        return (not self.P[lane].get(p[1:], False)) if p.startswith("!") else self.P[lane].get(p, False)

    def run(self) -> None:
        pc, stack, steps = 0, [], 0
        while pc < len(self.prog):
            steps += 1
            assert steps < 20000, "runaway"
            _, text = self.prog[pc]
            pc += 1
            guard = None
            m = re.match(r"^@(!?P\d) (.*)$", text)
            if m:
                guard, text = m.group(1), m.group(2)
            op, _, rest = text.partition(" ")
            args = [a.strip() for a in rest.split(",")] if rest else []
            if op == "EXIT":
                if guard:
                    continue  # the warp-uniform bound check: every lane goes on
                return
            if op in ("NOP",) or op.startswith("BAR"):
                continue
            if op == "BRA":
                if guard:
                    raise NotImplementedError("conditional branch")
                pc = self.addr[int(args[0], 16)]
                continue
            if op.startswith("CALL"):
                stack.append(pc)
                pc = self.addr[int(args[0], 16)]
                continue
            if op.startswith("RET"):
                pc = stack.pop()
                continue
            lanes = [ln for ln in range(32) if guard is None or self.pred(ln, guard)]
            self.step(op, args, lanes)

    def step(self, op: str, args: list[str], lanes: list[int]) -> None:
        base = op.split(".")[0]
        # ---- pointers to the kernel parameters (warp-uniform)
        if base in ("ULDC", "LDCU") or (base == "LDC" and _const_param(args[1])):
            m = re.search(r"c\[0x0\]\[(0x[0-9a-f]+)\]", args[1])
            off = int(m.group(1), 16) if m else -1
            for i in range(2 if ".128" in op else 1):  # LDCU.128 loads two pointers
                dest = args[0] if i == 0 else re.sub(r"\d+$", lambda d: str(int(d.group()) + 2), args[0])
                if _param(off + 8 * i):
                    self.ptr[dest] = _param(off + 8 * i)
                else:
                    self.ptr.pop(dest, None)
            return
        if base in ("LDG", "STG"):
            addr = args[1] if base == "LDG" else args[0]
            m = re.search(r"\[(R\d+)\.64(?:\+(0x[0-9a-f]+))?\]", addr)  # with or without desc[URn]
            p = self.ptr.get(m.group(1), "?")
            width = 8 if ".64" in op else 4
            reg = int(m.group(2) or "0", 16) // width
            for ln in lanes:
                if base == "LDG":
                    name = f"{p}{reg}@{ln}"
                    if self.types[p] in ("f16", "f16x2"):
                        self.R[ln][args[0]] = ("h", f"{name}.lo", f"{name}.hi")
                    elif self.types[p] in ("f32", "f64", "s32"):
                        self.R[ln][args[0]] = ("f", name)
                    else:
                        self.R[ln][args[0]] = ("w", name)
                else:
                    self.stores[ln][reg] = self.get(ln, args[1])
            if base == "LDG":
                self.ptr.pop(args[0], None)
            return
        dest_i = 1 if op.startswith("SHFL") or op.startswith("ISETP") else 0
        # drop predicate / carry operands
        regs = [a for a in args if not re.fullmatch(r"!?P[T\d]", a)]
        if op.startswith("ISETP"):
            dest, srcs = args[0], args[2:4]
        elif op.startswith("SHFL"):
            dest, srcs = args[1], args[2:4]
        elif base == "SEL":
            dest, srcs = args[0], args[1:3]
        else:
            dest, srcs = regs[0], regs[1:]
        names = [s.lstrip("-").split(".")[0] for s in srcs]
        if any(n in self.ptr for n in names):
            self.ptr[dest] = next(self.ptr[n] for n in names if n in self.ptr)
            return
        direct = [_const_param(s_) for s_ in srcs if _const_param(s_)]
        if direct:  # sm_7x/8x add the parameter straight from the constant bank
            self.ptr[dest] = direct[0]
            return
        self.ptr.pop(dest, None)
        new = {}
        for ln in lanes:
            g = lambda a: self.get(ln, a)  # noqa: E731
            if op == "S2R":
                v = ln if args[1] == "SR_LANEID" else 0
            elif op in ("MOV", "IMAD.MOV.U32"):
                v = g(srcs[-1])
            elif op == "HFMA2.MMA" and srcs[:2] == ["-RZ", "RZ"]:
                v = (int(srcs[2], 0) & 0xFFFF) | (int(srcs[3], 0) & 0xFFFF) << 16 if all(
                    re.fullmatch(r"-?\d+|0x[0-9a-f]+", s) for s in srcs[2:4]) else ("f", "?hfma2")
            elif op == "LOP3.LUT":
                x = [g(s) for s in srcs[:3]]
                v = _lut(*x, int(srcs[3], 16)) if all(isinstance(t, int) for t in x) else ("f", "?lop3")
            elif op in ("IADD3", "VIADD", "IMAD.IADD"):
                x = [g(s) for s in srcs if s != "0x1" or op != "IMAD.IADD"]
                v = sum(x) & M32 if all(isinstance(t, int) for t in x) else ("f", "?iadd")
            elif op in ("SHF.R.U32.HI", "SHF.R.S32.HI", "SHF.L.U32", "IMAD.SHL.U32", "IMAD"):
                x = [g(t) for t in srcs[:3]]
                if not all(isinstance(t, int) for t in x):
                    v = ("f", f"?{op}")
                elif op == "SHF.R.U32.HI":      # (hi:lo) >> n, high word: hi >> n
                    v = (x[2] & M32) >> x[1]
                elif op == "SHF.R.S32.HI":
                    hi = x[2] - (1 << 32) if x[2] & 0x80000000 else x[2]
                    v = (hi >> x[1]) & M32
                elif op == "SHF.L.U32":         # low word of (hi:lo) << n
                    v = (x[0] << x[1]) & M32
                elif op == "IMAD.SHL.U32":
                    v = (x[0] * x[1]) & M32
                else:
                    v = (x[0] * x[1] + x[2]) & M32
            elif op.startswith("ISETP"):
                a, b = (g(s) for s in srcs)
                cmp = op.split(".")[1]
                if not (isinstance(a, int) and isinstance(b, int)):
                    a, b = 0, 0  # prologue arithmetic on thread/block ids: irrelevant here
                r = {"NE": a != b, "EQ": a == b, "GE": a >= b, "GT": a > b, "LT": a < b, "LE": a <= b}[cmp]
                new[("P", args[0])] = new.get(("P", args[0]), {})
                new[("P", args[0])][ln] = r
                continue
            elif op.startswith("SHFL.IDX"):
                src = g(srcs[1])
                v = self.get(src & 31, srcs[0]) if isinstance(src, int) else ("f", "?shfl")
            elif base == "SEL":
                v = g(srcs[0]) if self.pred(ln, args[3]) else g(srcs[1])
            elif base == "PRMT":
                a, sel, b = g(srcs[0]), int(srcs[1], 16), g(srcs[2])
                ha, hb = _halves(a), _halves(b)
                src = list(ha) + list(hb)
                parts = []
                for h in range(2):
                    b0, b1 = sel >> (8 * h) & 0xF, sel >> (8 * h + 4) & 0xF
                    parts.append(src[b0 // 2] if b0 % 2 == 0 and b1 == b0 + 1 else f"bytes({b0},{b1})")
                v = ("h", parts[0], parts[1])
            elif op.startswith("F2FP.F16.") and op.endswith(".UNPACK_B"):
                fmt = op.split(".")[2].lower()
                src = srcs[0].replace(".reuse", "")
                hi = src.endswith(".H1")
                w = self.R[ln].get(src[:-3] if hi else src)
                nm = w[1] if isinstance(w, tuple) else str(w)
                b = 2 if hi else 0
                v = ("h", f"{fmt}({nm}.b{b})", f"{fmt}({nm}.b{b + 1})")
            elif op.startswith("HMMA"):
                shape = op.split(".")[1]
                na, nb = {"16816": (4, 2), "1688": (2, 1), "1684": (2, 1)}[shape]
                f32acc = ".F32" in op
                nc = 4 if f32acc else 2
                rn = lambda r, i: "RZ" if r == "RZ" else f"R{int(r[1:]) + i}"  # noqa: E731
                A = [self.get(ln, rn(srcs[0], i)) for i in range(na)]
                B = [self.get(ln, rn(srcs[1], i)) for i in range(nb)]
                Cv = [self.get(ln, rn(srcs[2], i)) for i in range(nc)]
                hid = len(self.hmma.setdefault(ln, []))
                self.hmma[ln].append({"op": op, "A": A, "B": B, "C": Cv})
                for i in range(nc):
                    out = (("f", f"hmma{hid}.d{i}") if f32acc else ("h", f"hmma{hid}.d{i}.lo", f"hmma{hid}.d{i}.hi"))
                    new.setdefault(("R", rn(dest, i)), {})[ln] = out
                continue
            elif op == "HADD2":
                x, y = _halves(g(srcs[0])), _halves(g(srcs[1]))
                v = ("h", f"hadd({x[0]}, {y[0]})", f"hadd({x[1]}, {y[1]})")
            elif op == "HADD2.F32" and srcs[0] == "-RZ":
                h = g(srcs[1])
                v = ("f", f"f32({h[1]})")
            elif op == "FMUL":
                v = ("f", f"fmul({_scalar(g(srcs[0]))}, {_scalar(g(srcs[1]))})")
            elif op == "FADD":
                v = ("f", f"fadd({_scalar(g(srcs[0]))}, {_scalar(g(srcs[1]))})")
            elif op == "FFMA":
                v = ("f", f"ffma({_scalar(g(srcs[0]))}, {_scalar(g(srcs[1]))}, {_scalar(g(srcs[2]))})")
            elif op == "F2FP.F16.F32.PACK_AB":
                v = ("h", f"f16({_scalar(g(srcs[1]))})", f"f16({_scalar(g(srcs[0]))})")
            else:
                v = ("f", f"{op}({', '.join(_scalar(g(s)) if not isinstance(g(s), tuple) or g(s)[0] != 'h' else 'h2' for s in srcs)})")
            new[ln] = v
        for k, v in new.items():
            if isinstance(k, tuple) and k[0] == "R":
                for ln, r in v.items():
                    self.R[ln][k[1]] = r
            elif isinstance(k, tuple):
                for ln, r in v.items():
                    self.P[ln][k[1]] = r
            else:
                self.R[k][dest] = v


# ------------------------------------------------------------------ matrix view


def _types(ins) -> dict[str, str]:
    return {op: ins.type_of(op) for op in "abcd"}


def element_exprs(man: dict, ins) -> dict[str, str]:
    """{'D[i][j]@lane': expression in A[i][k], B[k][j], C[i][j]} for every D element."""
    from warpsim.tensorcore import layouts
    from warpsim.validation.kernels import kernel_name

    sim = Simt(man["sass"][kernel_name(ins)], _types(ins))
    sim.run()
    prod = layouts.product_of_lane(ins.text)

    def name(m: re.Match, dst_lane: int) -> str:
        op, reg, ln, half = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        els = layouts.elements_of(ins.text, op, ln, reg)
        el = els[1] if half == ".hi" else els[0]
        tag = "" if prod[ln] == prod[dst_lane] else f"{{product {prod[ln]}}}"
        return f"{op.upper()}[{el[1]}][{el[2]}]{tag}"

    out = {}
    for ln in range(32):
        for reg in range(ins.regs["d"]):
            v = sim.stores[ln][reg]
            els = layouts.elements_of(ins.text, "d", ln, reg)
            vals = [v[1], v[2]] if isinstance(v, tuple) and v[0] == "h" else [_scalar(v)]
            for el, e in zip(els, vals):
                e = re.sub(r"\b([abc])(\d+)@(\d+)(\.lo|\.hi)?", lambda m: name(m, ln), e)
                e = re.sub(r"f32\(([ABC]\[\d+\]\[\d+\])\)", r"\1", e)
                out[f"D[{el[1]}][{el[2]}]@{ln}"] = e
    return out


def k_pattern(expr: str) -> str:
    """pK for the product A[i][K]*B[K][j] (checked to share i, j with the output), c for C."""
    e = re.sub(r"(ffma|fmul)\(A\[\d+\]\[(\d+)\], B\[\2\]\[\d+\](, |\))", lambda m: f"{m.group(1)}(p{m.group(2)}{m.group(3)}", expr)
    return re.sub(r"C\[\d+\]\[\d+\]", "c", e)


def patterns(man: dict, ins) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d, e in element_exprs(man, ins).items():
        i, j = re.match(r"D\[(\d+)\]\[(\d+)\]", d).groups()
        for a_i in re.findall(r"A\[(\d+)\]", e):
            assert a_i == i, (d, e)
        for b_j in re.findall(r"B\[\d+\]\[(\d+)\]", e):
            assert b_j == j, (d, e)
        for c_ij in re.findall(r"C\[(\d+)\]\[(\d+)\]", e):
            assert c_ij == (i, j), (d, e)
        assert "product" not in e, (d, e)
        out.setdefault(k_pattern(e), []).append(d)
    return out


def hmma_flow(man: dict, ins, lane: int = 0) -> list[str]:
    """Lines describing, for one lane, what feeds each HMMA of a lowered kernel, and the stores."""
    from warpsim.tensorcore import layouts
    from warpsim.validation.kernels import kernel_name

    sim = Simt(man["sass"][kernel_name(ins)], _types(ins))
    sim.run()

    def el(m: re.Match) -> str:
        op, reg, ln, byte = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
        e = layouts.elements_of(ins.text, op, ln, reg)[byte]
        return f"{op.upper()}[{e[1]}][{e[2]}]"

    def fmt(v) -> str:
        t = str(v[1:] if isinstance(v, tuple) and v[0] == "h" else _scalar(v) if not isinstance(v, tuple) or v[0] != "w" else v[1])
        return re.sub(r"\b([ab])(\d+)@(\d+)\.b(\d)", el, t)

    out = []
    for i, h in enumerate(sim.hmma.get(lane, [])):
        out.append(f"HMMA #{i} `{h['op']}` (lane {lane}):")
        out.append("  A regs: " + "; ".join(fmt(v) for v in h["A"]))
        out.append("  B regs: " + "; ".join(fmt(v) for v in h["B"]))
        out.append("  C regs: " + "; ".join(fmt(v) for v in h["C"]))
    for reg in sorted(sim.stores[lane]):
        out.append(f"  d{reg} = {fmt(sim.stores[lane][reg])}")
    return out


def main() -> None:
    from warpsim.facts.isa import iter_instructions

    man = json.load(open(sys.argv[1]))
    table = {i.text: i for i in iter_instructions(man["arch"])}
    for text in sys.argv[2:]:
        ins = table[text]
        print(f"== {text}")
        for pat, ds in patterns(man, ins).items():
            print(f"  [{len(ds)} elements] {pat}")


if __name__ == "__main__":
    main()
