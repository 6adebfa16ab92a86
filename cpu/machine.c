/* machine.c — the CPU target machine (host or an x86-64 level), the
 * module's verification, the LLVM pass pipelines (llvm_passes: -O2's is
 * our own, in two halves around keep_remainders_rolled, the others
 * LLVM's "default<On>"; light_passes for functions
 * emitted as finished vector code, cpu_mark_light), LLVM's lowest code
 * generation level for entries without loops (cold_codegen,
 * cpu_mark_cold) and the textual IR,
 * assembly or object written through it, or an object in memory (one
 * module of a build split across threads, kernel.c).
 * Needs: cpu.h, llvm-c's target machine, pass builder and linker. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Linker.h>
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

/* -O2's pipeline: LLVM 19's default<O2> in its order, less what does
 * nothing for the generated IR (coroutines, OpenMP, expect intrinsics,
 * annotations, call-graph profiles, lookup tables, libcall shrink-wrap,
 * speculative execution for divergent targets, auto-init) and what
 * leaves the object code of every kernel in bench/ and examples/ byte
 * for byte unchanged (two of the inliner walk's simplifycfg runs, the
 * instcombine after loop-load-elim).  Runtime unrolling stays: without
 * it (loop-unroll<O2;no-runtime>) the objects were a third smaller and
 * code generation a quarter faster, but the direct conv's channel loop
 * (now only its NCHW body on vectors below 512 bits: the other direct
 * conv bodies take the light pipeline) and the GEMM's packing loops lost
 * their unrolled copies and conv3x3_nchw ran slower
 * (docs/architecture.md).  It runs in two
 * halves: through the loop vectorizer (o2_passes), then the rest
 * (o2_rest_passes), the vectorizer's scalar remainders kept rolled in
 * between (keep_remainders_rolled). */
static const char o2_passes[] =
    "inferattrs,function<eager-inv>(simplifycfg,sroa<modify-cfg>,early-cse),ipsccp,"
    "called-value-propagation,globalopt,"
    "function<eager-inv>(mem2reg,instcombine<no-verify-fixpoint>,simplifycfg<switch-range-to-icmp>),"
    "always-inline,require<globals-aa>,function(invalidate<aa>),"
    "cgscc(devirt<4>(inline,function-attrs<skip-non-recursive-function-attrs>,"
    "function<eager-inv;no-rerun>(sroa<modify-cfg>,early-cse<memssa>,jump-threading,"
    "correlated-propagation,instcombine<no-verify-fixpoint>,aggressive-instcombine,tailcallelim,"
    "reassociate,"
    "constraint-elimination,loop-mssa(loop-instsimplify,loop-simplifycfg,licm<no-allowspeculation>,"
    "loop-rotate,licm<allowspeculation>,simple-loop-unswitch),simplifycfg<switch-range-to-icmp>,"
    "instcombine<no-verify-fixpoint>,"
    "loop(loop-idiom,indvars,simple-loop-unswitch,loop-deletion,loop-unroll-full),"
    "sroa<modify-cfg>,vector-combine,mldst-motion,gvn,sccp,bdce,instcombine<no-verify-fixpoint>,"
    "jump-threading,correlated-propagation,adce,memcpyopt,dse,loop-mssa(licm<allowspeculation>),"
    "simplifycfg<switch-range-to-icmp;hoist-common-insts;sink-common-insts>,"
    "instcombine<no-verify-fixpoint>),function-attrs)),"
    "deadargelim,globalopt,globaldce,rpo-function-attrs,recompute-globalsaa,"
    "function<eager-inv>(float2int,lower-constant-intrinsics,loop(loop-rotate,loop-deletion),"
    "loop-distribute,inject-tli-mappings,loop-vectorize)";

