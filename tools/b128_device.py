"""ld/st/mov .b128 on the GPU vs warpsim, word for word.  On the device, from tools/:
``python3 b128_device.py gpu g.npy && python3 b128_device.py sim g.npy``."""
import sys
import numpy as np
sys.path.insert(0, "..")
import warpsim

PTX = r"""
.version 8.3
.target sm_90
.address_size 64
.visible .entry k(.param .u64 pa, .param .u64 po)
{
 .reg .b32 %r<8>; .reg .b64 %rd<16>; .reg .b128 %q<4>;
 .shared .align 16 .b8 sm[4096];
 ld.param.u64 %rd1,[pa]; ld.param.u64 %rd2,[po];
 mov.u32 %r1,%tid.x; mul.wide.u32 %rd3,%r1,16; add.u64 %rd4,%rd1,%rd3; add.u64 %rd5,%rd2,%rd3;
 ld.global.b128 %q1,[%rd4];
 mov.b128 {%rd6,%rd7},%q1;
 xor.b64 %rd8,%rd6,%rd7;
 mov.b128 %q2,{%rd7,%rd8};
 mov.u32 %r2,sm; mul.lo.u32 %r3,%r1,16; xor.b32 %r3,%r3,16; add.u32 %r4,%r2,%r3;
 st.shared.b128 [%r4],%q2;
 bar.sync 0;
 mul.lo.u32 %r5,%r1,16; add.u32 %r6,%r2,%r5;
 ld.shared.b128 %q3,[%r6];
 mov.b128 %q1,%q3;
 st.global.b128 [%rd5],%q1;
 ret;
}
"""

if __name__ == "__main__":
    n = 256
    a = np.random.default_rng(7).integers(0, 2**32, 4 * n, dtype=np.uint64).astype(np.uint32)
    if sys.argv[1] == "gpu":
        import cupy as cp
        open("b128.ptx", "w").write(PTX)
        o = cp.zeros(4 * n, cp.uint32)
        cp.RawModule(path="b128.ptx").get_function("k")((1,), (n,), (cp.asarray(a), o))
        np.save(sys.argv[2], cp.asnumpy(o))
        print("gpu done", cp.cuda.runtime.getDeviceProperties(0)["name"])
    else:
        g = np.load(sys.argv[2]) if sys.argv[2] != "-" else np.zeros(4 * n, np.uint32)
        (o,) = warpsim.Module(PTX).launch("k", 1, n, [a, np.zeros(4 * n, np.uint32)], arch="sm_90",
                                          check=True)[1:2]
        print("b128 words", 4 * n, "mismatches:", int((o != g).sum()))
