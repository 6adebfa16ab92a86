/* entry.c — the host entry of a kernel (spec §7.4) and K_info, for every
 * backend: reading DLTensor descriptors (x86-64 / AArch64 LP64 layout),
 * the runtime's checks (tdsl_check_*, for the backend's DLPack device
 * type c->dl_device), binding size and stride symbols, the IR's checks,
 * the shape query (every output's data NULL: shapes and strides written,
 * nothing computed), buffer bases, scalar parameters' values (SSA, from
 * the arguments), scratch allocation and release, and
 * the constant tdsl_kernel_info.  Every failure branches to the kernel's
 * one exit, before any output byte is written.
 * Needs: llvm_util.h, the runtime ABI of <tdsl/runtime.h> (declared by
 * hand: generated code only links to it).  Used by: cpu/kernel.c. */
#include <stdio.h>
#include <string.h>

#include "llvm_util.h"

/* ---- DLTensor fields (x86-64 / AArch64 LP64 layout) --------------------- */

static LLVMValueRef field(Cg *c, LLVMValueRef t, int off, LLVMTypeRef ty) {
  LLVMValueRef o = i64c(c, off);
  LLVMValueRef p = LLVMBuildGEP2(c->b, c->i8, t, &o, 1, "");
  return LLVMBuildLoad2(c->b, ty, p, "");
}

static LLVMValueRef dl_data(Cg *c, LLVMValueRef t) { return field(c, t, 0, c->ptr); }
static LLVMValueRef dl_shape(Cg *c, LLVMValueRef t) { return field(c, t, 24, c->ptr); }
static LLVMValueRef dl_strides(Cg *c, LLVMValueRef t) { return field(c, t, 32, c->ptr); }

static LLVMValueRef idx_load(Cg *c, LLVMValueRef arr, int i) {
  LLVMValueRef o = i64c(c, i);
  return LLVMBuildLoad2(c->b, c->i64, LLVMBuildGEP2(c->b, c->i64, arr, &o, 1, ""), "");
}

LLVMValueRef cg_dl_device_id(Cg *c, LLVMValueRef t) { return field(c, t, 12, c->i32); }

/* data + byte_offset. */
LLVMValueRef cg_dl_base(Cg *c, LLVMValueRef t) {
  LLVMValueRef off = field(c, t, 40, c->i64);
  return LLVMBuildGEP2(c->b, c->i8, dl_data(c, t), &off, 1, "");
}

/* Stride of dim d: strides[d], or row-major when strides == NULL (size-0
 * dims count as 1). */
LLVMValueRef cg_dl_stride(Cg *c, LLVMValueRef t, int rank, int d) {
  LLVMValueRef st = dl_strides(c, t);
  LLVMBasicBlockRef given = block(c, "strides"), dflt = block(c, "rowmajor"),
                    join = block(c, "stride");
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, st, ""), dflt, given);
  LLVMPositionBuilderAtEnd(c->b, given);
  LLVMValueRef a = idx_load(c, st, d);
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, dflt);
  LLVMValueRef sh = dl_shape(c, t), p = i64c(c, 1);
  for (int j = d + 1; j < rank; j++)
    p = LLVMBuildMul(c->b, p, cg_smin(c, idx_load(c, sh, j), i64c(c, 1), true), "");
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, join);
  LLVMValueRef phi = LLVMBuildPhi(c->b, c->i64, "");
  LLVMValueRef vals[2] = {a, p};
  LLVMBasicBlockRef bbs[2] = {given, dflt};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* DLDataType passed by value: {code, bits, lanes} packed in an i32. */
static int dl_dtype_bits(DType t) {
  int code = t == DT_BOOL ? 6 : t == DT_BF16 ? 4 : dtype_is_float(t) ? 2
           : t == DT_U8 ? 1 : 0;
  return code | (8 * dtype_size(t)) << 8 | 1 << 16;
}

/* ---- the kernel function ------------------------------------------------- */

