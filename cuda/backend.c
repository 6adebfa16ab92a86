/* backend.c — the CUDA backend (backend.h cg_cuda_backend): builds the
 * device module (one kernel per launch unit, nest.c and gemm.c, and
 * its variants, variant.c), optimizes it
 * and compiles it to PTX with LLVM's NVPTX target; then builds the host
 * module (host.c), which embeds that PTX as a tdsl_cuda_module, and
 * writes it through the host's target machine (cpu/machine.c, generic
 * x86-64).  --emit=ptx writes the PTX, llvm the device module's IR.
 * Also the device-side helpers every device kernel uses (cuda.h).
 * Needs: cuda.h, llvm-c's target machine and pass builder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "../cpu/cpu.h"
#include "cuda.h"

/* ---- plans ------------------------------------------------------------- */

DType cu_acc_dtype(DType in) {
  return in == DT_F64 ? DT_F64 : dtype_is_float(in) ? DT_F32 : DT_I64;
}

/* Reductions: one thread per output for windows (pools) and short
 * constant reductions; blocks per output when there are few outputs (a
 * full reduction: split over many blocks, nest.c "Split reductions");
 * else a warp per output. */
CuPlan cu_plan(const LfNest *n) {
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) return (CuPlan){CU_GEMM, 0};
  if (n->reduce == OP_COUNT) return (CuPlan){CU_ELEMWISE, 0};
  if (lf_is_scan(n)) return (CuPlan){CU_REDUCE, 1}; /* a thread per row (nest.c) */
  bool bounds = false;
  for (int j = 0; n->red_lo && j < n->nred; j++) bounds |= n->red_lo[j] != NULL;
  int64_t r = 1, o = 1, e;
  bool rconst = true, oconst = true;
  for (int j = 0; j < n->nred; j++) {
    if (sym_is_const(n->red[j], &e)) r *= e;
    else rconst = false;
  }
  for (int l = 0; l < n->rank; l++) {
    if (sym_is_const(n->shape[l], &e)) o *= e;
    else oconst = false;
  }
  if (bounds || (rconst && r <= 16)) return (CuPlan){CU_REDUCE, 1};
  if (oconst && o < CU_SPLIT_FEW) return (CuPlan){CU_REDUCE, CU_BLOCK};
  return (CuPlan){CU_REDUCE, 32};
}

int cu_unit(const LfKernel *lk, int i, int opt) {
  for (int j = 0; opt > 0 && j < i; j++) /* inside an earlier group? */
    if (lk->nests[j].group > 1 && i < j + lk->nests[j].group) return 0;
  const LfNest *n = &lk->nests[i];
  return opt > 0 && n->group > 1 && n->shared > 0 ? n->group : 1;
}

/* Device kernels of lk: every unit's variants (variant.c), and a split
 * reduction's finish kernel (cu_unit_funcs). */
static int n_funcs(SymTab *st, const LfKernel *lk, int opt, const LfTarget *t) {
  int u = 0;
  CuVariant v[CU_MAX_VARIANTS];
  for (int i = 0; i < lk->nnests; i++)
    if (cu_unit(lk, i, opt) > 0) u += cu_variants(st, lk, i, opt, t, v) + cu_unit_funcs(lk, i, opt) - 1;
  return u;
}

/* ---- the device kernels' parameters ------------------------------------------ */

static int n_rt_strides(const IrKernel *k) {
  int n = 0;
  for (int r = 0; r < k->nresults; r++) n += k->results[r].rank;
  return n;
}

static int n_scalars(const LfKernel *lk) {
  int n = 0;
  for (int i = 0; i < lk->nbufs; i++) n += lk->bufs[i].kind == LFB_SCALAR;
  return n;
}

int cu_nparams(const IrKernel *k, const LfKernel *lk) {
  return lk->nbufs + k->nsyms + n_rt_strides(k) + n_scalars(lk) + cu_has_split(lk) +
         cu_has_checks(lk);
}

int cu_param_types(Cg *c, LLVMTypeRef *ps) {
  int n = 0;
  for (int i = 0; i < c->lk->nbufs; i++) ps[n++] = c->ptr;
  int rest = c->k->nsyms + n_rt_strides(c->k) + n_scalars(c->lk);
  for (int i = 0; i < rest; i++) ps[n++] = c->i64;
  if (cu_has_split(c->lk)) ps[n++] = c->ptr;  /* split reductions' partials */
  if (cu_has_checks(c->lk)) ps[n++] = c->ptr; /* the index checks' flags */
  return n;
}

