"""testp / copysign / fns on the GPU vs warpsim, word for word.  On the device, from the
repository root: ``cd tools && python3 smallops_device.py gpu g.npy && python3 smallops_device.py sim g.npy``."""
import sys, numpy as np
sys.path.insert(0, "..")
import warpsim
PTX = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 po)
{
 .reg .b32 %r<20>; .reg .b64 %rd<20>; .reg .pred %p<8>; .reg .f32 %f<4>;
 ld.param.u64 %rd1,[pa]; ld.param.u64 %rd2,[pb]; ld.param.u64 %rd3,[pc]; ld.param.u64 %rd4,[po];
 mov.u32 %r1,%ctaid.x; mov.u32 %r2,%ntid.x; mov.u32 %r3,%tid.x; mad.lo.u32 %r4,%r1,%r2,%r3;
 mul.wide.u32 %rd5,%r4,4; add.u64 %rd6,%rd1,%rd5; add.u64 %rd7,%rd2,%rd5; add.u64 %rd8,%rd3,%rd5;
 ld.global.b32 %r5,[%rd6]; ld.global.b32 %r6,[%rd7]; ld.global.b32 %r7,[%rd8];
 mov.b32 %f1,%r5; mov.b32 %f2,%r6;
 copysign.f32 %f3,%f1,%f2; mov.b32 %r8,%f3;
 testp.finite.f32 %p1,%f1; testp.infinite.f32 %p2,%f1; testp.number.f32 %p3,%f1;
 testp.notanumber.f32 %p4,%f1; testp.normal.f32 %p5,%f1; testp.subnormal.f32 %p6,%f1;
 selp.u32 %r9,1,0,%p1; selp.u32 %r10,2,0,%p2; selp.u32 %r11,4,0,%p3; selp.u32 %r12,8,0,%p4; selp.u32 %r13,16,0,%p5; selp.u32 %r14,32,0,%p6;
 or.b32 %r9,%r9,%r10; or.b32 %r9,%r9,%r11; or.b32 %r9,%r9,%r12; or.b32 %r9,%r9,%r13; or.b32 %r9,%r9,%r14;
 and.b32 %r15,%r6,31; fns.b32 %r16,%r5,%r15,%r7;
 mul.wide.u32 %rd9,%r4,12; add.u64 %rd10,%rd4,%rd9;
 st.global.b32 [%rd10],%r8; st.global.b32 [%rd10+4],%r9; st.global.b32 [%rd10+8],%r16;
 ret;
}
"""
PTX64 = r"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k64(.param .u64 pa, .param .u64 po)
{
 .reg .b32 %r<20>; .reg .b64 %rd<20>; .reg .pred %p<8>; .reg .f64 %fd<2>;
 ld.param.u64 %rd1,[pa]; ld.param.u64 %rd4,[po];
 mov.u32 %r1,%ctaid.x; mov.u32 %r2,%ntid.x; mov.u32 %r3,%tid.x; mad.lo.u32 %r4,%r1,%r2,%r3;
 mul.wide.u32 %rd5,%r4,8; add.u64 %rd6,%rd1,%rd5; ld.global.b64 %rd7,[%rd6]; mov.b64 %fd1,%rd7;
 testp.finite.f64 %p1,%fd1; testp.infinite.f64 %p2,%fd1; testp.number.f64 %p3,%fd1;
 testp.notanumber.f64 %p4,%fd1; testp.normal.f64 %p5,%fd1; testp.subnormal.f64 %p6,%fd1;
 selp.u32 %r9,1,0,%p1; selp.u32 %r10,2,0,%p2; selp.u32 %r11,4,0,%p3; selp.u32 %r12,8,0,%p4; selp.u32 %r13,16,0,%p5; selp.u32 %r14,32,0,%p6;
 or.b32 %r9,%r9,%r10; or.b32 %r9,%r9,%r11; or.b32 %r9,%r9,%r12; or.b32 %r9,%r9,%r13; or.b32 %r9,%r9,%r14;
 mul.wide.u32 %rd9,%r4,4; add.u64 %rd10,%rd4,%rd9; st.global.b32 [%rd10],%r9;
 ret;
}
"""
SPECIALS64 = np.array([0, 1 << 63, 1, (1 << 63) | ((1 << 52) - 1), 1 << 52, 0x7fefffffffffffff,
                       0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000,
                       0xfff8000000000001, 0x7ff0000000000001, 0x3ff0000000000000], np.uint64)


def inputs(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    sp = np.array([0, 0x80000000, 1, 0x807fffff, 0x00800000, 0x7f7fffff, 0x7f800000, 0xff800000,
                   0x7fc00000, 0xffc00001, 0x7f800001, 0x7fbfffff, 0xffffffff], np.uint32)
    a[:sp.size * 40] = np.tile(sp, 40)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    c = rng.integers(-40, 41, n).astype(np.int32).view(np.uint32)
    c[n // 2:] = rng.integers(0, 2**32, n - n // 2, dtype=np.uint64).astype(np.uint32)
    return a, b, c
if __name__ == "__main__":
    n = 1 << 18
    a, b, c = inputs(n, 5)
    if sys.argv[1] == "gpu":
        import cupy as cp
        open("k.ptx", "w").write(PTX)
        f = cp.RawModule(path="k.ptx").get_function("k")
        o = cp.zeros(3 * n, cp.uint32)
        f((n // 256,), (256,), (cp.asarray(a), cp.asarray(b), cp.asarray(c), o))
        np.save(sys.argv[2], cp.asnumpy(o)); print("gpu done", cp.cuda.runtime.getDeviceProperties(0)["name"])
        open("k64.ptx", "w").write(PTX64)
        x = np.resize(SPECIALS64, 256)
        o64 = cp.zeros(256, cp.uint32)
        cp.RawModule(path="k64.ptx").get_function("k64")((1,), (256,), (cp.asarray(x), o64))
        np.save(sys.argv[2] + ".f64.npy", cp.asnumpy(o64))
    else:
        g = np.load(sys.argv[2]) if sys.argv[2] != "-" else np.zeros(3 * n, np.uint32)
        m = 1 << 14  # warpsim on a slice of CTAs? run all
        o = np.zeros(3 * n, np.uint32)
        (o,) = warpsim.Module(PTX).launch("k", n // 256, 256, [a, b, c, o], arch="sm_90", check=False)[3:4]
        d = (o != g).reshape(-1, 3).sum(0)
        print("words", 3 * n, "mismatches copysign/testp/fns:", d.tolist())
        import os
        if os.path.exists(sys.argv[2] + ".f64.npy"):
            g64 = np.load(sys.argv[2] + ".f64.npy")
            x = np.resize(SPECIALS64, 256)
            (o64,) = warpsim.Module(PTX64).launch("k64", 1, 256, [x, np.zeros(256, np.uint32)], arch="sm_90", check=False)[1:2]
            print("f64 testp words 256, mismatches:", int((o64 != g64).sum()),
                  [(hex(int(x[i])), int(g64[i]), int(o64[i])) for i in np.flatnonzero(o64 != g64)[:12]])
        G, O = g.reshape(-1, 3), o.reshape(-1, 3)
        for i in np.flatnonzero((G != O).any(1))[:16]:
            print(f"a={a[i]:#010x} b={b[i]:#010x} c={c[i]:#010x} gpu={G[i].tolist()} warpsim={O[i].tolist()}")
