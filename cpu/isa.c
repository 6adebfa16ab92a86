/* isa.c — the instruction sets the CPU backend emits for (spec §8): the
 * CgIsa of --target=host (the host CPU's name and features), of each
 * x86-64 psABI level (x86-64-v2, -v3, -v4), and the variants of a
 * --target=x86-64 object: every kernel K emitted once per level as
 * internal K__v2, K__v3, K__v4 and, where its products would use them
 * (int8/i16 or bf16 operands: cpu_isa_uses), once more on v3 with
 * AVX-VNNI and on v4 with AVX512-VNNI and/or AVX512-BF16 (K__v3_avxvnni,
 * K__v4_vnni, K__v4_bf16, K__v4_bf16_vnni): each function with its
 * variant's "target-cpu"/"target-features", so LLVM's optimizer and X86
 * back end build it for that ISA and the GEMM and conv kernels choose
 * their dot products from the features (gemm_lowp.c); a public K that
 * resolves the variant at its first call (runtime tdsl_isa_level and
 * tdsl_isa_extensions: the CPU's, lowered by $TDSL_ISA) into an atomic
 * pointer and calls through it; and K_isa(), which says which variant
 * runs.  Objects of other targets get K_isa() too, returning their one
 * ISA's name.
 * Needs: cpu.h.  Used by: kernel.c (cpu_emit), machine.c (the target
 * machine), gemm.c (cg_gemm_vec_bits), the driver (cg_isa_variants,
 * cg_isa_use for the report). */
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

/* Every variant a --target=x86-64 object may carry, in the order a
 * kernel's resolver tries them (a later one that can run wins): the
 * levels, each followed by the level with the extensions (bits as the
 * runtime's TDSL_ISA_*) of its products' dot products. */