void cu_unpack(Cg *c, LLVMValueRef fn, LLVMValueRef **rts) {
  const LfKernel *lk = c->lk;
  const IrKernel *k = c->k;
  int p = 0;
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(lk->nbufs + 1));
  for (int i = 0; i < lk->nbufs; i++) {
    LLVMValueRef v = LLVMGetParam(fn, (unsigned)p++);
    c->base[i] = lk->bufs[i].kind == LFB_CONST ? cg_const_tensor(c, &lk->bufs[i], 1) : v; /* global memory */
  }
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(k->nsyms + 1));
  for (int s = 0; s < k->nsyms; s++) c->env[s] = LLVMGetParam(fn, (unsigned)p++);
  for (int r = 0; r < k->nresults; r++) {
    rts[r] = arena_alloc(c->m->arena, sizeof **rts * (size_t)(k->results[r].rank + 1));
    for (int d = 0; d < k->results[r].rank; d++) rts[r][d] = LLVMGetParam(fn, (unsigned)p++);
  }
  c->scalar = arena_alloc(c->m->arena, sizeof *c->scalar * (size_t)(lk->nbufs + 1));
  for (int i = 0; i < lk->nbufs; i++) { /* by value: the bits host.c passes */
    const LfBuf *b = &lk->bufs[i];
    if (b->kind != LFB_SCALAR) continue;
    LLVMTypeRef at = cg_scalar_arg_type(c, b->dtype);
    LLVMValueRef v = LLVMGetParam(fn, (unsigned)p++);
    LLVMSetValueName2(v, k->params[b->index].name, strlen(k->params[b->index].name));
    if (LLVMGetTypeKind(at) == LLVMIntegerTypeKind) {
      if (at != c->i64) v = LLVMBuildTrunc(c->b, v, at, "");
    } else {
      if (at == c->f32) v = LLVMBuildTrunc(c->b, v, c->i32, "");
      v = LLVMBuildBitCast(c->b, v, at, "");
    }
    c->base[i] = NULL;
    c->scalar[i] = cg_scalar_value(c, v, b->dtype);
  }
}

/* ---- device helpers ----------------------------------------------------- */

LLVMValueRef cu_sreg(Cg *c, const char *name) {
  char full[64];
  snprintf(full, sizeof full, "llvm.nvvm.read.ptx.sreg.%s", name);
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, full);
  if (!f) f = LLVMAddFunction(c->mod, full, LLVMFunctionType(c->i32, NULL, 0, 0));
  return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f), f, NULL, 0, "");
}

void cu_barrier(Cg *c) {
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "llvm.nvvm.barrier0");
  if (!f) f = LLVMAddFunction(c->mod, "llvm.nvvm.barrier0", LLVMFunctionType(c->vd, NULL, 0, 0));
  LLVMBuildCall2(c->b, LLVMGlobalGetValueType(f), f, NULL, 0, "");
}

LLVMValueRef cu_shared(Cg *c, LLVMTypeRef t, int n, const char *name) {
  LLVMTypeRef at = LLVMArrayType2(t, (uint64_t)n);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(c->mod, at, name, 3);
  LLVMSetInitializer(g, LLVMGetUndef(at));
  LLVMSetLinkage(g, LLVMInternalLinkage);
  LLVMSetAlignment(g, 16);
  return LLVMConstAddrSpaceCast(g, c->ptr);
}

void cu_mark_kernel(Cg *c, LLVMValueRef fn) {
  LLVMValueRef md[3] = {fn, LLVMMDStringInContext(c->ctx, "kernel", 6), i32c(c, 1)};
  LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations", LLVMMDNodeInContext(c->ctx, md, 3));
}

void cu_split_rowmajor(Cg *c, LLVMValueRef i, const Sym *const *ext, int n, LLVMValueRef *iv) {
  for (int d = n - 1; d >= 0; d--) {
    LLVMValueRef e = cg_sym_val(c, ext[d]);
    iv[d] = d ? LLVMBuildURem(c->b, i, e, "") : i;
    if (d) i = LLVMBuildUDiv(c->b, i, e, "");
  }
}

LLVMValueRef cu_outer_product(Cg *c, const LfNest *n, int from, int to) {
  LLVMValueRef t = i64c(c, 1);
  for (int l = from; l < to; l++) t = LLVMBuildMul(c->b, t, cg_sym_val(c, n->shape[l]), "");
  return t;
}