void cg_begin_kernel(Cg *c, const IrKernel *k, const LfKernel *lk, bool gemm_pools) {
  int na = k->nparams + k->nresults;
  LLVMTypeRef *ps = arena_alloc(c->m->arena, sizeof *ps * (size_t)(na + 1));
  for (int i = 0; i < k->nparams; i++)
    ps[i] = k->params[i].is_tensor ? c->ptr : cg_scalar_arg_type(c, k->params[i].dtype);
  for (int i = 0; i < k->nresults; i++) ps[k->nparams + i] = c->ptr;
  c->k = k;
  c->lk = lk;
  c->env = NULL;
  c->fn = LLVMAddFunction(c->mod, k->name, LLVMFunctionType(c->i32, ps, (unsigned)na, 0));
  c->args = arena_alloc(c->m->arena, sizeof *c->args * (size_t)(na + 1));
  for (int i = 0; i < na; i++) c->args[i] = LLVMGetParam(c->fn, (unsigned)i);
  for (int i = 0; i < k->nparams; i++) /* readable IR: %x, %alpha */
    LLVMSetValueName2(c->args[i], k->params[i].name, strlen(k->params[i].name));
  c->entry = block(c, "entry");
  LLVMBasicBlockRef start = block(c, "start");
  c->fail = block(c, "fail");
  LLVMPositionBuilderAtEnd(c->b, c->fail);
  c->rcphi = LLVMBuildPhi(c->b, c->i32, "rc");
  LLVMPositionBuilderAtEnd(c->b, c->entry);
  c->base = arena_alloc(c->m->arena, sizeof *c->base * (size_t)(lk->nbufs + 1));
  c->slot = arena_alloc(c->m->arena, sizeof *c->slot * (size_t)(lk->nbufs + 1));
  for (int i = 0; i < lk->nbufs; i++)
    if (lk->bufs[i].kind == LFB_SCRATCH) {
      c->slot[i] = LLVMBuildAlloca(c->b, c->ptr, "scratch");
      LLVMBuildStore(c->b, LLVMConstNull(c->ptr), c->slot[i]);
    }
  c->gpool = NULL;
  if (gemm_pools) {
    c->gpool = arena_alloc(c->m->arena, sizeof *c->gpool * (size_t)(lk->nnests + 1));
    for (int i = 0; i < lk->nnests; i++) {
      c->gpool[i] = NULL;
      if (lk->nests[i].reduce == OP_MATMUL || lk->nests[i].reduce == OP_CONV2D) {
        c->gpool[i] = LLVMBuildAlloca(c->b, c->ptr, "gemm_pool");
        LLVMBuildStore(c->b, LLVMConstNull(c->ptr), c->gpool[i]);
      }
    }
  }
  int ns = k->nsyms ? k->nsyms : 1;
  c->envp = LLVMBuildArrayAlloca(c->b, c->i64, i32c(c, ns), "env");
  c->boundp = LLVMBuildArrayAlloca(c->b, c->i32, i32c(c, ns), "bound");
  for (int s = 0; s < ns; s++) {
    LLVMValueRef o = i64c(c, s);
    LLVMBuildStore(c->b, i64c(c, 0), LLVMBuildGEP2(c->b, c->i64, c->envp, &o, 1, ""));
    LLVMBuildStore(c->b, i32c(c, 0), LLVMBuildGEP2(c->b, c->i32, c->boundp, &o, 1, ""));
  }
  LLVMBuildBr(c->b, start);
  LLVMPositionBuilderAtEnd(c->b, start);
  c->kname = str(c, k->name);
}

/* ---- entry checks --------------------------------------------------------- */

typedef struct Arg {
  const char *cname;
  LLVMValueRef t, name;
  DType dtype;
  int rank, layout;
  const Sym **shape;
  const Sym **qstride; /* a strided result's shape-query strides, or NULL */
} Arg;

static Arg param_arg(Cg *c, int i) {
  const IrParam *p = &c->k->params[i];
  return (Arg){p->name, c->args[i], str(c, p->name), p->dtype, p->rank, (int)p->layout,
               p->shape, NULL};
}

