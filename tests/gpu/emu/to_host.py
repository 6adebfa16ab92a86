#!/usr/bin/env python3
"""to_host.py DEVICE.ll HOST.ll — the device module of `tdslc --target=cuda
--emit=llvm` as an x86-64 module for emu.c: the NVPTX data layout and
triple become the host's, address spaces are dropped (shared arrays become
ordinary globals: emu.c runs one block at a time), and the nvvm intrinsics
(special registers, barrier0, warp shuffles) become calls to emu.c's
`emu.*` functions.  Used by run.sh."""
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
if re.search(r'@emu\.(?!read\.ptx\.sreg\.(tid|ntid|ctaid|nctaid)\.x|barrier0|shfl\.sync\.(bfly|down)\.i32)', s):
    sys.exit("to_host.py: an nvvm intrinsic emu.c does not provide: " +
             re.search(r'@emu\.[\w.]+', s).group(0))
open(sys.argv[2], 'w').write(s)
