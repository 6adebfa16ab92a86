/* gemm_nest.c — the glue between the loop form and the GEMM emitter
 * (gemm.h) for nests whose `reduce` is OP_MATMUL or OP_CONV2D: run-time
 * operand descriptions, packing memory allocated at entry, the epilogue
 * hook (fused `post` over each finished block of C) and the prologues
 * (operands evaluated from elementwise expressions while packing).
 * Conv nests that lf_conv_algo gives another algorithm go to conv.h's
 * kernels with the same operands, pool and epilogue hook.
 * Needs: cpu.h, gemm.h, conv.h.  Used by: kernel.c. */
#include <string.h>

#include "conv.h"
#include "cpu.h"

/* ---- matmul and conv2d (gemm.c) ------------------------------------------ */

/* The memory the GEMM reads an operand of buffer b from.  Scalar
 * parameters have none (they are SSA values, Cg.scalar): an operand that
 * is a view of one (x @ alpha.expand(...), a conv bias alpha.expand(C);
 * every stride 0) reads a one-element stack copy made here, the one place
 * a scalar goes through memory, because gemm.c reads operands through
 * pointers. */
static LLVMValueRef gemm_base(Cg *c, int b) {
  if (b < 0) return LLVMConstNull(c->ptr);
  const LfBuf *buf = &c->lk->bufs[b];
  if (buf->kind != LFB_SCALAR) return c->base[b];
  LLVMValueRef p = cg_entry_alloca(c, cg_storage_type(c, buf->dtype), NULL);
  LLVMSetValueName2(p, "gemm_scalar", 11);
  cg_store_el(c, c->scalar[b], p, buf->dtype);
  return p;
}

/* Run-time description of an access over its own dims (shape from IR). */
static GemmTensor gemm_tensor(Cg *c, const LfAccess *a, int rank, const Sym **shape, DType dt) {
  GemmTensor t = {.base = gemm_base(c, a->buf),
                  .offset = cg_sym_val(c, a->offset), .rank = rank, .dtype = dt};
  for (int d = 0; d < rank; d++) {
    t.shape[d] = cg_sym_val(c, shape[d]);
    t.stride[d] = a->rt_strides
                      ? cg_dl_stride(c, c->args[c->k->nparams + c->lk->bufs[a->buf].index], rank, d)
                      : cg_sym_val(c, a->stride[d]);
  }
  return t;
}

/* The channels-last orientation of a conv nest's GEMM (gemm.h). */
static bool gemm_cl(const LfNest *n) {
  return n->reduce == OP_CONV2D && !n->cstore.rt_strides &&
         sym_is(n->cstore.stride[n->rank - 3], 1);
}

static void gemm_epilogue(Cg *c, const LfNest *n, GemmEmit *e);
static const GemmPrologue *gemm_prologue(Cg *c, const LfNest *n, int j);

/* The load under a prologue that only widens operand j of gemm nest n
 * (an integer to a wider integer, f16/bf16 to f32: every value kept, as
 * `a.to(i32) @ b.to(i32)` on i8 weights), or NULL.  The GEMM then packs
 * the narrow operand itself, converting as it packs (the same values),
 * and can multiply 8/16-bit values as such (gemm_lowp.c). */
static const LfExpr *gemm_widened(Cg *c, const LfNest *n, int j) {
  return lf_pro_widened(c->k, n, j);
}

/* The run-time operands (t), result and conv attributes of gemm nest n
 * at the builder's position. */
static void gemm_operands(Cg *c, const LfNest *n, GemmTensor *t, GemmTensor *out,
                          LLVMValueRef *attr) {
  const IrValue *v = ir_val(c->k, n->gemm);
  *out = gemm_tensor(c, &n->cstore, n->rank, n->shape, n->cdtype);
  for (int j = 0; j < n->nopnd; j++) {
    const IrValue *a = ir_val(c->k, v->args[j]);
    const LfExpr *w = j < 2 ? gemm_widened(c, n, j) : NULL;
    if (w) t[j] = gemm_tensor(c, &w->acc, a->rank, a->shape, w->dtype);
    else t[j] = gemm_tensor(c, &n->opnd[j], a->rank, a->shape, a->dtype); /* a buffer's dtype is its value's */
  }
  if (n->reduce == OP_CONV2D)
    for (int i = 0; i < 7; i++) attr[i] = cg_sym_val(c, v->attrs[i]);
}

/* At the kernel's entry, with the scratch buffers: each GEMM's packing
 * memory (gemm.h), so that once the nests run nothing can fail and a
 * failing kernel has written no output (spec §7.2). */
