/* machine.c — the CPU target machine (host or an x86-64 level), the
 * module's verification, the "default<On>" pipeline and the textual IR,
 * assembly or object written through it.
 * Needs: cpu.h, llvm-c's target machine and pass builder. */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cpu.h"

static LLVMTargetMachineRef target_machine(const CgOptions *o, char **triple) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  bool host = !strcmp(o->target, "host");
  *triple = host ? LLVMGetDefaultTargetTriple() : LLVMCreateMessage("x86_64-unknown-linux-gnu");
  /* x86-64 (multi-variant): the baseline; each variant's functions carry
   * their level's target-cpu and target-features (isa.c). */
  const CgIsa *isa = cpu_isa_of_target(o->target);
  char *cpu = LLVMCreateMessage(isa->cpu);
  char *feat = LLVMCreateMessage(host ? isa->features : "");
  LLVMTargetRef t;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(*triple, &t, &err)) {
    fprintf(stderr, "tdslc: error: --target=%s: %s\n", o->target, err);
    LLVMDisposeMessage(err);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    return NULL;
  }
  LLVMCodeGenOptLevel lv = o->opt_level == 0 ? LLVMCodeGenLevelNone
                         : o->opt_level == 1 ? LLVMCodeGenLevelLess
                         : o->opt_level == 2 ? LLVMCodeGenLevelDefault
                                             : LLVMCodeGenLevelAggressive;
  LLVMTargetMachineRef tm = LLVMCreateTargetMachine(t, *triple, cpu, feat, lv,
                                                    LLVMRelocPIC, LLVMCodeModelDefault);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(feat);
  return tm;
}

static int emit_machine(LLVMTargetMachineRef tm, LLVMModuleRef mod, const CgOptions *o,
                        LLVMCodeGenFileType ft, const char *ext) {
  LLVMMemoryBufferRef buf;
  char *err = NULL;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, ft, &err, &buf))
    ICE("LLVM code emission failed: %s", err);
  int s = cg_write_file(o, ext, LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
  LLVMDisposeMemoryBuffer(buf);
  return s;
}

int cpu_optimize_and_write(LLVMModuleRef mod, const CgOptions *o) {
  double t = 0;
  cg_phase_ms(o, "", &t);
  char *triple = NULL, *err = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &err))
    ICE("generated LLVM IR is invalid: %s", err);
  LLVMDisposeMessage(err);
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", o->opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  cg_phase_ms(o, "llvm-verify", &t);
  LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    ICE("LLVM passes failed: %s", msg);
  }
  LLVMDisposePassBuilderOptions(po);
  cg_phase_ms(o, "llvm-opt", &t);
  int s = 0;
  if (o->emit & CG_LLVM) {
    char *ir = LLVMPrintModuleToString(mod);
    s |= cg_write_file(o, ".ll", ir, strlen(ir));
    LLVMDisposeMessage(ir);
  }
  if (o->emit & CG_ASM) s |= emit_machine(tm, mod, o, LLVMAssemblyFile, ".s");
  if (o->emit & CG_OBJ) s |= emit_machine(tm, mod, o, LLVMObjectFile, ".o");
  cg_phase_ms(o, "llvm-codegen", &t);
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}