static Arg result_arg(Cg *c, int i) {
  const IrResult *r = &c->k->results[i];
  char name[32];
  snprintf(name, sizeof name, "out%d", i);
  return (Arg){"result", c->args[c->k->nparams + i], str(c, name), r->dtype, r->rank,
               (int)r->layout, r->shape, r->qstride};
}

/* The checks run as tables of tdsl_check_ops (the runtime's, one op per
 * check, in the order of the calls they stand for): a call and a branch
 * for each run of checks instead of each check, the kernel's entry a
 * fraction of the code.  t: the tensors, inputs then outputs; names:
 * theirs (a constant array); want: output dims known only at run time
 * (DIM_AT). */
enum { CK_TENSOR, CK_OUTPUT, CK_DIM, CK_DIM_AT, CK_BIND, CK_LAYOUT, CK_INTERNAL_OVERLAP,
       CK_DATA, CK_ALIGN, CK_EXTENT }; /* runtime.h TDSL_CK_* */

typedef struct Ops {
  LLVMTypeRef ty; /* { i32 op, i32 arg, i32 a, i32 pad, i64 x, ptr s } */
  LLVMValueRef *v, t, names, want;
  int n, cap, nwant;
} Ops;

static void op(Cg *c, Ops *o, int kind, int arg, int a, long long x, LLVMValueRef s) {
  if (o->n == o->cap) {
    int cap = o->cap ? 2 * o->cap : 16;
    LLVMValueRef *v = arena_alloc(c->m->arena, sizeof *v * (size_t)cap);
    if (o->n) memcpy(v, o->v, sizeof *v * (size_t)o->n);
    o->v = v, o->cap = cap;
  }
  LLVMValueRef f[6] = {i32c(c, kind), i32c(c, arg), i32c(c, a), i32c(c, 0), i64c(c, x),
                       s ? s : LLVMConstNull(c->ptr)};
  o->v[o->n++] = LLVMConstNamedStruct(o->ty, f, 6);
}

/* Runs the ops gathered so far: one call, one branch to the exit. */
static void flush(Cg *c, Ops *o) {
  if (!o->n) return;
  LLVMTypeRef at = LLVMArrayType2(o->ty, (uint64_t)o->n);
  LLVMValueRef g = LLVMAddGlobal(c->mod, at, ".checks");
  LLVMSetInitializer(g, LLVMConstArray2(o->ty, o->v, (uint64_t)o->n));
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
  LLVMValueRef v[8] = {c->kname, g, i32c(c, o->n), o->t, o->names,
                       o->want ? o->want : LLVMConstNull(c->ptr), c->envp, c->boundp};
  cg_check_rc(c, cg_rt_check(c, "tdsl_check_ops", v, 8));
  o->n = 0;
}

/* fn: tdsl_check_tensor, or tdsl_check_output, which leaves the dims
 * alone (a shape query's output shape arrays are uninitialized). */
static void check_tensor(Cg *c, Ops *o, int kind, int arg, const Arg *a) {
  op(c, o, kind, arg, dl_dtype_bits(a->dtype), (long long)a->rank << 32 | c->dl_device, NULL);
}

/* Binds size symbols from parameter dims, checks the static ones. */
static void bind_param_dims(Cg *c, Ops *o, int arg, const Arg *a) {
  for (int d = 0; d < a->rank; d++) {
    int id;
    if (sym_is_var(a->shape[d], &id) && c->k->syms[id].kind == SYMK_SIZE) {
      op(c, o, CK_BIND, arg, d, id, str(c, c->k->syms[id].name));
    } else {
      int64_t want;
      if (!sym_is_const(a->shape[d], &want))
        ICE("parameter '%s' dim %d is neither a constant nor a symbol", a->cname, d);
      op(c, o, CK_DIM, arg, d, want, str(c, sym_str(c->m->arena, a->shape[d])));
    }
  }
}

