/* isa.c — the instruction sets the CPU backend emits for (spec §8): the
 * CgIsa of --target=host (the host CPU's name and features), of each
 * x86-64 psABI level (x86-64-v2, -v3, -v4), and the variants of a
 * --target=x86-64 object: every kernel K emitted once per level as
 * internal K__v2, K__v3, K__v4 (each function with its level's
 * "target-cpu"/"target-features", so LLVM's optimizer and X86 back end
 * build it for that level), a public K that resolves the variant at its
 * first call (runtime tdsl_isa_level: the CPU's level, lowered by
 * $TDSL_ISA) into an atomic pointer and calls through it, and K_isa(),
 * which says which variant runs.  Objects of other targets get K_isa()
 * too, returning their one ISA's name.
 * Needs: cpu.h.  Used by: kernel.c (cpu_emit), machine.c (the target
 * machine), gemm.c (cg_gemm_vec_bits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/TargetMachine.h>

#include "cpu.h"

/* LLVM's features of each psABI level, cumulative (level 1 is x86-64). */
#define F_V1 "+cmov,+cx8,+fxsr,+mmx,+sse,+sse2,+x87"
#define F_V2 F_V1 ",+cx16,+sahf,+popcnt,+sse3,+sse4.1,+sse4.2,+ssse3,+crc32"
#define F_V3 F_V2 ",+avx,+avx2,+bmi,+bmi2,+f16c,+fma,+lzcnt,+movbe,+xsave"
#define F_V4 F_V3 ",+avx512f,+avx512bw,+avx512cd,+avx512dq,+avx512vl,+evex512"

static const CgIsa levels[4] = {
    {.name = "x86-64", .cpu = "x86-64", .features = F_V1, .level = 1, .vec_bits = 128,
     .suffix = ""},
    {.name = "x86-64-v2", .cpu = "x86-64-v2", .features = F_V2, .level = 2, .vec_bits = 128,
     .suffix = "__v2"},
    {.name = "x86-64-v3", .cpu = "x86-64-v3", .features = F_V3, .level = 3, .vec_bits = 256,
     .suffix = "__v3"},
    {.name = "x86-64-v4", .cpu = "x86-64-v4", .features = F_V4, .level = 4, .vec_bits = 512,
     .suffix = "__v4"},
};

/* The highest level whose every feature isa has. */
static int level_of(const CgIsa *isa) {
  int lv = 0;
  for (int l = 0; l < 4; l++) {
    char *fs = strdup(levels[l].features);
    bool all = fs != NULL;
    for (char *save, *t = strtok_r(fs, ",", &save); all && t; t = strtok_r(NULL, ",", &save))
      /* x87 and cx8 are every x86-64's; LLVM's host features leave them out */
      all = !strcmp(t, "+x87") || !strcmp(t, "+cx8") || cg_isa_has(isa, t + 1);
    free(fs);
    if (!all) break;
    lv = l + 1;
  }
  return lv;
}

/* The host CPU, read once (before any emission thread starts). */
static const CgIsa *host_isa(void) {
  static CgIsa h;
  if (h.name) return &h;
  char *cpu = LLVMGetHostCPUName(), *f = LLVMGetHostCPUFeatures();
  h.cpu = strdup(cpu);
  h.features = strdup(f);
  LLVMDisposeMessage(cpu);
  LLVMDisposeMessage(f);
  if (!h.cpu || !h.features) ICE("out of memory");
  h.suffix = "";
  h.vec_bits = cg_isa_has(&h, "avx512f") ? 512 : cg_isa_has(&h, "avx") ? 256 : 128;
  h.level = level_of(&h);
  h.name = h.cpu;
  return &h;
}

bool cpu_isa_multi(const char *target) { return !strcmp(target, "x86-64"); }

const CgIsa *cpu_isa_of_target(const char *target) {
  if (!strcmp(target, "host")) return host_isa();
  for (int l = 1; l < 4; l++)
    if (!strcmp(target, levels[l].name)) return &levels[l];
  return &levels[0]; /* x86-64 (the multi-variant object's own functions) */
}