/* The rest of o2_passes, run after the loop vectorizer's remainders are
 * marked (keep_remainders_rolled): the always-inline functions the
 * vectorizer called (the math layer's vector variants, codegen/math.c,
 * which no call named before it), the module analyses the first half
 * left cached, computed again, then the function passes from where the
 * first half stopped (the same code: the objects of bench/ and
 * examples/ were byte for byte those of the one pipeline). */
static const char o2_rest_passes[] =
    "always-inline,require<globals-aa>,require<profile-summary>,function<eager-inv>("
    "infer-alignment,loop-load-elim,"
    "simplifycfg<forward-switch-cond;switch-range-to-icmp;switch-to-lookup;no-keep-loops;"
    "hoist-common-insts;sink-common-insts>,"
    "slp-vectorizer,vector-combine,instcombine<no-verify-fixpoint>,loop-unroll<O2>,"
    "sroa<preserve-cfg>,infer-alignment,instcombine<no-verify-fixpoint>,"
    "loop-mssa(licm<allowspeculation>),alignment-from-assumptions,loop-sink,instsimplify,"
    "div-rem-pairs,tailcallelim,simplifycfg<switch-range-to-icmp;speculate-unpredictables>),"
    "globaldce,constmerge";

/* The scalar remainder the loop vectorizer leaves after a vector loop
 * carries "llvm.loop.isvectorized" but, unlike the vector loop, no
 * "llvm.loop.unroll.runtime.disable", so o2_passes' loop-unroll unrolled
 * it four times with a prologue loop: code for at most VF - 1
 * iterations that doubled a nest's size and made loop strength
 * reduction, whose time grows with the addresses in a loop, the most
 * expensive pass of code generation (preprocess's nest: 24 of 44 ms).
 * Such loops get runtime unrolling disabled (full unrolling of a known
 * trip count stays); loops with any unroll hint of their own are left
 * alone. */
/* Whether node is !{!"name", ...} (prefix: a name starting so). */
static bool md_named(LLVMValueRef node, const char *name, bool prefix) {
  unsigned n = node && LLVMIsAMDNode(node) ? LLVMGetMDNodeNumOperands(node) : 0, len = 0;
  if (n < 1 || n > 8) return false;
  LLVMValueRef ops[8];
  LLVMGetMDNodeOperands(node, ops);
  const char *s = ops[0] ? LLVMGetMDString(ops[0], &len) : NULL;
  size_t k = strlen(name);
  return s && (prefix ? len >= k : len == k) && !memcmp(s, name, k);
}

static void keep_remainders_rolled(LLVMModuleRef mod) {
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  unsigned kind = LLVMGetMDKindIDInContext(ctx, "llvm.loop", 9);
  const char *rd = "llvm.loop.unroll.runtime.disable";
  LLVMMetadataRef rdnode = NULL;
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb)) {
      LLVMValueRef br = LLVMGetBasicBlockTerminator(bb), id = br ? LLVMGetMetadata(br, kind) : NULL;
      unsigned n = id ? LLVMGetMDNodeNumOperands(id) : 0;
      if (n < 2 || n > 16) continue;
      LLVMValueRef ops[16];
      LLVMGetMDNodeOperands(id, ops);
      bool vectorized = false, hinted = false;
      for (unsigned i = 1; i < n; i++) {
        vectorized |= md_named(ops[i], "llvm.loop.isvectorized", false);
        hinted |= md_named(ops[i], "llvm.loop.unroll.", true);
      }
      if (!vectorized || hinted) continue;
      if (!rdnode) {
        LLVMMetadataRef s = LLVMMDStringInContext2(ctx, rd, strlen(rd));
        rdnode = LLVMMDNodeInContext2(ctx, &s, 1);
      }
      LLVMMetadataRef md[16]; /* the properties, then runtime.disable */
      for (unsigned i = 1; i < n; i++) md[i - 1] = LLVMValueAsMetadata(ops[i]);
      md[n - 1] = rdnode;
      LLVMValueRef v = LLVMMetadataAsValue(ctx, cg_loop_id(ctx, md, n));
      /* every latch of the loop (one after loop-simplify) */
      for (LLVMBasicBlockRef b2 = LLVMGetFirstBasicBlock(f); b2; b2 = LLVMGetNextBasicBlock(b2)) {
        LLVMValueRef t = LLVMGetBasicBlockTerminator(b2);
        if (t && LLVMGetMetadata(t, kind) == id) LLVMSetMetadata(t, kind, v);
      }
    }
}