/* Stride symbols, then every symbol loaded into SSA values. */
static void bind_strides(Cg *c) {
  for (int s = 0; s < c->k->nsyms; s++) {
    const IrSymVar *sv = &c->k->syms[s];
    if (sv->kind != SYMK_STRIDE) continue;
    const IrParam *p = &c->k->params[sv->param];
    LLVMValueRef o = i64c(c, s);
    LLVMBuildStore(c->b, cg_dl_stride(c, c->args[sv->param], p->rank, sv->dim),
                   LLVMBuildGEP2(c->b, c->i64, c->envp, &o, 1, ""));
  }
  c->env = arena_alloc(c->m->arena, sizeof *c->env * (size_t)(c->k->nsyms + 1));
  for (int s = 0; s < c->k->nsyms; s++) c->env[s] = idx_load(c, c->envp, s);
}

static void run_ir_checks(Cg *c) {
  for (int i = 0; i < c->k->nchecks; i++) {
    const IrCheck *ck = &c->k->checks[i];
    LLVMValueRef l = cg_sym_val(c, ck->lhs), r = cg_sym_val(c, ck->rhs);
    LLVMIntPredicate pr = ck->op == CHK_EQ ? LLVMIntEQ : ck->op == CHK_LE ? LLVMIntSLE : LLVMIntSLT;
    LLVMValueRef ok = LLVMBuildICmp(c->b, pr, l, r, "");
    LLVMBasicBlockRef bad = block(c, "check_failed"), next = block(c, "checked");
    LLVMBuildCondBr(c->b, ok, next, bad);
    LLVMPositionBuilderAtEnd(c->b, bad);
    LLVMTypeRef ps[2] = {c->i32, c->ptr};
    LLVMValueRef f = cg_fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1);
    char *fmt;
    int ids[IR_CHECK_MAX_SYMS];
    int n = ir_check_format(c->m->arena, c->k, ck, &fmt, ids);
    /* the message gives the symbols' values: "size N (= 3)" */
    LLVMValueRef a[3 + IR_CHECK_MAX_SYMS] = {
        i32c(c, E_CHECK), str(c, arena_printf(c->m->arena, "kernel '%%s': %s", fmt)),
        c->kname};
    for (int j = 0; j < n; j++) a[3 + j] = c->env[ids[j]];
    LLVMValueRef rc = call(c, f, a, (unsigned)(3 + n));
    LLVMBuildBr(c->b, c->fail);
    LLVMAddIncoming(c->rcphi, &rc, &bad, 1);
    LLVMPositionBuilderAtEnd(c->b, next);
  }
}

/* Arrays sized by the kernel: any number of tensor parameters. */
static LLVMValueRef *value_list(Cg *c, int n) {
  return arena_alloc(c->m->arena, sizeof(LLVMValueRef) * (size_t)(n + 1));
}

/* Writes output shapes (and strides when given): the shape query. */
static void write_shapes(Cg *c, const Arg *a) {
  LLVMValueRef sh = dl_shape(c, a->t), dims[TDSL_MAX_RANK];
  for (int d = 0; d < a->rank; d++) {
    dims[d] = cg_sym_val(c, a->shape[d]);
    LLVMValueRef o = i64c(c, d);
    LLVMBuildStore(c->b, dims[d], LLVMBuildGEP2(c->b, c->i64, sh, &o, 1, ""));
  }
  LLVMValueRef st = dl_strides(c, a->t);
  LLVMBasicBlockRef wr = block(c, "write_strides"), done = block(c, "strides_done");
  LLVMBuildCondBr(c->b, LLVMBuildIsNull(c->b, st, ""), done, wr);
  LLVMPositionBuilderAtEnd(c->b, wr);
  if (a->qstride) { /* strided: PyTorch's strides (IrResult.qstride) */
    for (int d = 0; d < a->rank; d++) {
      LLVMValueRef o = i64c(c, d);
      LLVMBuildStore(c->b, cg_sym_val(c, a->qstride[d]),
                     LLVMBuildGEP2(c->b, c->i64, st, &o, 1, ""));
    }
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
    return;
  }
  int order[TDSL_MAX_RANK] = {0, 1, 2, 3};
  bool cl = a->layout == LAYOUT_CHANNELS_LAST && a->rank == 4;
  if (cl) order[1] = 2, order[2] = 3, order[3] = 1; /* N H W C */
  else for (int d = 0; d < a->rank; d++) order[d] = d;
  LLVMValueRef acc = i64c(c, 1);
  for (int j = a->rank - 1; j >= 0; j--) {
    LLVMValueRef o = i64c(c, order[j]);
    LLVMBuildStore(c->b, acc, LLVMBuildGEP2(c->b, c->i64, st, &o, 1, ""));
    acc = LLVMBuildMul(c->b, acc, cg_smin(c, dims[order[j]], i64c(c, 1), true), "");
  }
  LLVMBuildBr(c->b, done);
  LLVMPositionBuilderAtEnd(c->b, done);
}

