/* nest.c — device kernels of elementwise, reduction and scan nests
 * (cuda.h).
 *
 * Elementwise: one thread per element, grid-stride.  The element's
 * linear index runs over the nest's schedule (loops/schedule.c: the
 * collapsed loops in the store's memory order), the innermost fastest,
 * so consecutive threads touch consecutive addresses of the store
 * (coalesced).  This is the general (64-bit) kernel; the variants the
 * host picks at launch (variant.c: 32-bit indices, vectors) are in
 * variant.c, and the tile kernel below serves both (Cg.idx32).
 *
 * Reductions (cu_plan): G threads per output (1, a warp, or the block).
 * The outputs run grid-stride; the G threads of an output split the
 * reduction's linear index j = lane, lane + G, ... (consecutive lanes
 * read consecutive elements of a row), each accumulating in the
 * accumulator dtype; the partial results then combine through warp
 * shuffles (and, for a block, shared memory), and lane 0 stores.
 * ARGMAX/ARGMIN carry the position with the value; combining keeps
 * PyTorch's answer whatever the order: the first NaN, else the extreme
 * with the smallest position.  G = 1 (windows, short reductions) runs
 * the reduction loops sequentially.
 * Needs: cuda.h. */
#include <math.h>

#include "cuda.h"

/* Output strides of the store (and cstore) when they are the
 * descriptor's. */
static void rt_strides(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef **rts) {
  if (!n->store.rt_strides) return;
  const LfBuf *b = &c->lk->bufs[n->store.buf];
  for (int l = 0; l < n->rank; l++) x->rt_stride[l] = rts[b->index][l];
}

/* Product of the extents of virtual loops [k0, k1). */
static LLVMValueRef extent_product(Cg *c, const LfNest *n, const LfSchedule *s, int k0, int k1) {
  LLVMValueRef t = i64c(c, 1);
  for (int k = k0; k < k1; k++)
    for (int m = 0; m < s->count[k]; m++)
      t = LLVMBuildMul(c->b, t, cg_sym_val(c, lf_loop_extent(n, s->order[s->first[k] + m])), "");
  return t;
}

/* Virtual loop k of s at index d: its carrier d, the loops it covers 0. */
static void set_vloop(Cg *c, const LfSchedule *s, int k, LLVMValueRef d, NestCtx *x) {
  for (int m = 0; m < s->count[k]; m++) x->iv[s->order[s->first[k] + m]] = i64c(c, 0);
  x->iv[lf_schedule_var(s, k)] = d;
}

/* Sets the loop variables of the virtual loops [k0, k1) of schedule s
 * from linear index i (virtual loop k1 - 1 fastest). */
static void split_index(Cg *c, const LfNest *n, const LfSchedule *s, int k0, int k1,
                        LLVMValueRef i, NestCtx *x) {
  for (int k = k1 - 1; k >= k0; k--) {
    LLVMValueRef ext = extent_product(c, n, s, k, k + 1);
    set_vloop(c, s, k, k > k0 ? LLVMBuildURem(c->b, i, ext, "") : i, x);
    if (k > k0) i = LLVMBuildUDiv(c->b, i, ext, "");
  }
}

/* ---- transposing nests -----------------------------------------------------
 * The schedule's tile loop (loops/schedule.c: a load is unit-stride
 * along virtual loop tile_k, the store along the innermost one) runs as
 * 32 x 32 tiles through shared memory: the block (32 x 8 threads) first
 * evaluates the tile with consecutive threads along tile_k (the load
 * coalesced), then stores it with consecutive threads along the
 * innermost loop (the store coalesced); the tile's rows are padded to
 * 33 elements against bank conflicts.  Blocks run over the tiles and the
 * other loops grid-stride. */
enum { TT = 32 };