/* The GEMM's instruction features (gemm.h GEMM_ISA_*) of the variant
 * being emitted: none off x86-64 (an x86-64 level of 0). */
static unsigned gemm_isa(const Cg *c) {
  return c->isa && c->isa->level > 0 ? cg_gemm_isa_features(c->isa->features) : 0;
}

void cpu_setup_gemm_pools(Cg *c) {
  for (int i = 0; i < c->lk->nnests; i++) {
    const LfNest *n = &c->lk->nests[i];
    if (!c->gpool[i]) continue;
    GemmTensor t[3], out;
    LLVMValueRef attr[7], nt, bytes;
    gemm_operands(c, n, t, &out, attr);
    GemmEmit e = {.ctx = c->ctx, .mod = c->mod, .b = c->b, .fn = c->fn, .vec_bits = c->vec_bits,
                .isa = gemm_isa(c), .params = c->target};
    if (n->reduce == OP_MATMUL) bytes = cg_matmul_pool_bytes(&e, &t[0], &t[1], &out, &nt);
    else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_DEPTHWISE)
      bytes = cg_conv_dw_pool_bytes(&e, &t[1], &out, gemm_cl(n), &nt);
    else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_DIRECT)
      bytes = cg_conv_direct_pool_bytes(&e, &t[1], &out, gemm_cl(n), &nt);
    else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_1X1)
      bytes = cg_conv_1x1_pool_bytes(&e, &t[0], &t[1], &out, &nt);
    else bytes = cg_conv2d_pool_bytes(&e, &t[0], &t[1], &out, attr, gemm_cl(n), &nt);
    LLVMTypeRef ps[2] = {c->i64, c->i64};
    LLVMValueRef a[2] = {bytes, i64c(c, 64)};
    LLVMValueRef p = call(c, cg_fdecl(c, "tdsl_alloc", c->ptr, ps, 2, 0), a, 2);
    LLVMBuildStore(c->b, p, c->gpool[i]);
    cg_check_rc(c, LLVMBuildSelect(c->b, LLVMBuildIsNull(c->b, p, ""), i32c(c, E_NOMEM), i32c(c, 0), ""));
    LLVMBuildStore(c->b, nt, p);
  }
}

/* A conv's channel multiplier O / groups as a value from their symbols'
 * quotient (a constant when O = groups * constant, even with both
 * symbolic), or NULL when it does not divide symbolically. */
static LLVMValueRef conv_mult(Cg *c, const LfNest *n) {
  const IrValue *v = ir_val(c->k, n->gemm), *w = ir_val(c->k, v->args[1]);
  const Sym *q;
  return sym_div_exact(c->m->st, w->shape[0], v->attrs[6], &q) ? cg_sym_val(c, q) : NULL;
}

void cpu_emit_gemm_nest(Cg *c, const LfNest *n) {
  const IrValue *v = ir_val(c->k, n->gemm);
  GemmTensor t[3], out;
  LLVMValueRef attr[7], rc;
  gemm_operands(c, n, t, &out, attr);
  GemmEmit e = {.ctx = c->ctx, .mod = c->mod, .b = c->b, .fn = c->fn, .vec_bits = c->vec_bits,
                .isa = gemm_isa(c), .params = c->target};
  e.pool = LLVMBuildLoad2(c->b, c->ptr, c->gpool[n - c->lk->nests], "");
  if (n->post) gemm_epilogue(c, n, &e);
  for (int j = 0; j < 2; j++)
    e.pro[j] = n->pro[j] && !gemm_widened(c, n, j) ? gemm_prologue(c, n, j) : NULL;
  const GemmTensor *bias = (v->flags & IRF_BIAS) ? &t[2] : NULL;
  if (n->reduce == OP_MATMUL)
    rc = cg_emit_matmul(&e, &t[0], &t[1], &out);
  else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_DEPTHWISE)
    rc = cg_emit_conv_depthwise(&e, &t[0], &t[1], bias, &out, attr, conv_mult(c, n), gemm_cl(n));
  else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_DIRECT)
    rc = cg_emit_conv_direct(&e, &t[0], &t[1], bias, &out, attr, gemm_cl(n));
  else if (lf_conv_algo(c->k, n, c->target) == LF_CONV_1X1)
    rc = cg_emit_conv_1x1(&e, &t[0], &t[1], bias, &out);
  else
    rc = cg_emit_conv2d(&e, &t[0], &t[1], bias, &out, attr, gemm_cl(n));
  cg_check_rc(c, rc);
}