int cpu_isa_variants(const char *target, const CgIsa **v) {
  if (!cpu_isa_multi(target)) {
    v[0] = cpu_isa_of_target(target);
    return 1;
  }
  for (int l = 1; l < 4; l++) v[l - 1] = &levels[l];
  return 3;
}

/* ---- a variant's functions -------------------------------------------------- */

void cpu_isa_seal_variant(Cg *c, bool split) {
  const CgIsa *isa = c->isa;
  for (LLVMValueRef f = LLVMGetFirstFunction(c->mod); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f) ||
        LLVMGetStringAttributeAtIndex(f, LLVMAttributeFunctionIndex, "target-cpu", 10))
      continue;
    cg_add_str_attr(c->ctx, f, "target-cpu", isa->cpu);
    cg_add_str_attr(c->ctx, f, "target-features", isa->features);
    size_t n;
    const char *name = LLVMGetValueName2(f, &n);
    char *nn = malloc(n + strlen(isa->suffix) + 1);
    if (!nn) ICE("out of memory");
    memcpy(nn, name, n);
    strcpy(nn + n, isa->suffix);
    LLVMSetValueName2(f, nn, strlen(nn));
    free(nn);
    if (LLVMGetLinkage(f) != LLVMExternalLinkage) continue;
    if (split) LLVMSetVisibility(f, LLVMHiddenVisibility); /* K's unit calls it */
    else LLVMSetLinkage(f, LLVMInternalLinkage);
  }
}

/* ---- dispatch ---------------------------------------------------------------- */

/* K's function type (entry.c cg_begin_kernel). */
static LLVMTypeRef kernel_type(Cg *c, const IrKernel *k) {
  int na = k->nparams + k->nresults;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)(na + 1));
  for (int i = 0; i < k->nparams; i++)
    ps[i] = k->params[i].is_tensor ? c->ptr : cg_scalar_arg_type(c, k->params[i].dtype);
  for (int i = 0; i < k->nresults; i++) ps[k->nparams + i] = c->ptr;
  return LLVMFunctionType(c->i32, ps, (unsigned)na, 0);
}

/* K__vN: defined in this module, or (a split build) declared, hidden. */
static LLVMValueRef variant_fn(Cg *c, const IrKernel *k, const CgIsa *isa) {
  char name[512];
  snprintf(name, sizeof name, "%s%s", k->name, isa->suffix);
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
  if (!f) {
    f = LLVMAddFunction(c->mod, name, kernel_type(c, k));
    LLVMSetVisibility(f, LLVMHiddenVisibility);
  }
  return f;
}

static LLVMValueRef name_global(Cg *c, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext(c->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".isa.name");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

/* K.isa.resolve(): the variant's function, resolved once into K.isa.fn;
 * NULL when no variant can run (the runtime's message set). */
static LLVMValueRef emit_resolver(Cg *c, const IrKernel *k, const CgIsa *const *v, int nv) {
  char name[512];
  snprintf(name, sizeof name, "%s.isa.fn", k->name);
  LLVMValueRef slot = LLVMAddGlobal(c->mod, c->ptr, name);
  LLVMSetInitializer(slot, LLVMConstNull(c->ptr));
  LLVMSetLinkage(slot, LLVMInternalLinkage);
  snprintf(name, sizeof name, "%s.isa.resolve", k->name);
  LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->ptr, NULL, 0, 0));
  LLVMSetLinkage(fn, LLVMInternalLinkage);
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(c->ctx, fn, "entry");
  LLVMBasicBlockRef pick = LLVMAppendBasicBlockInContext(c->ctx, fn, "pick");
  LLVMBasicBlockRef keep = LLVMAppendBasicBlockInContext(c->ctx, fn, "keep");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(c->ctx, fn, "done");
  LLVMPositionBuilderAtEnd(c->b, entry);
  LLVMValueRef p = LLVMBuildLoad2(c->b, c->ptr, slot, "");
  LLVMSetOrdering(p, LLVMAtomicOrderingAcquire);
  LLVMSetAlignment(p, 8);
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, p, ""), pick, done);
  LLVMPositionBuilderAtEnd(c->b, pick);
  LLVMValueRef lv = call(c, cg_fdecl(c, "tdsl_isa_level", c->i32, NULL, 0, 0), NULL, 0);
  LLVMValueRef q = LLVMConstNull(c->ptr);
  for (int i = 0; i < nv; i++) /* the highest variant at or below the level */
    q = sel(c, LLVMBuildICmp(c->b, LLVMIntSGE, lv, i32c(c, v[i]->level), ""),
            variant_fn(c, k, v[i]), q);
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, q, ""), done, keep);
  LLVMPositionBuilderAtEnd(c->b, keep);
  LLVMValueRef st = LLVMBuildStore(c->b, q, slot);
  LLVMSetOrdering(st, LLVMAtomicOrderingRelease);
  LLVMSetAlignment(st, 8);
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
  LLVMValueRef phi = LLVMBuildPhi(c->b, c->ptr, "");
  LLVMValueRef vals[3] = {p, q, q};
  LLVMBasicBlockRef bbs[3] = {entry, pick, keep};
  LLVMAddIncoming(phi, vals, bbs, 3);
  LLVMBuildRet(c->b, phi);
  return fn;
}