LLVMValueRef cu_loop_open(Cg *c, CuLoop *l, LLVMValueRef start, LLVMValueRef end,
                          LLVMValueRef step) {
  LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), body = block(c, "body");
  l->header = block(c, "loop");
  l->exit = block(c, "loop_end");
  l->step = step;
  LLVMBuildBr(c->b, l->header);
  LLVMPositionBuilderAtEnd(c->b, l->header);
  l->iv = LLVMBuildPhi(c->b, c->i64, "i");
  LLVMAddIncoming(l->iv, &start, &pre, 1);
  LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, l->iv, end, ""), body, l->exit);
  LLVMPositionBuilderAtEnd(c->b, body);
  return l->iv;
}

void cu_loop_close(Cg *c, CuLoop *l) {
  LLVMValueRef next = LLVMBuildAdd(c->b, l->iv, l->step, "");
  LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
  LLVMAddIncoming(l->iv, &next, &latch, 1);
  LLVMBuildBr(c->b, l->header);
  LLVMPositionBuilderAtEnd(c->b, l->exit);
}

static LLVMValueRef sreg64(Cg *c, const char *name) {
  return LLVMBuildZExt(c->b, cu_sreg(c, name), c->i64, "");
}

LLVMValueRef cu_global_tid(Cg *c) {
  return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, sreg64(c, "ctaid.x"), sreg64(c, "ntid.x"), ""),
                      sreg64(c, "tid.x"), "");
}

LLVMValueRef cu_grid_threads(Cg *c) {
  return LLVMBuildMul(c->b, sreg64(c, "nctaid.x"), sreg64(c, "ntid.x"), "");
}

/* ---- the NVPTX target -------------------------------------------------------- */

/* "sm_80" from "cuda" / "cuda:sm_80", and the PTX ISA version it needs. */
static const char *sm_of(const char *target) {
  return !strcmp(target, "cuda") ? "sm_80" : target + 5;
}

static const char *ptx_feature(const char *sm) {
  if (!strcmp(sm, "sm_90a")) return "+ptx80";
  if (!strcmp(sm, "sm_90") || !strcmp(sm, "sm_89")) return "+ptx78";
  if (!strcmp(sm, "sm_87")) return "+ptx74";
  if (!strcmp(sm, "sm_86")) return "+ptx71";
  if (!strcmp(sm, "sm_80")) return "+ptx70";
  return "+ptx64";
}

static LLVMTargetMachineRef nvptx_machine(const CgOptions *o) {
  LLVMInitializeNVPTXTargetInfo();
  LLVMInitializeNVPTXTarget();
  LLVMInitializeNVPTXTargetMC();
  LLVMInitializeNVPTXAsmPrinter();
  LLVMTargetRef t;
  char *err = NULL;
  if (LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &t, &err)) {
    fprintf(stderr, "tdslc: error: --target=%s: LLVM has no NVPTX target: %s\n", o->target, err);
    LLVMDisposeMessage(err);
    return NULL;
  }
  const char *sm = sm_of(o->target);
  LLVMCodeGenOptLevel lv = o->opt_level == 0 ? LLVMCodeGenLevelNone : LLVMCodeGenLevelDefault;
  return LLVMCreateTargetMachine(t, "nvptx64-nvidia-cuda", sm, ptx_feature(sm), lv,
                                 LLVMRelocDefault, LLVMCodeModelDefault);
}

/* Optimizes the device module and returns its PTX (malloc'd), or NULL. */
static char *device_ptx(LLVMModuleRef mod, const CgOptions *o, int *status) {
  LLVMTargetMachineRef tm = nvptx_machine(o);
  if (!tm) {
    *status = 2;
    return NULL;
  }
  LLVMSetTarget(mod, "nvptx64-nvidia-cuda");
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  LLVMSetModuleDataLayout(mod, td);
  char *err = NULL;
  if (LLVMVerifyModule(mod, LLVMReturnStatusAction, &err))
    ICE("generated device IR is invalid: %s", err);
  LLVMDisposeMessage(err);
  char passes[32];
  snprintf(passes, sizeof passes, "default<O%d>", o->opt_level);
  LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
  LLVMErrorRef e = LLVMRunPasses(mod, passes, tm, po);
  if (e) {
    char *msg = LLVMGetErrorMessage(e);
    ICE("LLVM passes failed on the device module: %s", msg);
  }
  LLVMDisposePassBuilderOptions(po);
  if (o->emit & CG_LLVM) {
    char *ir = LLVMPrintModuleToString(mod);
    *status |= cg_write_file(o, ".ll", ir, strlen(ir));
    LLVMDisposeMessage(ir);
  }
  LLVMMemoryBufferRef buf;
  if (LLVMTargetMachineEmitToMemoryBuffer(tm, mod, LLVMAssemblyFile, &err, &buf))
    ICE("PTX emission failed: %s", err);
  size_t n = LLVMGetBufferSize(buf);
  char *ptx = malloc(n + 1);
  if (!ptx) ICE("out of memory");
  memcpy(ptx, LLVMGetBufferStart(buf), n);
  ptx[n] = 0;
  LLVMDisposeMemoryBuffer(buf);
  LLVMDisposeTargetData(td);
  LLVMDisposeTargetMachine(tm);
  return ptx;
}