/* ---- GEMM epilogues (loops.h "Epilogues") ----------------------------------
 * The hook gemm.c calls on each finished block of C (gemm.h) is two
 * private functions, as for parallel nests:
 *   K.epiI(i64 bt, i64 i0, i64 i1, i64 j0, i64 j1, ptr noalias buf...,
 *          i64 sym..., i64 rtstride...)
 *     maps the block to output indices and runs `post` over it, LFE_ACC
 *     loaded through cstore, the value stored through store; the inner
 *     loop runs over C's columns, the output's unit-stride dim (N of a
 *     matmul, channels of a channels-last conv, the pixels of an NCHW
 *     conv: one loop over OH*OW when every access allows collapsing them,
 *     as plan_vloops would), so it vectorizes.  Always-inlined into
 *   K.epiI.body(ptr ctx, i64 bt, i64 i0, i64 i1, i64 j0, i64 j1), which
 *     unpacks the context the kernel filled (buffers, symbols, output
 *     strides). */

/* Output indices of C row i (row = true) or column j: sets x->iv. */
static void epi_index(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef bt, LLVMValueRef q,
                      bool row, bool collapse) {
  int R = n->rank;
  if (n->reduce == OP_MATMUL) {
    x->iv[row ? R - 2 : R - 1] = q;
    for (int d = R - 3; row && d >= 0; d--) { /* batch dims, row-major in bt */
      x->iv[d] = d ? LLVMBuildURem(c->b, bt, x->ub[d], "") : bt;
      if (d) bt = LLVMBuildUDiv(c->b, bt, x->ub[d], "");
    }
    return;
  }
  const IrValue *v = ir_val(c->k, n->gemm);
  LLVMValueRef groups = cg_sym_val(c, v->attrs[6]);
  LLVMValueRef og = LLVMBuildSDiv(c->b, x->ub[R - 3], groups, "");
  LLVMValueRef gi = LLVMBuildSRem(c->b, bt, groups, "");
  if (row && R == 4) x->iv[0] = LLVMBuildSDiv(c->b, bt, groups, "");
  if (row != gemm_cl(n)) { /* a channel */
    x->iv[R - 3] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, og, ""), q, "");
  } else if (collapse) { /* a pixel, OH and OW as one loop */
    x->iv[R - 2] = i64c(c, 0);
    x->iv[R - 1] = q;
  } else {
    x->iv[R - 2] = LLVMBuildSDiv(c->b, q, x->ub[R - 1], "");
    x->iv[R - 1] = LLVMBuildSRem(c->b, q, x->ub[R - 1], "");
  }
}

/* The block loops of K.epiI; args: bt, i0, i1, j0, j1. */
static void epi_loops(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef *args) {
  int R = n->rank;
  bool collapse = n->reduce == OP_CONV2D && !gemm_cl(n) &&
                  lf_acc_collapses(c->m->st, n, &n->store, R - 2, R - 1) &&
                  lf_acc_collapses(c->m->st, n, &n->cstore, R - 2, R - 1) &&
                  lf_expr_collapses(c->m->st, n, n->post, R - 2, R - 1);
  epi_index(c, n, x, args[0], cg_open_loop_from(c, args[1], args[2]), true, collapse);
  epi_index(c, n, x, args[0], cg_open_loop_from(c, args[3], args[4]), false, collapse);
  x->acc = cg_load_el(c, cg_address(c, x, &n->cstore, n->cdtype, R), n->cdtype);
  cg_store_el(c, cg_eval(c, x, n->post), cg_address(c, x, &n->store, n->dtype, R), n->dtype);
  cg_close_loop(c);
  cg_close_loop(c);
}

/* Builds K.epiI and its wrapper (outline.c); returns the wrapper and
 * its context type. */
static LLVMValueRef epi_functions(Cg *c, const LfNest *n, OutCtx *cx) {
  Outlined o;
  cpu_outline_open(c, &o, "epi", 5, c->k->nsyms + n->rank);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) {
    x.ub[l] = cg_sym_val(c, n->shape[l]);
    x.rt_stride[l] = cpu_outline_value(&o, c->k->nsyms + l);
  }
  LLVMValueRef a5[5];
  for (int i = 0; i < 5; i++) a5[i] = LLVMGetParam(o.impl, (unsigned)i);
  epi_loops(c, n, &x, a5);
  cpu_outline_close(c, &o);
  *cx = o.cx;
  return o.body;
}

/* Builds the hook for gemm nest n and fills its context in the kernel. */
static void gemm_epilogue(Cg *c, const LfNest *n, GemmEmit *e) {
  OutCtx cx;
  LLVMValueRef body = epi_functions(c, n, &cx);
  LLVMValueRef ctx = cpu_fill_nest_ctx(c, n, &cx);
  e->epi_fn = body;
  e->epi_arg = ctx;
}