/* K(...): resolve, then call the variant with the same arguments. */
static void emit_dispatcher(Cg *c, const IrKernel *k, LLVMValueRef resolve, LLVMTypeRef ft) {
  LLVMValueRef fn = LLVMAddFunction(c->mod, k->name, ft);
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
  LLVMBasicBlockRef run = LLVMAppendBasicBlockInContext(c->ctx, fn, "run");
  LLVMBasicBlockRef none = LLVMAppendBasicBlockInContext(c->ctx, fn, "none");
  LLVMValueRef p = LLVMBuildCall2(c->b, LLVMGlobalGetValueType(resolve), resolve, NULL, 0, "");
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, p, ""), none, run);
  LLVMPositionBuilderAtEnd(c->b, none);
  LLVMBuildRet(c->b, i32c(c, E_ISA));
  LLVMPositionBuilderAtEnd(c->b, run);
  unsigned n = LLVMCountParams(fn);
  LLVMValueRef *a = arena_alloc(c->m->arena, sizeof *a * (n + 1));
  for (unsigned i = 0; i < n; i++) a[i] = LLVMGetParam(fn, i);
  LLVMValueRef r = LLVMBuildCall2(c->b, ft, p, a, n, "");
  LLVMSetTailCall(r, 1);
  LLVMBuildRet(c->b, r);
}

/* const char *K_isa(void): the name of the ISA K runs with. */
static void emit_query(Cg *c, const IrKernel *k, LLVMValueRef resolve, const CgIsa *const *v,
                       int nv) {
  char name[512];
  snprintf(name, sizeof name, "%s_isa", k->name);
  LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->ptr, NULL, 0, 0));
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
  if (!resolve) {
    LLVMBuildRet(c->b, name_global(c, v[0]->name));
    return;
  }
  LLVMValueRef p = LLVMBuildCall2(c->b, LLVMGlobalGetValueType(resolve), resolve, NULL, 0, "");
  LLVMValueRef r = LLVMConstNull(c->ptr);
  for (int i = 0; i < nv; i++)
    r = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, p, variant_fn(c, k, v[i]), ""),
            name_global(c, v[i]->name), r);
  LLVMBuildRet(c->b, r);
}

void cpu_isa_emit_entry(Cg *c, const IrKernel *k, const CgIsa *const *v, int nv) {
  if (nv == 1) {
    emit_query(c, k, NULL, v, nv);
    return;
  }
  LLVMValueRef resolve = emit_resolver(c, k, v, nv);
  emit_dispatcher(c, k, resolve, kernel_type(c, k));
  emit_query(c, k, resolve, v, nv);
}

const char *cg_isa_variants(const char *target) {
  if (!cg_cpu_backend.accepts(target)) return NULL;
  if (!cpu_isa_multi(target)) return cpu_isa_of_target(target)->name;
  return "x86-64-v2 x86-64-v3 x86-64-v4";
}

int cg_target_vec_bits(const char *target) {
  if (!cg_cpu_backend.accepts(target) || cpu_isa_multi(target)) return 0;
  return cpu_isa_of_target(target)->vec_bits;
}

int cg_gemm_vec_bits(const char *target) { return cpu_isa_of_target(target)->vec_bits; }