static void emit_transpose(Cg *c, const LfNest *n, NestCtx *x, const LfSchedule *s) {
  LLVMBuilderRef b = c->b;
  if (s->tile != TT) ICE("the cuda schedule row's tile is %d, the kernels' %d", s->tile, TT);
  /* the tile and job arithmetic in 32 bits in a 32-bit variant (cuda.h) */
  LLVMTypeRef it = c->idx32 ? c->i32 : c->i64;
#define IT(v) (c->idx32 ? LLVMBuildTrunc(b, (v), c->i32, "") : (v))
#define I64(v) (c->idx32 ? LLVMBuildZExt(b, (v), c->i64, "") : (v))
  int ki = s->nouter - 1, kj = s->tile_k;
  LLVMValueRef Ei = IT(extent_product(c, n, s, ki, ki + 1)), Ej = IT(extent_product(c, n, s, kj, kj + 1));
  LLVMValueRef ti = LLVMBuildUDiv(b, LLVMBuildAdd(b, Ei, ci(it, TT - 1), ""), ci(it, TT), "");
  LLVMValueRef tj = LLVMBuildUDiv(b, LLVMBuildAdd(b, Ej, ci(it, TT - 1), ""), ci(it, TT), "");
  LLVMValueRef rest = ci(it, 1);
  for (int k = 0; k < ki; k++)
    if (k != kj) rest = LLVMBuildMul(b, rest, IT(extent_product(c, n, s, k, k + 1)), "");
  LLVMValueRef jobs = I64(LLVMBuildMul(b, rest, LLVMBuildMul(b, ti, tj, ""), ""));
  LLVMTypeRef t = cg_compute_type(c, n->value->dtype);
  LLVMValueRef tile = cu_shared(c, t, TT * (TT + 1), "tile");
  LLVMValueRef tid = IT(LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, ""));
  LLVMValueRef tx = LLVMBuildURem(b, tid, ci(it, TT), ""), ty = LLVMBuildUDiv(b, tid, ci(it, TT), "");
  CuLoop l;
  LLVMValueRef job = IT(cu_loop_open(c, &l, LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, ""), jobs,
                                     LLVMBuildZExt(b, cu_sreg(c, "nctaid.x"), c->i64, "")));
  LLVMValueRef i0 = LLVMBuildMul(b, LLVMBuildURem(b, job, ti, ""), ci(it, TT), "");
  LLVMValueRef q = LLVMBuildUDiv(b, job, ti, "");
  LLVMValueRef j0 = LLVMBuildMul(b, LLVMBuildURem(b, q, tj, ""), ci(it, TT), "");
  q = LLVMBuildUDiv(b, q, tj, "");
  for (int k = ki - 1; k >= 0; k--) { /* the other loops, row-major */
    if (k == kj) continue;
    LLVMValueRef e = IT(extent_product(c, n, s, k, k + 1));
    set_vloop(c, s, k, I64(LLVMBuildURem(b, q, e, "")), x);
    q = LLVMBuildUDiv(b, q, e, "");
  }
  enum { ROWS = TT / (CU_BLOCK / TT) }; /* elements per thread and phase */
  LLVMValueRef vals[ROWS], cells[ROWS];
  for (int phase = 0; phase < 2; phase++) {
    for (int r = 0; r < ROWS; r++) {
      LLVMValueRef across = tx, down = LLVMBuildAdd(b, ty, ci(it, r * (CU_BLOCK / TT)), "");
      /* phase 0: across = j, down = i; phase 1: across = i, down = j */
      LLVMValueRef jj = phase ? down : across, ii = phase ? across : down;
      LLVMValueRef j = LLVMBuildAdd(b, j0, jj, ""), i = LLVMBuildAdd(b, i0, ii, "");
      LLVMValueRef in = LLVMBuildAnd(b, LLVMBuildICmp(b, LLVMIntULT, j, Ej, ""),
                                     LLVMBuildICmp(b, LLVMIntULT, i, Ei, ""), "");
      LLVMValueRef cell = LLVMBuildAdd(b, LLVMBuildMul(b, ii, ci(it, TT + 1), ""), jj, "");
      LLVMBasicBlockRef from = LLVMGetInsertBlock(b), then = block(c, "tile_el"),
                        next = block(c, "tile_next");
      LLVMBuildCondBr(b, in, then, next);
      LLVMPositionBuilderAtEnd(b, then);
      set_vloop(c, s, kj, I64(j), x);
      set_vloop(c, s, ki, I64(i), x);
      LLVMValueRef p = LLVMBuildGEP2(b, t, tile, &cell, 1, "");
      LLVMValueRef v = NULL;
      if (!phase) { /* the value; stored to the tile after all ROWS loads are issued */
        v = cg_eval(c, x, n->value);
        cells[r] = p;
      } else {
        cg_store_el(c, LLVMBuildLoad2(b, t, p, ""), cg_address(c, x, &n->store, n->dtype, n->rank),
                    n->dtype);
      }
      LLVMBasicBlockRef end = LLVMGetInsertBlock(b);
      LLVMBuildBr(b, next);
      LLVMPositionBuilderAtEnd(b, next);
      if (!phase) { /* out of range: 0, a cell phase 1 never reads */
        vals[r] = LLVMBuildPhi(b, t, "");
        LLVMValueRef z = LLVMConstNull(t);
        LLVMAddIncoming(vals[r], &v, &end, 1);
        LLVMAddIncoming(vals[r], &z, &from, 1);
        cells[r] = LLVMBuildGEP2(b, t, tile, &cell, 1, "");
      }
    }
    for (int r = 0; !phase && r < ROWS; r++) LLVMBuildStore(b, vals[r], cells[r]);
    cu_barrier(c);
  }
  cu_loop_close(c, &l);