/* ---- GEMM prologues (loops.h "Prologues") -------------------------------
 * gemm.c's pack function for an operand with a prologue evaluates
 * LfNest.pro[j] per element through these callbacks (gemm.h
 * GemmPrologue), inlined into the pack loop: begin points the Cg at the
 * pack function and loads the buffer bases, symbol values and scalar
 * values from the context the kernel filled (outline.c, passed through
 * the GEMM's run-time context); elem maps the element's position to the
 * operand's dims and evaluates the expression; end restores the
 * kernel's state. */

typedef struct ProUser {
  Cg *c;
  const LfNest *n;
  int j;              /* the operand: 0 a / x, 1 b / w */
  LfNest dims;        /* rank: the operand's (eval's loop count) */
  OutCtx cx;          /* the context: buffer bases, symbol values, scalars */
  GemmPrologue pro;
  LLVMBuilderRef sb;  /* the kernel's state while a pack function is built */
  LLVMValueRef sfn, *sbase, *senv, *sscalar;
  LLVMBasicBlockRef sentry;
} ProUser;

static void pro_begin(void *user, LLVMBuilderRef b, LLVMValueRef fn, LLVMValueRef arg) {
  ProUser *u = user;
  Cg *c = u->c;
  int nb = c->lk->nbufs;
  u->sb = c->b, u->sfn = c->fn, u->sbase = c->base, u->senv = c->env, u->sentry = c->entry;
  u->sscalar = c->scalar;
  c->b = b, c->fn = fn, c->entry = LLVMGetEntryBasicBlock(fn);
  int nv = u->cx.nv;
  LLVMValueRef *v = arena_alloc(c->m->arena, sizeof *v * (size_t)(nb + nv + u->cx.ns + 1));
  cpu_ctx_unpack(c, &u->cx, arg, v);
  c->base = v, c->env = v + nb; /* the bases, the symbols, the scalars */
  c->scalar = cpu_ctx_scalars(c, &u->cx, v + nb + nv);
  for (int j = 0; j < u->cx.ns; j++) c->base[u->cx.sidx[j]] = NULL;
}

static void pro_end(void *user) {
  ProUser *u = user;
  Cg *c = u->c;
  c->b = u->sb, c->fn = u->sfn, c->base = u->sbase, c->env = u->senv, c->entry = u->sentry;
  c->scalar = u->sscalar;
}

/* The operand's indices (x->iv over its dims) of position ix. */
static void pro_dims(Cg *c, const ProUser *u, const GemmIdx *ix, NestCtx *x) {
  const LfNest *n = u->n;
  int R = u->dims.rank;
  if (n->reduce == OP_MATMUL) { /* the operand's batch dims are the output's */
    LLVMValueRef bt = ix->bt;
    for (int d = R - 3; d >= 0; d--) {
      x->iv[d] = d ? LLVMBuildURem(c->b, bt, cg_sym_val(c, n->shape[d]), "") : bt;
      if (d) bt = LLVMBuildUDiv(c->b, bt, cg_sym_val(c, n->shape[d]), "");
    }
    x->iv[R - 2] = ix->i, x->iv[R - 1] = ix->j;
    return;
  }
  const IrValue *v = ir_val(c->k, n->gemm), *w = ir_val(c->k, v->args[1]);
  LLVMValueRef groups = cg_sym_val(c, v->attrs[6]), gi = LLVMBuildURem(c->b, ix->bt, groups, "");
  if (u->j == 1) { /* the weight [O, C/groups, KH, KW] */
    LLVMValueRef og = LLVMBuildUDiv(c->b, cg_sym_val(c, w->shape[0]), groups, "");
    x->iv[0] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, og, ""), ix->i, "");
    x->iv[1] = ix->ci, x->iv[2] = ix->ky, x->iv[3] = ix->kx;
    return;
  }
  if (R == 4) x->iv[0] = LLVMBuildUDiv(c->b, ix->bt, groups, "");
  x->iv[R - 3] = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, gi, cg_sym_val(c, w->shape[1]), ""), ix->ci, "");
  x->iv[R - 2] = ix->y, x->iv[R - 1] = ix->x;
}

static LLVMValueRef pro_elem(void *user, const GemmIdx *ix, DType cd) {
  ProUser *u = user;
  Cg *c = u->c;
  NestCtx x = {.n = &u->dims};
  pro_dims(c, u, ix, &x);
  const LfExpr *e = u->n->pro[u->j];
  return cg_convert(c, cg_eval(c, &x, e), e->dtype, cd);
}

