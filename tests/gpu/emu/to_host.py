#!/usr/bin/env python3
"""to_host.py DEVICE.ll HOST.ll — the device module of `tdslc --target=cuda
--emit=llvm` as an x86-64 module for emu.c: the NVPTX data layout and
triple become the host's, address spaces are dropped (shared arrays become
ordinary globals: emu.c runs one block at a time), and the nvvm intrinsics
(special registers, barrier0, warp shuffles, div.approx.ftz.f32,
mma.m16n8k16 with f32 accumulation) become calls to emu.c's `emu.*` functions; a special
register read by inline assembly (`mov.u32 $0, %tid.x;`, cuda/gemm.c's
fresh reads) becomes the same call.  The mma intrinsics return a struct
of 4 floats, which C cannot return alike: each becomes an IR function
here that calls emu.c's emu_mma with its operands' bits and a pointer to
the result.  Used by run.sh."""
import re
import sys

s = open(sys.argv[1]).read()
s = re.sub(r'target datalayout = ".*"',
           'target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-'
           'f80:128-n8:16:32:64-S128"', s)
s = s.replace('target triple = "nvptx64-nvidia-cuda"', 'target triple = "x86_64-pc-linux-gnu"')
s = re.sub(r'addrspacecast \(ptr addrspace\(\d\) (@[\w.]+) to ptr\)', r'\1', s)
s = re.sub(r'addrspacecast ptr addrspace\(\d\) (%[\w.]+) to ptr', r'bitcast ptr \1 to ptr', s)
s = re.sub(r' addrspace\(\d\)', '', s)
s = s.replace('@llvm.nvvm.', '@emu.')
s = re.sub(r'^!nvvm\.annotations.*$', '', s, flags=re.M)

# special registers read by inline assembly
sregs = set()
def sreg_call(m):
    sregs.add(m.group(1))
    return 'call i32 @emu.read.ptx.sreg.%s()' % m.group(1)
s = re.sub(r'call i32 asm sideeffect "mov\.u32 \$0, %([a-z]+\.[xyz]);", "=r"\(\)', sreg_call, s)
for r in sorted(sregs):
    if not re.search(r'^declare [^\n]*@emu\.read\.ptx\.sreg\.%s\(' % re.escape(r), s, flags=re.M):
        s += '\ndeclare i32 @emu.read.ptx.sreg.%s()\n' % r

# mma.m16n8k16.row.col with f32 C and D: f16 (`f32.f32`, <2 x half>
# operands) or bf16 (i32 operands)
MMA = {'f32.f32': ('<2 x half>', 0), 'bf16': ('i32', 1)}
for name, (ty, bf16) in MMA.items():
    fn = '@emu.mma.m16n8k16.row.col.' + name
    if fn + '(' not in s:
        continue
    s = re.sub(r'^declare [^\n]*' + re.escape(fn) + r'\(.*$', '', s, flags=re.M)
    ops = ['a0', 'a1', 'a2', 'a3', 'b0', 'b1']
    body = ['define internal { float, float, float, float } %s(%s, float %%c0, float %%c1, float %%c2, '
            'float %%c3) {' % (fn, ', '.join('%s %%%s' % (ty, o) for o in ops)),
            '  %d = alloca [4 x float], align 4']
    for o in ops:
        body.append('  %%i%s = bitcast %s %%%s to i32' % (o, ty, o))
    body.append('  call void @emu_mma(i32 %d, ptr %%d, %s, float %%c0, float %%c1, float %%c2, float %%c3)'
                % (bf16, ', '.join('i32 %%i%s' % o for o in ops)))
    prev = 'undef'
    for i in range(4):
        body.append('  %%p%d = getelementptr float, ptr %%d, i64 %d' % (i, i))
        body.append('  %%d%d = load float, ptr %%p%d, align 4' % (i, i))
        body.append('  %%r%d = insertvalue { float, float, float, float } %s, float %%d%d, %d' % (i, prev, i, i))
        prev = '%%r%d' % i
    body += ['  ret { float, float, float, float } %r3', '}']
    s += '\n' + '\n'.join(body) + '\n'
    if 'declare void @emu_mma(' not in s:
        s += 'declare void @emu_mma(i32, ptr, i32, i32, i32, i32, i32, i32, float, float, float, float)\n'

if re.search(r'@emu\.(?!read\.ptx\.sreg\.((tid|ntid|ctaid|nctaid)\.x|n?ctaid\.[yz])\b|barrier0|'
             r'shfl\.sync\.(bfly|down)\.i32|div\.approx\.ftz\.f\b|mma\.m16n8k16\.row\.col\.(f32\.f32|bf16)\b)', s):
    sys.exit("to_host.py: an nvvm intrinsic emu.c does not provide: " +
             re.search(r'@emu\.[\w.]+', s).group(0))
if 'asm ' in s:
    sys.exit("to_host.py: inline assembly emu.c does not provide: " +
             re.search(r'asm [^\n]*', s).group(0))
open(sys.argv[2], 'w').write(s)