#undef IT
#undef I64
}

/* Whether nest n runs as transposing tiles (host and device agree). */
bool cu_transposes(SymTab *st, const LfNest *n, const LfTarget *t) {
  if (n->reduce != OP_COUNT) return false;
  LfSchedule s = lf_schedule(st, n, t);
  return s.tile_var >= 0 && s.blocked;
}

static void emit_elementwise(Cg *c, const LfNest *n, NestCtx *x) {
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  if (s.tile_var >= 0 && s.blocked) {
    emit_transpose(c, n, x, &s);
    return;
  }
  LLVMValueRef total = extent_product(c, n, &s, 0, s.nouter);
  CuLoop l;
  LLVMValueRef i = cu_loop_open(c, &l, cu_global_tid(c), total, cu_grid_threads(c));
  split_index(c, n, &s, 0, s.nouter, i, x);
  LLVMValueRef v = cg_eval(c, x, n->value);
  cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  cu_loop_close(c, &l);
}

/* ---- reductions ------------------------------------------------------------- */

typedef struct Red {
  Op op;
  bool isf;
  DType in, ad;
  LLVMTypeRef t;
} Red;

static LLVMValueRef red_init(Cg *c, const Red *r) {
  bool mx = r->op == OP_AMAX || r->op == OP_ARGMAX;
  bool ext = mx || r->op == OP_AMIN || r->op == OP_ARGMIN;
  if (r->op == OP_PROD) return r->isf ? LLVMConstReal(r->t, 1) : i64c(c, 1);
  if (!ext) return LLVMConstNull(r->t);
  if (r->isf) return LLVMConstReal(r->t, mx ? -INFINITY : INFINITY);
  return i64c(c, mx ? INT64_MIN : INT64_MAX);
}

/* (a, ia) combined with (b, ib). */
static void combine(Cg *c, const Red *r, LLVMValueRef *a, LLVMValueRef *ia, LLVMValueRef b,
                    LLVMValueRef ib) {
  LLVMBuilderRef B = c->b;
  Op op = r->op;
  if (op == OP_SUM || op == OP_MEAN) {
    *a = r->isf ? LLVMBuildFAdd(B, *a, b, "") : LLVMBuildAdd(B, *a, b, "");
    return;
  }
  if (op == OP_PROD) {
    *a = r->isf ? LLVMBuildFMul(B, *a, b, "") : LLVMBuildMul(B, *a, b, "");
    return;
  }
  bool mx = op == OP_AMAX || op == OP_ARGMAX, arg = op == OP_ARGMAX || op == OP_ARGMIN;
  LLVMValueRef take, earlier = LLVMBuildICmp(B, LLVMIntSLT, ib, *ia, "");
  if (r->isf) {
    LLVMValueRef aord = fcmp(c, LLVMRealORD, *a, *a), bnan = fcmp(c, LLVMRealUNO, b, b);
    LLVMValueRef better = LLVMBuildOr(B, bnan, fcmp(c, mx ? LLVMRealOGT : LLVMRealOLT, b, *a), "");
    if (arg) {
      LLVMValueRef tie = LLVMBuildAnd(B, fcmp(c, LLVMRealOEQ, b, *a), earlier, "");
      better = LLVMBuildOr(B, better, tie, "");
      LLVMValueRef bothnan = LLVMBuildAnd(B, LLVMBuildNot(B, aord, ""), bnan, "");
      take = LLVMBuildOr(B, LLVMBuildAnd(B, aord, better, ""),
                         LLVMBuildAnd(B, bothnan, earlier, ""), "");
    } else {
      take = LLVMBuildAnd(B, aord, better, "");
    }
  } else {
    take = LLVMBuildICmp(B, mx ? LLVMIntSGT : LLVMIntSLT, b, *a, "");
    if (arg)
      take = LLVMBuildOr(B, take, LLVMBuildAnd(B, LLVMBuildICmp(B, LLVMIntEQ, b, *a, ""),
                                               earlier, ""), "");
  }
  *a = sel(c, take, b, *a);
  if (arg) *ia = sel(c, take, ib, *ia);
}