/* The pipeline of the functions marked light (cpu_mark_light) at -O1 and
 * above: the GEMM's micro-kernels, packing and small-product bodies are
 * emitted as vector code, register-blocked and unrolled where it pays, so
 * they need what cleans up the emitted IR (SROA of the allocas, CSE of the
 * context loads, instcombine, simplifycfg), the inliner (the packing
 * helpers into the block body), LICM and loop rotation (one branch per
 * micro-kernel step) and GVN, not the loop and SLP vectorizers, runtime
 * unrolling, indvars or the rest of o2_passes, which made up four
 * fifths of these functions' pipeline time and a third of their code
 * size (docs/architecture.md). */
static const char light_passes[] =
    "function<eager-inv>(sroa<modify-cfg>,early-cse,instcombine<no-verify-fixpoint>,"
    "simplifycfg<switch-range-to-icmp>),"
    "cgscc(inline),"
    "function<eager-inv>(sroa<modify-cfg>,early-cse<memssa>,instcombine<no-verify-fixpoint>,"
    "loop-mssa(licm<allowspeculation>,loop-rotate,licm<allowspeculation>),"
    "gvn,instcombine<no-verify-fixpoint>,simplifycfg<switch-range-to-icmp>),"
    "globaldce";

/* The pass pipeline for o's level: $TDSL_LLVM_PASSES when set (any
 * pipeline LLVM's pass builder parses, "default<O2>" for LLVM's own; it
 * replaces the light pipeline too), else light_passes for a light module
 * at -O1 and above, o2_passes at -O2 and "default<On>" at the other
 * levels (into buf). */
static const char *llvm_passes(const CgOptions *o, bool light, char *buf, size_t cap) {
  const char *env = getenv("TDSL_LLVM_PASSES");
  if (env && *env) return env;
  if (light && o->opt_level > 0) return light_passes;
  if (o->opt_level == 2) return o2_passes;
  snprintf(buf, cap, "default<O%d>", o->opt_level);
  return buf;
}

/* The user's pipeline ($TDSL_LLVM_PASSES) failed: a usage error. */
static _Noreturn void user_pipeline_error(const char *passes, LLVMErrorRef e) {
  char *msg = LLVMGetErrorMessage(e);
  fprintf(stderr, "tdslc: error: TDSL_LLVM_PASSES='%s': %s\n", passes, msg);
  LLVMDisposeErrorMessage(msg);
  exit(2);
}

/* The functions marked cold (cpu_mark_cold) that have no loop, after
 * the pass pipeline: optnone (and noinline, which it needs), so that the
 * X86 back end selects their instructions with FastISel and skips loop
 * strength reduction, the machine scheduler and its other optimizations
 * for them, as at -O0, while every other function of the module keeps
 * o's level.  Their code is larger (mlp's entry 595 -> 702
 * instructions) and runs once per call (docs/architecture.md, "Cold
 * functions"). */
static void cold_codegen(LLVMModuleRef mod) {
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    if (!cpu_is_cold_acyclic(f)) continue;
    cg_add_attr(ctx, f, LLVMAttributeFunctionIndex, "noinline");
    cg_add_attr(ctx, f, LLVMAttributeFunctionIndex, "optnone");
  }
}