static const CgIsa variants[CPU_ISA_MAX_VARIANTS] = {
    levels[1],
    levels[2],
    {.name = "x86-64-v3+avxvnni", .cpu = "x86-64-v3", .features = F_V3 ",+avxvnni",
     .level = 3, .ext = CG_ISA_AVX_VNNI, .vec_bits = 256, .suffix = "__v3_avxvnni"},
    levels[3],
    {.name = "x86-64-v4+avx512vnni", .cpu = "x86-64-v4", .features = F_V4 ",+avx512vnni",
     .level = 4, .ext = CG_ISA_AVX512_VNNI, .vec_bits = 512, .suffix = "__v4_vnni"},
    {.name = "x86-64-v4+avx512bf16", .cpu = "x86-64-v4", .features = F_V4 ",+avx512bf16",
     .level = 4, .ext = CG_ISA_AVX512_BF16, .vec_bits = 512, .suffix = "__v4_bf16"},
    {.name = "x86-64-v4+avx512bf16+avx512vnni", .cpu = "x86-64-v4",
     .features = F_V4 ",+avx512bf16,+avx512vnni", .level = 4,
     .ext = CG_ISA_AVX512_BF16 | CG_ISA_AVX512_VNNI, .vec_bits = 512,
     .suffix = "__v4_bf16_vnni"},
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

/* ---- which variants a kernel carries ---------------------------------------- */

/* Operand j of product v as the GEMM reads it: a cast that only widens
 * a tensor (a.to(i32) of i8) is read narrow (loops/conv_algo.c
 * lf_pro_widened). */
static DType operand_dtype(const IrKernel *k, const IrValue *v, int j) {
  const IrValue *a = ir_val(k, v->args[j]), *root = ir_val(k, ir_storage_root(k, v->args[j]));
  if (root->op == OP_CAST) {
    const IrValue *in = ir_val(k, ir_storage_root(k, root->args[0]));
    if (in->rank > 0 && dtype_widens(in->dtype, root->dtype)) return in->dtype;
  }
  return a->dtype;
}

unsigned cpu_isa_use(const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  if (v->op != OP_MATMUL && v->op != OP_CONV2D) return 0;
  /* a depthwise conv (one input channel a group, several groups) has its
   * own kernel, with no dot products (loops/conv_algo.c) */
  if (v->op == OP_CONV2D && sym_is(ir_val(k, v->args[1])->shape[1], 1) &&
      !sym_is(v->attrs[6], 1))
    return 0;
  DType a = operand_dtype(k, v, 0), b = operand_dtype(k, v, 1), cd =
      gemm_lowp_compute_dtype(v->dtype);
  if (cd == DT_I32 && gemm_int_dot_dtype(a) && gemm_int_dot_dtype(b)) return CPU_USES_INT_DOT;
  if (cd == DT_F32 && a == DT_BF16 && b == DT_BF16) return CPU_USES_BF16_DOT;
  return 0;
}

unsigned cpu_isa_uses(const IrKernel *k) {
  unsigned u = 0;
  for (IrRef r = 0; r < k->nvalues; r++) u |= cpu_isa_use(k, r);
  return u;
}

/* The extensions of level lv that products of uses run faster with. */
static unsigned extensions_for(unsigned uses, int lv) {
  unsigned e = 0;
  if (lv == 3 && (uses & CPU_USES_INT_DOT)) e |= CG_ISA_AVX_VNNI;
  if (lv == 4 && (uses & CPU_USES_INT_DOT)) e |= CG_ISA_AVX512_VNNI;
  if (lv == 4 && (uses & CPU_USES_BF16_DOT)) e |= CG_ISA_AVX512_BF16;
  return e;
}

/* Kernel k's variants (k NULL: a kernel without such products): bits
 * over `variants` (each level, and the level with the extensions its
 * products use). */
static unsigned kernel_mask(const IrKernel *k) {
  unsigned uses = k ? cpu_isa_uses(k) : 0, mask = 0;
  for (int i = 0; i < CPU_ISA_MAX_VARIANTS; i++)
    if (!variants[i].ext || variants[i].ext == extensions_for(uses, variants[i].level))
      mask |= 1u << i;
  return mask;
}

int cpu_isa_variants(const char *target, const IrModule *m, const CgIsa **v, unsigned *kmask) {
  if (!cpu_isa_multi(target)) {
    v[0] = cpu_isa_of_target(target);
    for (int i = 0; i < m->nkernels; i++) kmask[i] = 1;
    return 1;
  }
  unsigned all = m->nkernels ? 0 : kernel_mask(NULL);
  for (int i = 0; i < m->nkernels; i++) all |= kmask[i] = kernel_mask(m->kernels[i]);
  int n = 0, at[CPU_ISA_MAX_VARIANTS];
  for (int j = 0; j < CPU_ISA_MAX_VARIANTS; j++)
    if (all >> j & 1) at[j] = n, v[n++] = &variants[j];
  for (int i = 0; i < m->nkernels; i++) { /* bits over the object's list */
    unsigned km = 0;
    for (int j = 0; j < CPU_ISA_MAX_VARIANTS; j++)
      if (kmask[i] >> j & 1) km |= 1u << at[j];
    kmask[i] = km;
  }
  return n;
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
  LLVMValueRef ext = NULL; /* asked only where a variant needs extensions */
  for (int i = 0; i < nv && !ext; i++)
    if (v[i]->ext) ext = call(c, cg_fdecl(c, "tdsl_isa_extensions", c->i32, NULL, 0, 0), NULL, 0);
  LLVMValueRef q = LLVMConstNull(c->ptr);
  for (int i = 0; i < nv; i++) { /* the last that can run: levels ascend, each
                                    level's extension variant after it */
    LLVMValueRef ok = LLVMBuildICmp(c->b, LLVMIntSGE, lv, i32c(c, v[i]->level), "");
    if (v[i]->ext) {
      LLVMValueRef need = i32c(c, (int)v[i]->ext);
      ok = LLVMBuildAnd(c->b, ok, LLVMBuildICmp(c->b, LLVMIntEQ,
                                                LLVMBuildAnd(c->b, ext, need, ""), need, ""), "");
    }
    q = sel(c, ok, variant_fn(c, k, v[i]), q);
  }
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

const char *cg_isa_variants(const IrModule *m, const char *target) {
  if (!cg_cpu_backend.accepts(target)) return NULL;
  if (!cpu_isa_multi(target)) return cpu_isa_of_target(target)->name;
  const CgIsa *v[CPU_ISA_MAX_VARIANTS];
  unsigned *km = arena_alloc(m->arena, sizeof *km * (size_t)(m->nkernels + 1));
  int n = cpu_isa_variants(target, m, v, km);
  size_t len = 1;
  for (int i = 0; i < n; i++) len += strlen(v[i]->name) + 1;
  char *s = arena_alloc(m->arena, len), *p = s;
  for (int i = 0; i < n; i++) p += sprintf(p, "%s%s", i ? " " : "", v[i]->name);
  *p = '\0';
  return s;
}

const char *cg_isa_use(const IrKernel *k, IrRef r, const char *target) {
  if (!cg_cpu_backend.accepts(target) || !cpu_isa_multi(target)) return NULL;
  unsigned u = cpu_isa_use(k, r);
  if (u == CPU_USES_INT_DOT)
    return "of 8/16-bit integers into i32: built also for x86-64-v3+avxvnni and "
           "x86-64-v4+avx512vnni (dot products with vpdpbusd, vpdpwssd)";
  if (u == CPU_USES_BF16_DOT)
    return "of bf16 into f32: built also for x86-64-v4+avx512bf16 (dot products of bf16 "
           "pairs with vdpbf16ps)";
  return NULL;
}

int cg_target_vec_bits(const char *target) {
  if (!cg_cpu_backend.accepts(target) || cpu_isa_multi(target)) return 0;
  return cpu_isa_of_target(target)->vec_bits;
}

int cg_gemm_vec_bits(const char *target) { return cpu_isa_of_target(target)->vec_bits; }