/* ---- the two modules -------------------------------------------------------- */

static void init_cg(Cg *c, IrModule *m, const CgOptions *o, LLVMContextRef ctx, const char *name) {
  *c = (Cg){.m = m, .opt = o->opt_level, .dl_device = DL_CUDA, .layer_trig = true, .own_frem = true,
            .target = lf_target_params(cg_cuda_backend.sched)};
  c->cu_sm = atoi(sm_of(o->target) + 3); /* "sm_90a": 90 */
  c->ctx = ctx;
  c->mod = LLVMModuleCreateWithNameInContext(name, ctx);
  c->b = LLVMCreateBuilderInContext(ctx);
  cg_init_types(c);
}

static void kernel_name(char *buf, size_t n, const IrKernel *k, int nest, const CuVariant *v) {
  snprintf(buf, n, "%s__n%d%s%s", k->name, nest, v->tag[0] ? "_" : "", v->tag);
}

/* The second device kernel of a split reduction (cu_unit_funcs). */
static void fin_name(char *buf, size_t n, const IrKernel *k, int nest) {
  snprintf(buf, n, "%s__n%d_fin", k->name, nest);
}

/* A new device kernel `name` with the parameters ps[0 .. np), the
 * builder at its entry. */
static LLVMValueRef begin_device_kernel(Cg *d, const char *name, LLVMTypeRef *ps, int np) {
  LLVMValueRef fn = LLVMAddFunction(d->mod, name, LLVMFunctionType(d->vd, ps, (unsigned)np, 0));
  cu_mark_kernel(d, fn);
  d->fn = fn;
  d->entry = LLVMAppendBasicBlockInContext(d->ctx, fn, "entry");
  LLVMPositionBuilderAtEnd(d->b, d->entry);
  d->nloops = 0;
  return fn;
}

/* Every nest of every kernel as a device kernel. */
static void emit_device(Cg *d, LfKernel **lks) {
  IrModule *m = d->m;
  for (int i = 0; i < m->nkernels; i++) {
    d->k = m->kernels[i];
    d->lk = lks[i];
    int np = cu_nparams(d->k, d->lk);
    LLVMTypeRef *ps = arena_alloc(m->arena, sizeof *ps * (size_t)(np + 1));
    cu_param_types(d, ps);
    for (int j = 0; j < d->lk->nnests; j++) {
      int unit = cu_unit(d->lk, j, d->opt);
      if (!unit) continue;
      CuVariant vs[CU_MAX_VARIANTS];
      int nv = cu_variants(m->st, d->lk, j, d->opt, d->target, vs);
      const LfNest *n = &d->lk->nests[j];
      for (int v = 0; v < nv; v++) {
        char name[600];
        kernel_name(name, sizeof name, d->k, j, &vs[v]);
        LLVMValueRef fn = begin_device_kernel(d, name, ps, np);
        if (vs[v].form != CU_FORM_DEFAULT) cu_emit_variant_kernel(d, n, &vs[v], fn);
        else if (n->check) cu_emit_check_kernel(d, n, fn);
        else if (unit > 1) cu_emit_group_kernel(d, n, fn);
        else if (cu_plan(n).kind == CU_GEMM) cu_emit_gemm_kernel(d, n, fn);
        else cu_emit_nest_kernel(d, n, fn);
      }
      if (cu_unit_funcs(d->lk, j, d->opt) == 2) { /* a split reduction's finish, after it */
        char name[600];
        fin_name(name, sizeof name, d->k, j);
        LLVMValueRef fn = begin_device_kernel(d, name, ps, np);
        cu_emit_split_finish_kernel(d, n, fn);
      }
    }
  }
}

