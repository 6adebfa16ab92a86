/* machine.c — the CPU target machine (host or an x86-64 level), the
 * module's verification, the "default<On>" pipeline and the textual IR,
 * assembly or object written through it, or an object in memory (one
 * module of a build split across threads, kernel.c).
 * Needs: cpu.h, llvm-c's target machine and pass builder. */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "cpu.h"

/* (LLVM's native target initialized: cpu_init_llvm.) */
static LLVMTargetMachineRef target_machine(const CgOptions *o, char **triple) {
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

/* Verifies and optimizes mod for tm; quiet: no phase times (threads). */
static void optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *triple,
                     const CgOptions *o, bool quiet) {
  double t = 0;
  if (!quiet) cg_phase_ms(o, "", &t);
  char *err = NULL;
  LLVMSetTarget(mod, triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  LLVMDisposeTargetData(td);
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &err))
    ICE("generated LLVM IR is invalid: %s", err);
  LLVMDisposeMessage(err);
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", o->opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  if (!quiet) cg_phase_ms(o, "llvm-verify", &t);
  LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    ICE("LLVM passes failed: %s", msg);
  }
  LLVMDisposePassBuilderOptions(po);
  if (!quiet) cg_phase_ms(o, "llvm-opt", &t);
}

void cpu_init_llvm(void) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
}

int cpu_compile_to_memory(LLVMModuleRef mod, const CgOptions *o, LLVMMemoryBufferRef *obj) {
  char *triple = NULL, *err = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  optimize(mod, tm, triple, o, true);
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, obj))
    ICE("LLVM code emission failed: %s", err);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return 0;
}

int cpu_optimize_and_write(LLVMModuleRef mod, const CgOptions *o) {
  cpu_init_llvm();
  char *triple = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  optimize(mod, tm, triple, o, false);
  double t = 0;
  cg_phase_ms(o, "", &t);
  int s = 0;
  if (o->emit & CG_LLVM) {
    char *ir = LLVMPrintModuleToString(mod);
    s |= cg_write_file(o, ".ll", ir, strlen(ir));
    LLVMDisposeMessage(ir);
  }
  if (o->emit & CG_ASM) s |= emit_machine(tm, mod, o, LLVMAssemblyFile, ".s");
  if (o->emit & CG_OBJ) s |= emit_machine(tm, mod, o, LLVMObjectFile, ".o");
  cg_phase_ms(o, "llvm-codegen", &t);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}
