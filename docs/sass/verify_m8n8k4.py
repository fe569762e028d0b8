"""Evaluate the SASS-derived m8n8k4 .f16 expressions (sass_expr.Simt) on a collection's inputs and
compare with the GPU's D words.  Run from the repository root:

    python docs/sass/verify_m8n8k4.py [out/h100]

f32 arithmetic is emulated in float64 then rounded (FMUL/FFMA of f16 operands: the product is exact).
NaN results are compared by class (the hardware writes the canonical 0x7FFF / 0x7FFFFFFF).
"""
import json,sys,re
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent)); sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import numpy as np
import sass_expr as S
from warpsim.facts.isa import iter_instructions
from warpsim.validation.inputs import make_inputs
from warpsim.validation.kernels import kernel_name
DATA=sys.argv[1] if len(sys.argv)>1 else 'out/h100'
man=json.load(open(DATA+'/manifest.json'))
files={}
def f32(x): return np.asarray(x,dtype=np.float64).astype(np.float32).astype(np.float64)
with np.errstate(all='ignore'):
  env={'fmul':lambda x,y:f32(x*y),'ffma':lambda x,y,z:f32(x*y+z),'fadd':lambda x,y:f32(x+y),
     'f16':lambda x:np.asarray(x).astype(np.float16),'f32':lambda x:x}
  for ins in iter_instructions('sm_90'):
    if ins.form!='f16-m8n8k4': continue
    sim=S.Simt(man['sass'][kernel_name(ins)], {op:ins.type_of(op) for op in 'abcd'}); sim.run()
    for dist in ['normal','narrow','wide','uniform-bits','special']:
        e=next(e for e in man['entries'] if e['instr']==ins.text and e['dist']==dist)
        hw=np.load(DATA+'/'+e['file'])[e['key']]
        nw=hw.shape[0]
        x=make_inputs(ins,dist,nw,e['seed'])
        V={}
        for op in 'abc':
            w=x[op]
            if ins.type_of(op)=='f16':
                V[(op,'lo')]=(w&0xFFFF).astype(np.uint16).view(np.float16).astype(np.float64)
                V[(op,'hi')]=(w>>16).astype(np.uint16).view(np.float16).astype(np.float64)
            else:
                V[(op,None)]=w.view(np.float32).astype(np.float64)
        env['V']=V
        bad=tot=0; nanbad=0
        for ln in range(32):
            for reg in range(ins.regs['d']):
                v=sim.stores[ln][reg]
                vals=[v[1],v[2]] if v[0]=='h' else [v[1]]
                for h,expr in enumerate(vals):
                    code=re.sub(r"\b([abc])(\d+)@(\d+)(?:\.(lo|hi))?", lambda m: f"V[('{m.group(1)}',{repr(m.group(4))})][:,{m.group(3)},{m.group(2)}]", expr)
                    r=eval(code,env)
                    if ins.dtype=='f16':
                        got=((hw[:,ln,reg]>>(16*h))&0xFFFF).astype(np.uint16).view(np.float16)
                        r=np.asarray(r,dtype=np.float16)
                    else:
                        got=hw[:,ln,reg].view(np.float32); r=np.asarray(r,dtype=np.float32)
                    nn=np.isnan(r)|np.isnan(got)
                    ok=np.where(nn, np.isnan(r)&np.isnan(got), r.view(np.uint16 if ins.dtype=='f16' else np.uint32)==got.view(np.uint16 if ins.dtype=='f16' else np.uint32))
                    bad+=int((~ok).sum()); tot+=ok.size
                    nanbad+=int((~ok & nn).sum())
        print(f"{ins.text[17:]:40s} {dist:13s} {bad:6d}/{tot} mismatches ({nanbad} NaN-class)")