/* Shuffle-down of a 32- or 64-bit value by delta lanes (full warp). */
static LLVMValueRef shfl_down(Cg *c, LLVMValueRef v, int delta) {
  LLVMTypeRef t = LLVMTypeOf(v);
  unsigned bits = LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64
                  : LLVMGetTypeKind(t) == LLVMFloatTypeKind ? 32 : LLVMGetIntTypeWidth(t);
  LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, bits);
  LLVMValueRef iv = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? v : LLVMBuildBitCast(c->b, v, it, "");
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "llvm.nvvm.shfl.sync.down.i32");
  if (!f) {
    LLVMTypeRef ps[4] = {c->i32, c->i32, c->i32, c->i32};
    f = LLVMAddFunction(c->mod, "llvm.nvvm.shfl.sync.down.i32", LLVMFunctionType(c->i32, ps, 4, 0));
  }
  LLVMValueRef parts[2];
  int np = bits == 64 ? 2 : 1;
  for (int p = 0; p < np; p++) {
    LLVMValueRef w = bits == 64 ? LLVMBuildTrunc(c->b, p ? LLVMBuildLShr(c->b, iv, ci(it, 32), "") : iv,
                                                 c->i32, "")
                                : iv;
    LLVMValueRef a[4] = {i32c(c, -1), w, i32c(c, delta), i32c(c, 31)};
    parts[p] = call(c, f, a, 4);
  }
  LLVMValueRef r = parts[0];
  if (np == 2)
    r = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, parts[0], it, ""),
                    LLVMBuildShl(c->b, LLVMBuildZExt(c->b, parts[1], it, ""), ci(it, 32), ""), "");
  return LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? r : LLVMBuildBitCast(c->b, r, t, "");
}

/* A value kept in an alloca (the accumulators across loops). */
static LLVMValueRef var(Cg *c, LLVMTypeRef t, LLVMValueRef init) {
  LLVMValueRef p = cg_entry_alloca(c, t, NULL);
  LLVMBuildStore(c->b, init, p);
  return p;
}

static LLVMValueRef get(Cg *c, LLVMTypeRef t, LLVMValueRef p) { return LLVMBuildLoad2(c->b, t, p, ""); }

/* One element (j: its position) into the accumulator (acc, idx). */
static void accumulate(Cg *c, const Red *r, NestCtx *x, LLVMValueRef acc, LLVMValueRef idx,
                       LLVMValueRef j) {
  LLVMValueRef v = cg_convert(c, cg_eval(c, x, x->n->value), r->in, r->ad);
  LLVMValueRef a = get(c, r->t, acc), ia = get(c, c->i64, idx);
  combine(c, r, &a, &ia, v, j);
  LLVMBuildStore(c->b, a, acc);
  LLVMBuildStore(c->b, ia, idx);
}

/* G == 1: the reduction loops in sequence (their own bounds when
 * given); returns the element count. */
static LLVMValueRef serial_reduce(Cg *c, const Red *r, NestCtx *x, LLVMValueRef acc,
                                  LLVMValueRef idx) {
  const LfNest *n = x->n;
  LLVMValueRef lo[MAXL], total = i64c(c, 1);
  for (int j = 0; j < n->nred; j++) {
    int l = n->rank + j;
    lo[l] = n->red_lo && n->red_lo[j] ? cg_eval(c, x, n->red_lo[j]) : i64c(c, 0);
    x->ub[l] = n->red_hi && n->red_hi[j] ? cg_eval(c, x, n->red_hi[j]) : cg_sym_val(c, n->red[j]);
    total = LLVMBuildMul(c->b, total, cg_smin(c, LLVMBuildSub(c->b, x->ub[l], lo[l], ""),
                                              i64c(c, 0), true), "");
  }
  LLVMValueRef pos = var(c, c->i64, i64c(c, 0));
  for (int l = n->rank; l < n->rank + n->nred; l++) x->iv[l] = cg_open_loop_from(c, lo[l], x->ub[l]);
  LLVMValueRef p = get(c, c->i64, pos);
  accumulate(c, r, x, acc, idx, p);
  LLVMBuildStore(c->b, LLVMBuildAdd(c->b, p, i64c(c, 1), ""), pos);
  for (int l = 0; l < n->nred; l++) cg_close_loop(c);
  return total;
}