/* Emits every check; leaves the builder where computing starts, after a
 * shape query has returned. */
void cg_emit_entry_checks(Cg *c) {
  int nin = 0, nout = c->k->nresults;
  Arg *in = arena_alloc(c->m->arena, sizeof *in * (size_t)(c->k->nparams + 1));
  Arg *out = arena_alloc(c->m->arena, sizeof *out * (size_t)(nout + 1));
  for (int i = 0; i < c->k->nparams; i++)
    if (c->k->params[i].is_tensor) in[nin++] = param_arg(c, i);
  for (int i = 0; i < nout; i++) out[i] = result_arg(c, i);
  int na = nin + nout;
  LLVMTypeRef ft[6] = {c->i32, c->i32, c->i32, c->i32, c->i64, c->ptr};
  Ops o = {.ty = LLVMStructTypeInContext(c->ctx, ft, 6, 0)};
  o.t = cg_entry_alloca(c, c->ptr, i32c(c, na));
  LLVMValueRef *nm = value_list(c, na);
  for (int i = 0; i < na; i++) {
    const Arg *a = i < nin ? &in[i] : &out[i - nin];
    LLVMValueRef ix = i64c(c, i);
    LLVMBuildStore(c->b, a->t, LLVMBuildGEP2(c->b, c->ptr, o.t, &ix, 1, ""));
    nm[i] = a->name;
  }
  LLVMValueRef names = LLVMAddGlobal(c->mod, LLVMArrayType2(c->ptr, (uint64_t)na), ".argnames");
  LLVMSetInitializer(names, LLVMConstArray2(c->ptr, nm, (uint64_t)na));
  LLVMSetGlobalConstant(names, 1);
  LLVMSetLinkage(names, LLVMPrivateLinkage);
  LLVMSetUnnamedAddress(names, LLVMGlobalUnnamedAddr);
  o.names = names;
  for (int i = 0; i < nin; i++) check_tensor(c, &o, CK_TENSOR, i, &in[i]);
  for (int i = 0; i < nout; i++) check_tensor(c, &o, CK_OUTPUT, nin + i, &out[i]);
  for (int i = 0; i < nin; i++) bind_param_dims(c, &o, i, &in[i]);
  flush(c, &o);
  bind_strides(c);
  run_ir_checks(c);
  for (int i = 0; i < nin; i++) {
    op(c, &o, CK_LAYOUT, i, in[i].layout, 0, NULL);
    op(c, &o, CK_DATA, i, 0, 0, NULL);
    op(c, &o, CK_ALIGN, i, 0, 0, NULL);
    op(c, &o, CK_EXTENT, i, 0, 0, NULL);
  }
  flush(c, &o);
  /* shape query: every output's data is NULL */
  LLVMValueRef all = LLVMConstInt(c->i1, 1, 0);
  for (int i = 0; i < nout; i++)
    all = LLVMBuildAnd(c->b, all, LLVMBuildIsNull(c->b, dl_data(c, out[i].t), ""), "");
  LLVMBasicBlockRef q = block(c, "shape_query"), run = block(c, "run");
  LLVMBuildCondBr(c->b, all, q, run);
  LLVMPositionBuilderAtEnd(c->b, q);
  for (int i = 0; i < nout; i++) write_shapes(c, &out[i]);
  LLVMBuildRet(c->b, i32c(c, 0));
  LLVMPositionBuilderAtEnd(c->b, run);
  int ndims = 0;
  for (int i = 0; i < nout; i++) ndims += out[i].rank;
  if (ndims) o.want = cg_entry_alloca(c, c->i64, i32c(c, ndims));
  for (int i = 0; i < nout; i++) {
    int arg = nin + i;
    for (int d = 0; d < out[i].rank; d++) {
      LLVMValueRef w = cg_sym_val(c, out[i].shape[d]);
      LLVMValueRef text = str(c, sym_str(c->m->arena, out[i].shape[d]));
      if (LLVMIsAConstantInt(w)) {
        op(c, &o, CK_DIM, arg, d, LLVMConstIntGetSExtValue(w), text);
      } else {
        LLVMValueRef ix = i64c(c, o.nwant);
        LLVMBuildStore(c->b, w, LLVMBuildGEP2(c->b, c->i64, o.want, &ix, 1, ""));
        op(c, &o, CK_DIM_AT, arg, d, o.nwant++, text);
      }
    }
    op(c, &o, CK_LAYOUT, arg, out[i].layout, 0, NULL);
    if (out[i].layout == LAYOUT_STRIDED) op(c, &o, CK_INTERNAL_OVERLAP, arg, 0, 0, NULL);
    op(c, &o, CK_DATA, arg, 0, 0, NULL);
    op(c, &o, CK_ALIGN, arg, 0, 0, NULL);
    op(c, &o, CK_EXTENT, arg, 0, 0, NULL);
  }
  flush(c, &o);
  /* no output overlaps an input or another output */
  LLVMValueRef k = i64c(c, nin);
  LLVMValueRef v[7] = {c->kname, LLVMBuildGEP2(c->b, c->ptr, o.t, &k, 1, ""),
                       LLVMConstGEP2(c->ptr, names, &k, 1), i32c(c, nout), o.t, names,
                       i32c(c, nin)};
  cg_check_rc(c, cg_rt_check(c, "tdsl_check_overlap_named", v, 7));
}