/* Verifies and optimizes mod for tm; quiet: no phase times (threads). */
static void optimize(LLVMModuleRef mod, LLVMTargetMachineRef tm, const char *triple,
                     const CgOptions *o, bool light, bool quiet) {
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
  char buf[32];
  const char *passes = llvm_passes(o, light, buf, sizeof buf);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  if (!quiet) cg_phase_ms(o, "llvm-verify", &t);
  LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
  if (!e && passes == o2_passes) { /* the second half (keep_remainders_rolled) */
    keep_remainders_rolled(mod);
    LLVMDisposePassBuilderOptions(po);
    po = LLVMCreatePassBuilderOptions();
    e = LLVMRunPasses(mod, o2_rest_passes, tm, po);
  }
  if (e) {
    if (passes != o2_passes && passes != light_passes && passes != buf)
      user_pipeline_error(passes, e);
    ICE("LLVM passes failed: %s", LLVMGetErrorMessage(e));
  }
  LLVMDisposePassBuilderOptions(po);
  if (o->opt_level > 0) cold_codegen(mod);
  if (!quiet) cg_phase_ms(o, "llvm-opt", &t);
}

/* A $TDSL_LLVM_PASSES that LLVM's pass builder cannot parse, found on an
 * empty module before any module is optimized: one message, exit 2 (on
 * threads each module would report it and exit under the others). */
static void check_user_pipeline(void) {
  const char *env = getenv("TDSL_LLVM_PASSES");
  if (!env || !*env) return;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("tdsl.passes", ctx);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(mod, env, NULL, po);
  LLVMDisposePassBuilderOptions(po);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  if (e) user_pipeline_error(env, e);
}

void cpu_init_llvm(void) {
  LLVMInitializeNativeTarget();
  LLVMInitializeNativeAsmPrinter();
  check_user_pipeline();
}

double cpu_thread_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cpu_compile_to_memory(LLVMModuleRef mod, const CgOptions *o, bool light,
                          LLVMMemoryBufferRef *obj, double ms[2]) {
  char *triple = NULL, *err = NULL;
  double t0 = cpu_thread_ms();
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  optimize(mod, tm, triple, o, light, true);
  double t1 = cpu_thread_ms();
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMObjectFile, &err, obj))
    ICE("LLVM code emission failed: %s", err);
  ms[0] += t1 - t0;
  ms[1] += cpu_thread_ms() - t1;
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return 0;
}

/* Writes the optimized mod as o's emits through tm. */
static int write_module(LLVMModuleRef mod, LLVMTargetMachineRef tm, const CgOptions *o) {
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
  return s;
}

int cpu_optimize_and_write(LLVMModuleRef mod, const CgOptions *o) {
  cpu_init_llvm();
  char *triple = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  optimize(mod, tm, triple, o, false, false);
  int s = write_module(mod, tm, o);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}

int cpu_optimize_parts_and_write(LLVMMemoryBufferRef bc, const int *owner, const CpuPart *parts,
                                 int n, const CgOptions *o) {
  cpu_init_llvm();
  char *triple = NULL;
  LLVMTargetMachineRef tm = target_machine(o, &triple);
  if (!tm) return 2;
  double t = 0;
  cg_phase_ms(o, "", &t);
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod = NULL;
  for (int p = 0; p < n; p++) {
    LLVMModuleRef part = cpu_split_part(ctx, bc, owner, p);
    optimize(part, tm, triple, o, parts[p].light, true);
    if (!mod) mod = part;
    else if (LLVMLinkModules2(mod, part)) ICE("linking the optimized module parts failed");
  }
  /* what split.c made hidden for the other parts is local again */
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && LLVMGetVisibility(f) == LLVMHiddenVisibility &&
        LLVMGetLinkage(f) == LLVMExternalLinkage)
      LLVMSetLinkage(f, LLVMPrivateLinkage);
  cg_phase_ms(o, "llvm-opt", &t);
  int s = write_module(mod, tm, o);
  LLVMDisposeModule(mod);
  LLVMContextDispose(ctx);
  LLVMDisposeTargetMachine(tm);
  LLVMDisposeMessage(triple);
  return s;
}