/* G > 1: this lane's share j = lane, lane + G, ... of the reduction
 * loops (row-major); returns the element count. */
static LLVMValueRef strided_reduce(Cg *c, const Red *r, NestCtx *x, LLVMValueRef acc,
                                   LLVMValueRef idx, LLVMValueRef lane, int G) {
  const LfNest *n = x->n;
  LLVMValueRef total = i64c(c, 1);
  for (int j = 0; j < n->nred; j++) total = LLVMBuildMul(c->b, total, cg_sym_val(c, n->red[j]), "");
  CuLoop l;
  LLVMValueRef j = cu_loop_open(c, &l, lane, total, i64c(c, G));
  cu_split_rowmajor(c, j, n->red, n->nred, x->iv + n->rank);
  accumulate(c, r, x, acc, idx, j);
  cu_loop_close(c, &l);
  return total;
}

/* Combines the lanes of each warp into lane 0 (offsets width/2 .. 1). */
static void warp_reduce(Cg *c, const Red *r, LLVMValueRef acc, LLVMValueRef idx) {
  LLVMValueRef a = get(c, r->t, acc), ia = get(c, c->i64, idx);
  for (int off = 16; off >= 1; off /= 2) {
    LLVMValueRef b = shfl_down(c, a, off), ib = shfl_down(c, ia, off);
    combine(c, r, &a, &ia, b, ib);
  }
  LLVMBuildStore(c->b, a, acc);
  LLVMBuildStore(c->b, ia, idx);
}

static void if_then(Cg *c, LLVMValueRef cond, LLVMBasicBlockRef *join) {
  LLVMBasicBlockRef then = block(c, "then");
  *join = block(c, "endif");
  LLVMBuildCondBr(c->b, cond, then, *join);
  LLVMPositionBuilderAtEnd(c->b, then);
}

static void end_if(Cg *c, LLVMBasicBlockRef join) {
  LLVMBuildBr(c->b, join);
  LLVMPositionBuilderAtEnd(c->b, join);
}

/* The block's warps combined into thread 0 through shared memory. */
static void block_reduce(Cg *c, const Red *r, LLVMValueRef acc, LLVMValueRef idx, LLVMValueRef tid) {
  enum { W = CU_BLOCK / 32 };
  LLVMValueRef sa = cu_shared(c, r->t, W, "red_acc"), si = cu_shared(c, c->i64, W, "red_idx");
  LLVMValueRef warp = LLVMBuildUDiv(c->b, tid, i64c(c, 32), "");
  LLVMValueRef lane0 = LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildURem(c->b, tid, i64c(c, 32), ""),
                                     i64c(c, 0), "");
  LLVMBasicBlockRef join;
  if_then(c, lane0, &join);
  LLVMBuildStore(c->b, get(c, r->t, acc), LLVMBuildGEP2(c->b, r->t, sa, &warp, 1, ""));
  LLVMBuildStore(c->b, get(c, c->i64, idx), LLVMBuildGEP2(c->b, c->i64, si, &warp, 1, ""));
  end_if(c, join);
  cu_barrier(c);
  if_then(c, LLVMBuildICmp(c->b, LLVMIntEQ, tid, i64c(c, 0), ""), &join);
  LLVMValueRef a = get(c, r->t, sa), ia = get(c, c->i64, si);
  for (int w = 1; w < W; w++) {
    LLVMValueRef o = i64c(c, w);
    combine(c, r, &a, &ia, get(c, r->t, LLVMBuildGEP2(c->b, r->t, sa, &o, 1, "")),
            get(c, c->i64, LLVMBuildGEP2(c->b, c->i64, si, &o, 1, "")));
  }
  LLVMBuildStore(c->b, a, acc);
  LLVMBuildStore(c->b, ia, idx);
  end_if(c, join);
}