/* ---- buffers ---------------------------------------------------------- */

LLVMValueRef cg_const_tensor(Cg *c, const LfBuf *b, unsigned addrspace) {
  int64_t n;
  if (!sym_is_const(b->size, &n)) ICE("tensor constant of symbolic size");
  size_t bytes = (size_t)n * (size_t)dtype_size(b->dtype);
  LLVMValueRef init = LLVMConstStringInContext(c->ctx, b->data, (unsigned)bytes, 1);
  LLVMValueRef g = LLVMAddGlobalInAddressSpace(c->mod, LLVMTypeOf(init), ".tensor", addrspace);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  LLVMSetAlignment(g, 16);
  return addrspace ? LLVMConstAddrSpaceCast(g, c->ptr) : g;
}

void cg_setup_scratch(Cg *c, int i) {
  const LfBuf *b = &c->lk->bufs[i];
  int shared = lf_slot_shared(c->lk, i); /* plan-memory: one block per slot */
  if (shared) {
    c->base[i] = c->base[shared - 1];
    return;
  }
  const Sym *nbytes = lf_scratch_bytes(c->m->st, b);
  LLVMValueRef mag = cg_sym_mag(c, nbytes);
  LLVMBasicBlockRef big = block(c, "scratch_overflow"), fits = block(c, "scratch_fits");
  LLVMBuildCondBr(c->b, LLVMBuildFCmp(c->b, LLVMRealOLT, mag, LLVMConstReal(c->f64, 0x1p62), ""),
                  fits, big);
  LLVMPositionBuilderAtEnd(c->b, big);
  LLVMTypeRef ps[2] = {c->i32, c->ptr};
  LLVMValueRef ea[3] = {i32c(c, E_OVERFLOW), str(c, "kernel '%s': an intermediate "
                        "tensor is too large (its size overflows int64)"), c->kname};
  LLVMValueRef erc = call(c, cg_fdecl(c, "tdsl_set_error", c->i32, ps, 2, 1), ea, 3);
  LLVMBuildBr(c->b, c->fail);
  LLVMAddIncoming(c->rcphi, &erc, &big, 1);
  LLVMPositionBuilderAtEnd(c->b, fits);
  LLVMValueRef bytes = cg_sym_val(c, nbytes), p;
  if (c->scratch_alloc) {
    p = c->scratch_alloc(c, bytes);
  } else {
    LLVMTypeRef ps2[2] = {c->i64, c->i64};
    LLVMValueRef a[2] = {bytes, i64c(c, 64)};
    p = call(c, cg_fdecl(c, "tdsl_alloc", c->ptr, ps2, 2, 0), a, 2);
  }
  LLVMBuildStore(c->b, p, c->slot[i]);
  LLVMValueRef rc = LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, p, ""),
                                    i32c(c, E_NOMEM), i32c(c, 0), "");
  cg_check_rc(c, rc);
  c->base[i] = p;
}