static LLVMValueRef host_string(Cg *h, const char *s, const char *name) {
  LLVMValueRef init = LLVMConstStringInContext(h->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(h->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

/* The tdsl_cuda_module {ptx, nfuncs, names, state} of the object. */
static LLVMValueRef host_module_desc(Cg *h, const char *ptx, LfKernel **lks, int nfuncs) {
  LLVMValueRef *names = arena_alloc(h->m->arena, sizeof *names * (size_t)(nfuncs + 1));
  int f = 0;
  for (int i = 0; i < h->m->nkernels; i++)
    for (int j = 0; j < lks[i]->nnests; j++) {
      if (!cu_unit(lks[i], j, h->opt)) continue;
      CuVariant vs[CU_MAX_VARIANTS];
      int nv = cu_variants(h->m->st, lks[i], j, h->opt, h->target, vs);
      char name[600];
      for (int v = 0; v < nv; v++) {
        kernel_name(name, sizeof name, h->m->kernels[i], j, &vs[v]);
        names[f++] = host_string(h, name, ".cuda.name");
      }
      if (cu_unit_funcs(lks[i], j, h->opt) == 2) {
        fin_name(name, sizeof name, h->m->kernels[i], j);
        names[f++] = host_string(h, name, ".cuda.name");
      }
    }
  LLVMValueRef arr = LLVMConstNull(h->ptr);
  if (nfuncs) {
    LLVMValueRef init = LLVMConstArray2(h->ptr, names, (uint64_t)nfuncs);
    arr = LLVMAddGlobal(h->mod, LLVMTypeOf(init), ".cuda.names");
    LLVMSetInitializer(arr, init);
    LLVMSetGlobalConstant(arr, 1);
    LLVMSetLinkage(arr, LLVMPrivateLinkage);
  }
  LLVMValueRef f4[4] = {host_string(h, ptx, ".cuda.ptx"), i32c(h, nfuncs), arr,
                        LLVMConstNull(h->ptr)};
  LLVMValueRef init = LLVMConstStructInContext(h->ctx, f4, 4, 0);
  LLVMValueRef g = LLVMAddGlobal(h->mod, LLVMTypeOf(init), ".cuda.module");
  LLVMSetInitializer(g, init);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

static bool cuda_accepts(const char *target) { return strncmp(target, "cuda", 4) == 0; }

static int cuda_emit(IrModule *m, LfKernel **lks, const CgOptions *o) {
  double t = 0;
  cg_phase_ms(o, "", &t);
  LLVMContextRef ctx = LLVMContextCreate();
  Cg d;
  init_cg(&d, m, o, ctx, "tdsl_device");
  emit_device(&d, lks);
  cg_phase_ms(o, "llvm-build", &t);
  int status = 0;
  char *ptx = device_ptx(d.mod, o, &status);
  LLVMDisposeBuilder(d.b);
  LLVMDisposeModule(d.mod);
  cg_phase_ms(o, "ptx", &t);
  if (ptx && (o->emit & CG_PTX)) status |= cg_write_file(o, ".ptx", ptx, strlen(ptx));
  if (ptx && !status && (o->emit & (CG_OBJ | CG_ASM))) {
    Cg h;
    init_cg(&h, m, o, ctx, m->file ? m->file : "tdsl");
    int nfuncs = 0;
    for (int i = 0; i < m->nkernels; i++) nfuncs += n_funcs(m->st, lks[i], o->opt_level, h.target);
    LLVMValueRef desc = host_module_desc(&h, ptx, lks, nfuncs);
    for (int i = 0, fn0 = 0; i < m->nkernels; i++) {
      h.k = m->kernels[i];
      h.lk = lks[i];
      cu_emit_host_kernel(&h, desc, nfuncs, fn0);
      cg_emit_info(&h, m->kernels[i]);
      fn0 += n_funcs(m->st, lks[i], o->opt_level, h.target);
    }
    CgOptions ho = *o; /* the host part: generic x86-64, objects and assembly */
    ho.target = "x86-64";
    ho.emit = o->emit & (CG_OBJ | CG_ASM);
    status |= cpu_optimize_and_write(h.mod, &ho);
    LLVMDisposeBuilder(h.b);
    LLVMDisposeModule(h.mod);
  }
  free(ptx);
  LLVMContextDispose(ctx);
  return status;
}

const CgBackend cg_cuda_backend = {
    .name = "cuda", .accepts = cuda_accepts, .sched = "cuda", .emit = cuda_emit};