/* The stored value from the reduced (acc, idx) over `total` elements. */
static LLVMValueRef finish(Cg *c, const Red *r, NestCtx *x, LLVMValueRef acc, LLVMValueRef idx,
                           LLVMValueRef total) {
  const LfNest *n = x->n;
  if (r->op == OP_ARGMAX || r->op == OP_ARGMIN) {
    /* an all-empty share keeps INT64_MAX: position 0, as the CPU's */
    LLVMValueRef i = get(c, c->i64, idx);
    i = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, i, i64c(c, INT64_MAX), ""), i64c(c, 0), i);
    return cg_convert(c, i, DT_I64, n->dtype);
  }
  LLVMValueRef v = get(c, r->t, acc);
  if (r->op == OP_MEAN) v = LLVMBuildFDiv(c->b, v, LLVMBuildSIToFP(c->b, total, r->t, ""), "");
  if (n->post) {
    x->acc = v;
    return cg_convert(c, cg_eval(c, x, n->post), n->post->dtype, n->dtype);
  }
  return cg_convert(c, v, r->ad, n->dtype);
}

static Red red_of(Cg *c, const LfNest *n) {
  Red r = {.op = n->reduce, .in = n->value->dtype};
  r.ad = cu_acc_dtype(r.in);
  r.isf = dtype_is_float(r.ad);
  r.t = cg_compute_type(c, r.ad);
  return r;
}

/* Reduces and stores the output at x's outer index with G threads
 * (lane: this thread's lane among them; tid: its index in the block). */
static void reduce_one(Cg *c, const Red *r, NestCtx *x, int G, LLVMValueRef tid, LLVMValueRef lane) {
  const LfNest *n = x->n;
  LLVMValueRef acc = cg_entry_alloca(c, r->t, NULL), idx = cg_entry_alloca(c, c->i64, NULL);
  LLVMBuildStore(c->b, red_init(c, r), acc);
  LLVMBuildStore(c->b, i64c(c, INT64_MAX), idx);
  LLVMValueRef total;
  if (G == 1) {
    total = serial_reduce(c, r, x, acc, idx);
  } else {
    total = strided_reduce(c, r, x, acc, idx, lane, G);
    warp_reduce(c, r, acc, idx);
    if (G == CU_BLOCK) block_reduce(c, r, acc, idx, tid);
  }
  LLVMBasicBlockRef join = NULL;
  if (G > 1) if_then(c, LLVMBuildICmp(c->b, LLVMIntEQ, G == CU_BLOCK ? tid : lane, i64c(c, 0), ""), &join);
  LLVMValueRef v = finish(c, r, x, acc, idx, total);
  cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
  if (G > 1) end_if(c, join);
  if (G == CU_BLOCK) cu_barrier(c); /* the shared slots are reused next; the store is seen */
}

static void emit_reduction(Cg *c, const LfNest *n, NestCtx *x, int G) {
  Red r = red_of(c, n);
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  LLVMValueRef tid = LLVMBuildZExt(c->b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef per = i64c(c, CU_BLOCK / G);
  LLVMValueRef lane = G > 1 ? LLVMBuildURem(c->b, tid, i64c(c, G), "") : i64c(c, 0);
  LLVMValueRef ctaid = LLVMBuildZExt(c->b, cu_sreg(c, "ctaid.x"), c->i64, "");
  LLVMValueRef nct = LLVMBuildZExt(c->b, cu_sreg(c, "nctaid.x"), c->i64, "");
  LLVMValueRef o0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, ctaid, per, ""),
                                 LLVMBuildUDiv(c->b, tid, i64c(c, G), ""), "");
  LLVMValueRef outs = extent_product(c, n, &s, 0, s.nouter);
  CuLoop l;
  LLVMValueRef o = cu_loop_open(c, &l, o0, outs, LLVMBuildMul(c->b, nct, per, ""));
  split_index(c, n, &s, 0, s.nouter, o, x);
  reduce_one(c, &r, x, G, tid, lane);
  cu_loop_close(c, &l);
}

/* ---- scans ----------------------------------------------------------------
 * A thread per row (loops.h "Scans"): the outer loops' linear index runs
 * grid-stride over the schedule's memory order, so consecutive threads
 * take adjacent columns when the scanned dim is not the innermost (their
 * loads and stores coalesce); each thread runs the scanned loop
 * sequentially, its accumulator in a register, storing every step. */