LLVMTypeRef cg_scalar_arg_type(Cg *c, DType t) {
  if (t == DT_F16 || t == DT_BF16) return c->i16;
  return cg_storage_type(c, t);
}

LLVMValueRef cg_scalar_value(Cg *c, LLVMValueRef a, DType t) {
  switch (t) {
  case DT_BOOL: return cg_to_bool(c, a);
  case DT_BF16: return cg_bf16_to_f32v(c, a);
  case DT_F16: return LLVMBuildFPExt(c->b, LLVMBuildBitCast(c->b, a, c->f16, ""), c->f32, "");
  default: return a;
  }
}

void cg_setup_buffers(Cg *c) {
  const LfKernel *lk = c->lk;
  c->scalar = arena_alloc(c->m->arena, sizeof *c->scalar * (size_t)(lk->nbufs + 1));
  for (int i = 0; i < lk->nbufs; i++) {
    const LfBuf *b = &lk->bufs[i];
    switch (b->kind) {
    case LFB_PARAM: c->base[i] = cg_dl_base(c, c->args[b->index]); break;
    case LFB_OUTPUT: c->base[i] = cg_dl_base(c, c->args[c->k->nparams + b->index]); break;
    case LFB_CONST: c->base[i] = cg_const_tensor(c, b, 0); break;
    case LFB_SCALAR:
      c->base[i] = NULL;
      c->scalar[i] = cg_scalar_value(c, c->args[b->index], b->dtype);
      break;
    case LFB_SCRATCH: cg_setup_scratch(c, i); break;
    }
  }
}

void cg_free_scratch(Cg *c) {
  for (int i = 0; i < c->lk->nbufs; i++)
    if (c->lk->bufs[i].kind == LFB_SCRATCH && !lf_slot_shared(c->lk, i)) {
      LLVMValueRef p = LLVMBuildLoad2(c->b, c->ptr, c->slot[i], "");
      if (c->scratch_free) c->scratch_free(c, p);
      else call(c, cg_fdecl(c, "tdsl_free", c->vd, &c->ptr, 1, 0), &p, 1);
    }
  for (int i = 0; c->gpool && i < c->lk->nnests; i++)
    if (c->gpool[i]) {
      LLVMValueRef p = LLVMBuildLoad2(c->b, c->ptr, c->gpool[i], "");
      call(c, cg_fdecl(c, "tdsl_free", c->vd, &c->ptr, 1, 0), &p, 1);
    }
}

/* ---- K_info ------------------------------------------------------------- */

static LLVMValueRef cstr(Cg *c, const char *s) {
  LLVMValueRef init = LLVMConstStringInContext(c->ctx, s, (unsigned)strlen(s), 0);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".info.str");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

static LLVMValueRef const_array_global(Cg *c, LLVMTypeRef t, LLVMValueRef *v, int n,
                                       const char *name) {
  if (n == 0) return LLVMConstNull(c->ptr);
  LLVMValueRef init = LLVMConstArray2(t, v, (uint64_t)n);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), name);
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  return g;
}