/* ---- A's prologue along K as vectors (GemmPrologue.row) -----------------
 * The expression is cg_eval's, with a load hook: a load contiguous along
 * K (the operand's last dim) is one masked vector load of the row's
 * lanes, and eval_op puts every scalar beside a vector (a constant, a
 * symbol, a load that does not move along K) in every lane; so the
 * operations, and the math-layer functions, are the scalar path's on
 * vectors.  row_kind says which expressions qualify. */

/* The operations an A prologue evaluates as lanes along K (cg_lane_kind). */
static int prologue_op(const LfExpr *e) {
  DType in = e->args[e->op == OP_WHERE ? 1 : 0]->dtype;
  if (in != DT_F32 || e->dtype != DT_F32) return -1;
  switch (op_kind(e->op)) {
  case IRK_UNARY: /* the f32 trig functions call out of line by lanes (math.h) */
    return e->op == OP_SIN || e->op == OP_COS || e->op == OP_TAN || e->op == OP_ISNAN ||
                   e->op == OP_ISINF || e->op == OP_ISFINITE || e->op == OP_LOGICAL_NOT
               ? -1 : 1;
  case IRK_BINARY: /* pow's constant exponents are scalar constants (expr.c pow_f) */
    return e->op == OP_POW || e->op == OP_FLOORDIV || e->op == OP_MOD || e->op == OP_FMOD ? -1 : 1;
  case IRK_TERNARY: return e->op == OP_LERP ? 1 : -1;
  default: return -1;
  }
}

/* 1: e moves along K (dim kd) and can be a vector of f32 there; 0: it
 * does not move along K (a scalar); -1: neither (the scalar path). */
static int row_kind(const Cg *c, const LfExpr *e, int kd) {
  return cg_lane_kind(c, e, kd, prologue_op);
}

typedef struct RowLoad {
  LLVMValueRef mask; /* <n x i1> */
  int kd;
} RowLoad;

static LLVMValueRef row_load(Cg *c, NestCtx *x, const LfExpr *e) {
  const RowLoad *r = c->load_data;
  if (sym_is(e->acc.stride[r->kd], 0)) return NULL; /* the scalar load */
  LLVMValueRef p = cg_address(c, x, &e->acc, DT_F32, x->n->rank + x->n->nred);
  LLVMTypeRef vt = LLVMVectorType(c->f32, LLVMGetVectorSize(LLVMTypeOf(r->mask)));
  LLVMTypeRef ov[2] = {vt, c->ptr};
  LLVMValueRef a[4] = {p, i32c(c, 4), r->mask, LLVMConstNull(vt)};
  return cg_intrinsic(c, "llvm.masked.load", ov, 2, a, 4);
}

static LLVMValueRef pro_row(void *user, const GemmIdx *ix, LLVMValueRef mask) {
  ProUser *u = user;
  Cg *c = u->c;
  NestCtx x = {.n = &u->dims};
  pro_dims(c, u, ix, &x);
  RowLoad r = {mask, u->dims.rank - 1};
  LLVMValueRef (*hook)(Cg *, NestCtx *, const LfExpr *) = c->load_hook;
  void *data = c->load_data;
  c->load_hook = row_load, c->load_data = &r;
  LLVMValueRef v = cg_eval(c, &x, u->n->pro[u->j]);
  c->load_hook = hook, c->load_data = data;
  /* an expression that reads nothing along K: its value in every lane */
  if (LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMVectorTypeKind)
    v = cg_splat(c, v, LLVMGetVectorSize(LLVMTypeOf(mask)));
  return v;
}

/* The prologue of operand j of gemm nest n, its context filled in the
 * kernel. */
static const GemmPrologue *gemm_prologue(Cg *c, const LfNest *n, int j) {
  ProUser *u = arena_alloc(c->m->arena, sizeof *u);
  memset(u, 0, sizeof *u);
  int nb = c->lk->nbufs, ns = c->k->nsyms;
  u->c = c, u->n = n, u->j = j;
  u->dims.rank = ir_val(c->k, ir_val(c->k, n->gemm)->args[j])->rank;
  u->cx = cpu_ctx_type(c, nb, ns);
  LLVMValueRef ctx = cpu_ctx_fill(c, &u->cx);
  bool row = n->reduce == OP_MATMUL && j == 0 && n->pro[j]->dtype == DT_F32 &&
             row_kind(c, n->pro[j], u->dims.rank - 1) >= 0;
  u->pro = (GemmPrologue){pro_begin, pro_elem, row ? pro_row : NULL, pro_end, u, ctx};
  return &u->pro;
}