static void emit_scan(Cg *c, const LfNest *n, NestCtx *x) {
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  LLVMTypeRef t = cg_compute_type(c, n->value->dtype);
  LLVMValueRef acc = cg_entry_alloca(c, t, NULL);
  LLVMValueRef rows = extent_product(c, n, &s, 0, s.nouter);
  CuLoop l;
  LLVMValueRef o = cu_loop_open(c, &l, cu_global_tid(c), rows, cu_grid_threads(c));
  split_index(c, n, &s, 0, s.nouter, o, x);
  LLVMBuildStore(c->b, cg_eval(c, x, n->scan_init), acc);
  x->iv[n->rank] = cg_open_loop(c, cg_sym_val(c, n->red[0]));
  x->acc = LLVMBuildLoad2(c->b, t, acc, "");
  LLVMValueRef v = cg_eval(c, x, n->value);
  LLVMBuildStore(c->b, v, acc);
  cg_store_el(c, cg_convert(c, v, n->value->dtype, n->dtype),
              cg_address(c, x, &n->store, n->dtype, n->rank + 1), n->dtype);
  cg_close_loop(c);
  cu_loop_close(c, &l);
}

/* ---- row groups ------------------------------------------------------------
 * A row group (loops.h LfNest.group) is one kernel: a block per shared
 * index (a row), grid-stride; the block runs the group's nests in order
 * over the row, with a barrier between them, so that a statistic or a
 * stored value is complete before the next nest reads it (from cache:
 * the row was just read).  Reductions reduce over the block, elementwise
 * nests split the row's elements over the threads. */

static void group_member(Cg *c, const LfNest *n, LLVMValueRef row, LLVMValueRef tid, int shared,
                         LLVMValueRef **rts) {
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  rt_strides(c, n, &x, rts);
  cu_split_rowmajor(c, row, n->shape, shared, x.iv);
  LLVMValueRef rest = cu_outer_product(c, n, shared, n->rank);
  CuLoop l;
  if (n->reduce == OP_COUNT) {
    LLVMValueRef i = cu_loop_open(c, &l, tid, rest, i64c(c, CU_BLOCK));
    cu_split_rowmajor(c, i, n->shape + shared, n->rank - shared, x.iv + shared);
    LLVMValueRef v = cg_eval(c, &x, n->value);
    cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
    cu_loop_close(c, &l);
    cu_barrier(c);
    return;
  }
  Red r = red_of(c, n);
  LLVMValueRef i = cu_loop_open(c, &l, i64c(c, 0), rest, i64c(c, 1));
  cu_split_rowmajor(c, i, n->shape + shared, n->rank - shared, x.iv + shared);
  bool bounds = false;
  for (int j = 0; n->red_lo && j < n->nred; j++) bounds |= n->red_lo[j] != NULL;
  if (bounds) { /* windows: thread 0 alone */
    LLVMBasicBlockRef join;
    if_then(c, LLVMBuildICmp(c->b, LLVMIntEQ, tid, i64c(c, 0), ""), &join);
    reduce_one(c, &r, &x, 1, tid, i64c(c, 0));
    end_if(c, join);
    cu_barrier(c);
  } else {
    reduce_one(c, &r, &x, CU_BLOCK, tid, tid);
  }
  cu_loop_close(c, &l);
}

void cu_emit_group_kernel(Cg *c, const LfNest *first, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  int shared = first->shared;
  LLVMValueRef tid = LLVMBuildZExt(c->b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef rows = cu_outer_product(c, first, 0, shared);
  CuLoop l;
  LLVMValueRef row = cu_loop_open(c, &l, LLVMBuildZExt(c->b, cu_sreg(c, "ctaid.x"), c->i64, ""), rows,
                                  LLVMBuildZExt(c->b, cu_sreg(c, "nctaid.x"), c->i64, ""));
  for (int j = 0; j < first->group; j++) group_member(c, first + j, row, tid, shared, rts);
  cu_loop_close(c, &l);
  LLVMBuildRetVoid(c->b);
}

void cu_emit_nest_kernel(Cg *c, const LfNest *n, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  rt_strides(c, n, &x, rts);
  CuPlan p = cu_plan(n);
  if (p.kind == CU_ELEMWISE) emit_elementwise(c, n, &x);
  else if (lf_is_scan(n)) emit_scan(c, n, &x);
  else emit_reduction(c, n, &x, p.group);
  LLVMBuildRetVoid(c->b);
}