/* One tdsl_param_info {name, is_tensor, dtype, ndim, dims, layout}. */
static LLVMValueRef param_info(Cg *c, LLVMTypeRef pt, const char *name, bool tensor,
                               DType dt, int rank, const Sym **shape, int layout) {
  LLVMValueRef dims[TDSL_MAX_RANK];
  for (int d = 0; d < rank; d++) dims[d] = cstr(c, sym_str(c->m->arena, shape[d]));
  unsigned long long pk = (unsigned long long)dl_dtype_bits(dt);
  LLVMValueRef dv[3] = {ci(c->i8, (long long)(pk & 255)), ci(c->i8, (long long)(pk >> 8 & 255)),
                        ci(c->i16, 1)};
  LLVMValueRef f[6] = {cstr(c, name), i32c(c, tensor), LLVMConstStructInContext(c->ctx, dv, 3, 0),
                       i32c(c, tensor ? rank : 0),
                       const_array_global(c, c->ptr, dims, tensor ? rank : 0, ".info.dims"),
                       i32c(c, tensor ? layout : 0)};
  return LLVMConstNamedStruct(pt, f, 6);
}

/* K_info's scratch_bytes and scratch_expr: the scratch blocks of the
 * kernel's loop form (one per plan-memory slot), as a number when
 * constant (else -1) and as text. */
static void info_scratch(Cg *c, LLVMValueRef *f) {
  const Sym *b = lf_scratch_total(c->m->st, c->lk);
  int64_t n;
  f[0] = i64c(c, sym_is_const(b, &n) ? n : -1);
  f[1] = cstr(c, sym_str(c->m->arena, b));
}

void cg_emit_info(Cg *c, const IrKernel *k) {
  LLVMTypeRef dlt[3] = {c->i8, c->i8, c->i16};
  LLVMTypeRef pf[6] = {c->ptr, c->i32, LLVMStructTypeInContext(c->ctx, dlt, 3, 0), c->i32,
                       c->ptr, c->i32};
  LLVMTypeRef pt = LLVMGetTypeByName2(c->ctx, "tdsl_param_info");
  if (!pt) {
    pt = LLVMStructCreateNamed(c->ctx, "tdsl_param_info");
    LLVMStructSetBody(pt, pf, 6, 0);
  }
  LLVMValueRef *p = arena_alloc(c->m->arena, sizeof *p * (size_t)(k->nparams + k->nresults + 1));
  for (int i = 0; i < k->nparams; i++) {
    const IrParam *q = &k->params[i];
    p[i] = param_info(c, pt, q->name, q->is_tensor, q->dtype, q->rank, q->shape, (int)q->layout);
  }
  for (int i = 0; i < k->nresults; i++) {
    char name[32];
    snprintf(name, sizeof name, "out%d", i);
    const IrResult *r = &k->results[i];
    p[k->nparams + i] = param_info(c, pt, name, true, r->dtype, r->rank, r->shape, (int)r->layout);
  }
  LLVMValueRef f[8] = {cstr(c, k->name), i32c(c, k->nparams),
                       const_array_global(c, pt, p, k->nparams, ".info.params"),
                       i32c(c, k->nresults),
                       const_array_global(c, pt, p + k->nparams, k->nresults, ".info.results"),
                       i32c(c, c->dl_device), NULL, NULL};
  info_scratch(c, f + 6);
  LLVMValueRef init = LLVMConstStructInContext(c->ctx, f, 8, 0);
  LLVMValueRef g = LLVMAddGlobal(c->mod, LLVMTypeOf(init), ".info");
  LLVMSetInitializer(g, init);
  LLVMSetGlobalConstant(g, 1);
  LLVMSetLinkage(g, LLVMPrivateLinkage);
  char name[512];
  snprintf(name, sizeof name, "%s_info", k->name);
  LLVMValueRef fn = LLVMAddFunction(c->mod, name, LLVMFunctionType(c->ptr, NULL, 0, 0));
  LLVMPositionBuilderAtEnd(c->b, LLVMAppendBasicBlockInContext(c->ctx, fn, "entry"));
  LLVMBuildRet(c->b, g);
}
