/* nest.c — device kernels of elementwise, reduction and scan nests and
 * of row groups (cuda.h).
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
 *
 * Split reductions (few outputs, or along columns): each output's
 * reduction over S blocks writing partials to scratch, and a finish
 * kernel (K__nI_fin) combining them in a fixed order.  Scans: a thread
 * per row.  Row groups: one kernel for the group's nests, a block per
 * row, or (section "row groups in registers") a warp or a block per row
 * holding the row's elements in registers through Cg.load_hook.
 * Needs: cuda.h. */
#include <math.h>
#include <string.h>

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

/* ---- split reductions ---------------------------------------------------------
 * A reduction to few outputs, or one along columns, splits each output's
 * reduction over S blocks (cu_split_count: about CU_SPLIT_BLOCKS blocks
 * in all, each thread at least SPLIT_MIN elements; from the shapes
 * alone, so the split and the bits of the result do not change from run
 * to run).  j is the linear index over the schedule's reduction loops,
 * the row-major position (collapsed loops need no division); each thread
 * takes every (S * lanes)-th j, SPLIT_UNROLL at a time with their loads
 * first (loads in flight), accumulating in j order.  Two kinds:
 *   SPLIT_ROWS (cu_plan's group CU_BLOCK: under 2048 constant outputs,
 *     the reduction read along its own innermost loop): grid (S,
 *     outputs); block (p, o) reduces j = p * B + tid, + S * B, ... of
 *     output o; warp shuffles and the block's warps combine in a fixed
 *     tree.
 *   SPLIT_DYN (cu_plan's warp per output with a symbolic output count):
 *     SPLIT_ROWS when there are fewer than CU_SPLIT_FEW outputs at run
 *     time (cu_split_used; host and device decide alike), else the warp
 *     per output;
 *   SPLIT_COLS (a load is unit-stride along the innermost output loop,
 *     not along the reduction: x.sum(0) of [N, C]): grid (S, ceil(outputs
 *     / 32)); in block (p, g) lane l = tid % 32 takes output g * 32 + l
 *     and row lane r = tid / 32 the j = p * 8 + r, + S * 8, ...: a warp
 *     reads 32 adjacent outputs of one j (coalesced); the 8 row lanes
 *     combine through shared memory in order.
 * Then one thread per output writes the partial (accumulator, position)
 * to the partials (cuda.h: CU_SPLIT_BYTES per output and block, at o * S
 * + p), or, when S is 1, finishes and stores the output itself.  The
 * finish kernel (K__nI_fin, launched when S > 1) runs a block per output:
 * thread t combines partials t, t + B, ... in order, then the same tree,
 * and thread 0 finishes (mean, post, conversion) and stores.  A thread's
 * float sum runs in chunks of SPLIT_CHAIN steps (256 elements), each
 * from zero, added into a second accumulator: every running chain stays
 * short at any length, then trees (docs/numerics.md).  Windows, short
 * constant reductions, scans and row groups are not split. */
enum { SPLIT_UNROLL = 8, SPLIT_MIN = 16, SPLIT_CHAIN = 32, COLS_W = 32, COLS_R = CU_BLOCK / COLS_W };
typedef enum SplitKind { SPLIT_NONE, SPLIT_ROWS, SPLIT_DYN, SPLIT_COLS } SplitKind;

/* Whether nest i belongs to a row group (whatever the opt level: host
 * and device agree on the parameters without it). */
static bool in_group(const LfKernel *lk, int i) {
  for (int j = 0; j <= i; j++)
    if (lk->nests[j].group > 1 && i < j + lk->nests[j].group) return true;
  return false;
}

/* Whether a load of e is unit-stride along loop o but not along loop r
 * (stride other than 0 and 1, or unknown). */
static bool column_load(const LfExpr *e, int o, int r) {
  if (e->kind == LFE_LOAD) {
    int64_t so, sr;
    if (e->acc.lin_rank || e->acc.rt_strides || e->acc.ndyn) return false;
    return sym_is_const(e->acc.stride[o], &so) && so == 1 &&
           !(sym_is_const(e->acc.stride[r], &sr) && (sr == 0 || sr == 1));
  }
  for (int a = 0; a < e->nargs; a++)
    if (column_load(e->args[a], o, r)) return true;
  return false;
}

static SplitKind split_kind(const LfKernel *lk, int i) {
  const LfNest *n = &lk->nests[i];
  CuPlan p = cu_plan(n);
  if (n->check || p.kind != CU_REDUCE || p.group == 1 || lf_is_scan(n) || in_group(lk, i))
    return SPLIT_NONE;
  int inner = n->order ? n->order[n->rank - 1] : n->rank - 1;
  if (n->rank > 0 && n->nred > 0 && column_load(n->value, inner, n->rank + n->nred - 1))
    return SPLIT_COLS;
  if (p.group == CU_BLOCK) return SPLIT_ROWS;
  for (int l = 0; l < n->rank; l++)
    if (!sym_is_const(n->shape[l], NULL)) return SPLIT_DYN;
  return SPLIT_NONE; /* at least CU_SPLIT_FEW constant outputs */
}

static SplitKind kind_of(Cg *c, const LfNest *n) { return split_kind(c->lk, (int)(n - c->lk->nests)); }

bool cu_has_split(const LfKernel *lk) {
  for (int i = 0; i < lk->nnests; i++)
    if (split_kind(lk, i) != SPLIT_NONE) return true;
  return false;
}

int cu_unit_funcs(const LfKernel *lk, int i, int opt) {
  int u = cu_unit(lk, i, opt);
  return !u ? 0 : u == 1 && split_kind(lk, i) != SPLIT_NONE ? 2 : 1;
}

static LLVMValueRef red_extent(Cg *c, const LfNest *n) {
  LLVMValueRef t = i64c(c, 1);
  for (int j = 0; j < n->nred; j++) t = LLVMBuildMul(c->b, t, cg_sym_val(c, n->red[j]), "");
  return t;
}

LLVMValueRef cu_split_used(Cg *c, const LfNest *n) {
  if (kind_of(c, n) != SPLIT_DYN) return LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
  return LLVMBuildICmp(c->b, LLVMIntSLT, cu_outer_product(c, n, 0, n->rank), i64c(c, CU_SPLIT_FEW), "");
}

LLVMValueRef cu_split_groups(Cg *c, const LfNest *n) {
  LLVMValueRef o = cu_outer_product(c, n, 0, n->rank);
  if (kind_of(c, n) != SPLIT_COLS) return o;
  return LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, o, i64c(c, COLS_W - 1), ""), i64c(c, COLS_W), "");
}

LLVMValueRef cu_split_count(Cg *c, const LfNest *n) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef one = i64c(c, 1);
  int lanes = kind_of(c, n) == SPLIT_COLS ? COLS_R : CU_BLOCK;
  LLVMValueRef g = cg_smin(c, cu_split_groups(c, n), one, true);
  LLVMValueRef by_groups = LLVMBuildUDiv(b, i64c(c, CU_SPLIT_BLOCKS + 0), g, "");
  LLVMValueRef by_len = LLVMBuildUDiv(b, LLVMBuildAdd(b, red_extent(c, n), i64c(c, lanes * SPLIT_MIN - 1), ""),
                                      i64c(c, lanes * SPLIT_MIN), "");
  return cg_smin(c, cg_smin(c, by_groups, by_len, false), one, true);
}

/* The partials' parameter (cuda.h: before the checks' flags). */
static LLVMValueRef partials_param(Cg *c, LLVMValueRef fn) {
  return LLVMGetParam(fn, LLVMCountParams(fn) - 1 - (unsigned)cu_has_checks(c->lk));
}

/* Partial k's accumulator (off 0) or position (off 8). */
static LLVMValueRef partial_at(Cg *c, LLVMValueRef partials, LLVMValueRef k, int off) {
  LLVMValueRef byte = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, k, i64c(c, CU_SPLIT_BYTES), ""),
                                   i64c(c, off), "");
  return LLVMBuildGEP2(c->b, LLVMInt8TypeInContext(c->ctx), partials, &byte, 1, "");
}

/* This thread's chain: j = j0, j0 + step, ... < total into (acc, idx). */
static void split_chain(Cg *c, const Red *r, const LfSchedule *s, NestCtx *x, LLVMValueRef acc,
                        LLVMValueRef idx, LLVMValueRef j0, LLVMValueRef step, LLVMValueRef total) {
  LLVMBuilderRef b = c->b;
  const LfNest *n = x->n;
  CuLoop lm, lr;
  /* a float sum: a cascade of two levels, chunks of SPLIT_CHAIN steps
   * summed from zero into outer (the chain stays short at any length) */
  LLVMValueRef outer = NULL, steps = NULL;
  if (r->isf && (r->op == OP_SUM || r->op == OP_MEAN)) {
    outer = cg_entry_alloca(c, r->t, NULL);
    steps = cg_entry_alloca(c, c->i64, NULL);
    LLVMBuildStore(b, LLVMConstNull(r->t), outer);
    LLVMBuildStore(b, i64c(c, 0), steps);
  }
  /* SPLIT_UNROLL elements a step while all are in range: the loads first */
  LLVMValueRef last = LLVMBuildSub(b, total, LLVMBuildMul(b, step, i64c(c, SPLIT_UNROLL - 1), ""), "");
  LLVMValueRef j = cu_loop_open(c, &lm, j0, last, LLVMBuildMul(b, step, i64c(c, SPLIT_UNROLL), ""));
  LLVMValueRef v[SPLIT_UNROLL], jj[SPLIT_UNROLL];
  for (int u = 0; u < SPLIT_UNROLL; u++) {
    jj[u] = u ? LLVMBuildAdd(b, jj[u - 1], step, "") : j;
    split_index(c, n, s, s->nouter, s->n, jj[u], x);
    v[u] = cg_convert(c, cg_eval(c, x, n->value), r->in, r->ad);
  }
  LLVMValueRef a = get(c, r->t, acc), ia = get(c, c->i64, idx);
  for (int u = 0; u < SPLIT_UNROLL; u++) combine(c, r, &a, &ia, v[u], jj[u]);
  if (outer) { /* every SPLIT_CHAIN steps the chunk's sum moves to outer */
    LLVMValueRef k = LLVMBuildAdd(b, get(c, c->i64, steps), i64c(c, 1), "");
    LLVMValueRef full = LLVMBuildICmp(b, LLVMIntEQ, k, i64c(c, SPLIT_CHAIN), "");
    LLVMValueRef o = get(c, r->t, outer);
    LLVMBuildStore(b, sel(c, full, LLVMBuildFAdd(b, o, a, ""), o), outer);
    a = sel(c, full, LLVMConstNull(r->t), a);
    LLVMBuildStore(b, sel(c, full, i64c(c, 0), k), steps);
  }
  LLVMBuildStore(b, a, acc);
  LLVMBuildStore(b, ia, idx);
  cu_loop_close(c, &lm);
  /* the rest, one at a time */
  j = cu_loop_open(c, &lr, lm.iv, total, step);
  split_index(c, n, s, s->nouter, s->n, j, x);
  accumulate(c, r, x, acc, idx, j);
  cu_loop_close(c, &lr);
  if (outer) LLVMBuildStore(b, LLVMBuildFAdd(b, get(c, r->t, outer), get(c, r->t, acc), ""), acc);
}

/* Output o's reduced (acc, idx): stored when S is 1, else partial o * S +
 * part. */
static void split_store(Cg *c, const Red *r, NestCtx *x, LLVMValueRef acc, LLVMValueRef idx,
                        LLVMValueRef o, LLVMValueRef part, LLVMValueRef S, LLVMValueRef total,
                        LLVMValueRef partials) {
  LLVMBuilderRef b = c->b;
  const LfNest *n = x->n;
  LLVMBasicBlockRef alone = block(c, "split_alone"), partial = block(c, "split_partial"),
                    done = block(c, "split_stored");
  LLVMBuildCondBr(b, LLVMBuildICmp(b, LLVMIntEQ, S, i64c(c, 1), ""), alone, partial);
  LLVMPositionBuilderAtEnd(b, alone);
  cg_store_el(c, finish(c, r, x, acc, idx, total), cg_address(c, x, &n->store, n->dtype, n->rank),
              n->dtype);
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, partial);
  LLVMValueRef k = LLVMBuildAdd(b, LLVMBuildMul(b, o, S, ""), part, "");
  LLVMBuildStore(b, get(c, r->t, acc), partial_at(c, partials, k, 0));
  LLVMBuildStore(b, get(c, c->i64, idx), partial_at(c, partials, k, 8));
  LLVMBuildBr(b, done);
  LLVMPositionBuilderAtEnd(b, done);
}

static void emit_split(Cg *c, const LfNest *n, NestCtx *x, LLVMValueRef partials) {
  LLVMBuilderRef b = c->b;
  bool cols = kind_of(c, n) == SPLIT_COLS;
  Red r = red_of(c, n);
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  LLVMValueRef tid = LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef part = LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, "");
  LLVMValueRef S = LLVMBuildZExt(b, cu_sreg(c, "nctaid.x"), c->i64, "");
  LLVMValueRef outs = extent_product(c, n, &s, 0, s.nouter);
  LLVMValueRef total = extent_product(c, n, &s, s.nouter, s.n);
  LLVMValueRef acc = cg_entry_alloca(c, r.t, NULL), idx = cg_entry_alloca(c, c->i64, NULL);
  int lanes = cols ? COLS_R : CU_BLOCK;
  LLVMValueRef lane = cols ? LLVMBuildURem(b, tid, i64c(c, COLS_W), "") : i64c(c, 0);
  LLVMValueRef row = cols ? LLVMBuildUDiv(b, tid, i64c(c, COLS_W), "") : tid;
  LLVMValueRef step = LLVMBuildMul(b, S, i64c(c, lanes), "");
  LLVMValueRef j0 = LLVMBuildAdd(b, LLVMBuildMul(b, part, i64c(c, lanes), ""), row, "");
  CuLoop lo;
  LLVMValueRef g = cu_loop_open(c, &lo, LLVMBuildZExt(b, cu_sreg(c, "ctaid.y"), c->i64, ""),
                                cu_split_groups(c, n),
                                LLVMBuildZExt(b, cu_sreg(c, "nctaid.y"), c->i64, ""));
  LLVMValueRef o = cols ? LLVMBuildAdd(b, LLVMBuildMul(b, g, i64c(c, COLS_W), ""), lane, "") : g;
  LLVMValueRef valid = LLVMBuildICmp(b, LLVMIntSLT, o, outs, "");
  split_index(c, n, &s, 0, s.nouter, o, x); /* arithmetic only when o is past the end */
  LLVMBuildStore(b, red_init(c, &r), acc);
  LLVMBuildStore(b, i64c(c, INT64_MAX), idx);
  LLVMBasicBlockRef join;
  if (cols) if_then(c, valid, &join);
  split_chain(c, &r, &s, x, acc, idx, j0, step, total);
  if (cols) {
    end_if(c, join);
    /* the row lanes of each output, in order, through shared memory */
    LLVMValueRef sa = cu_shared(c, r.t, CU_BLOCK, "cols_acc"), si = cu_shared(c, c->i64, CU_BLOCK, "cols_idx");
    LLVMBuildStore(b, get(c, r.t, acc), LLVMBuildGEP2(b, r.t, sa, &tid, 1, ""));
    LLVMBuildStore(b, get(c, c->i64, idx), LLVMBuildGEP2(b, c->i64, si, &tid, 1, ""));
    cu_barrier(c);
    if_then(c, LLVMBuildAnd(b, valid, LLVMBuildICmp(b, LLVMIntEQ, row, i64c(c, 0), ""), ""), &join);
    LLVMValueRef a = get(c, r.t, acc), ia = get(c, c->i64, idx);
    for (int k = 1; k < COLS_R; k++) {
      LLVMValueRef at = LLVMBuildAdd(b, lane, i64c(c, k * COLS_W), "");
      combine(c, &r, &a, &ia, get(c, r.t, LLVMBuildGEP2(b, r.t, sa, &at, 1, "")),
              get(c, c->i64, LLVMBuildGEP2(b, c->i64, si, &at, 1, "")));
    }
    LLVMBuildStore(b, a, acc);
    LLVMBuildStore(b, ia, idx);
  } else {
    warp_reduce(c, &r, acc, idx);
    block_reduce(c, &r, acc, idx, tid);
    if_then(c, LLVMBuildICmp(b, LLVMIntEQ, tid, i64c(c, 0), ""), &join);
  }
  split_store(c, &r, x, acc, idx, o, part, S, total, partials);
  end_if(c, join);
  cu_barrier(c); /* the shared slots are reused next */
  cu_loop_close(c, &lo);
}

void cu_emit_split_finish_kernel(Cg *c, const LfNest *n, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  LLVMBuilderRef b = c->b;
  LLVMValueRef partials = partials_param(c, fn);
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  rt_strides(c, n, &x, rts);
  Red r = red_of(c, n);
  LfSchedule s = lf_schedule(c->m->st, n, c->target);
  LLVMValueRef tid = LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef S = cu_split_count(c, n), total = red_extent(c, n);
  LLVMValueRef outs = extent_product(c, n, &s, 0, s.nouter);
  LLVMValueRef acc = cg_entry_alloca(c, r.t, NULL), idx = cg_entry_alloca(c, c->i64, NULL);
  CuLoop lo, lk;
  LLVMValueRef o = cu_loop_open(c, &lo, LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, ""), outs,
                                LLVMBuildZExt(b, cu_sreg(c, "nctaid.x"), c->i64, ""));
  split_index(c, n, &s, 0, s.nouter, o, &x);
  LLVMBuildStore(b, red_init(c, &r), acc);
  LLVMBuildStore(b, i64c(c, INT64_MAX), idx);
  LLVMValueRef k = cu_loop_open(c, &lk, tid, S, i64c(c, CU_BLOCK));
  LLVMValueRef at = LLVMBuildAdd(b, LLVMBuildMul(b, o, S, ""), k, "");
  LLVMValueRef a = get(c, r.t, acc), ia = get(c, c->i64, idx);
  combine(c, &r, &a, &ia, get(c, r.t, partial_at(c, partials, at, 0)),
          get(c, c->i64, partial_at(c, partials, at, 8)));
  LLVMBuildStore(b, a, acc);
  LLVMBuildStore(b, ia, idx);
  cu_loop_close(c, &lk);
  warp_reduce(c, &r, acc, idx);
  block_reduce(c, &r, acc, idx, tid);
  LLVMBasicBlockRef join;
  if_then(c, LLVMBuildICmp(b, LLVMIntEQ, tid, i64c(c, 0), ""), &join);
  cg_store_el(c, finish(c, &r, &x, acc, idx, total), cg_address(c, &x, &n->store, n->dtype, n->rank),
              n->dtype);
  end_if(c, join);
  cu_barrier(c);
  cu_loop_close(c, &lo);
  LLVMBuildRetVoid(b);
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

/* ---- row groups in registers -----------------------------------------------
 * When every member of a group walks the same row elements (rg_analyze:
 * the same non-unit loops after the shared ones, reductions with one
 * statistic per row, no windows, no arg-reductions or scans), a row whose
 * length E fits a tier (RG_TIERS: T threads per row, up to V elements per
 * thread, T * V >= E) runs from registers: thread lt of a row's team
 * takes the row elements e = lt + s * T (s < V; a load per instruction
 * coalesced across the team), each member is evaluated at its elements
 * in order, and
 *  - a load is issued once per row: later loads of the same element
 *    (the same buffer, offset and strides: an access class) reuse the
 *    register, and a load of a value an earlier member stored takes the
 *    stored value (rounded as the store rounds it);
 *  - a reduction accumulates its thread's elements, then combines the
 *    team through warp butterflies (the lower lane's value first, so
 *    every lane gets the same bits) and, for a block, one shared-memory
 *    step; every thread then holds the statistic;
 *  - a store is skipped when a later member stores the same elements of
 *    the same buffer, or when it goes to scratch that nothing else reads
 *    (statistics).
 * Teams of T = 32 (a warp per row, 8 rows per block) serve rows of up to
 * 1024 elements (V = 8 up to 256), T = 256 (a block per row) up to 4096;
 * when some access has unit stride along the row's last loop, a thread
 * takes groups of 4 adjacent elements instead (e = 4 (lt + c T) + w),
 * which those accesses load and store at once, and rows that do not
 * allow it (rg_vec_ok) take the general kernel: one variant per group,
 * as the driver's JIT time grows quickly with the straight-line code;
 * longer rows and other groups take the general kernel below.  A thread
 * keeps to its own elements between members, so only block reductions
 * need barriers. */
enum { RG_MAXM = 16, RG_MAXC = 48 };

static const struct {
  int T, V;
} RG_TIERS[] = {{32, 8}, {32, 32}, {CU_BLOCK, 16}};
enum { RG_NT = sizeof RG_TIERS / sizeof RG_TIERS[0] };

typedef struct RgClass {
  int buf;
  const Sym *offset;
  const Sym *str[MAXL]; /* the shared loops' strides, then the row loops' (NULL: 0) */
  bool uniform;         /* every row stride 0: one value per row */
  bool vec;             /* unit stride along the last row loop: 4 at once */
} RgClass;

typedef struct RgGroup {
  const LfNest *first;
  int n, shared, nrow;     /* members, shared loops, row loops */
  int row[RG_MAXM][MAXL];  /* per member: its row loops (non-unit, in order) */
  int nr[RG_MAXM];         /* per member: how many (nrow, or 0: one value per row) */
  const Sym *ext[MAXL];    /* their extents, every member's the same */
  int ncls;
  RgClass cls[RG_MAXC];
  int store_cls[RG_MAXM];  /* per member: its store's class, -1 opaque */
  bool store_needed[RG_MAXM];
} RgGroup;

/* The class of member k's access a (a store: over the outer loops), or
 * -1 (dynamic, linearized or descriptor strides; or no room); add: new
 * classes are added, else only found. */
static int rg_class(RgGroup *g, int k, const LfAccess *a, bool store, bool add) {
  const LfNest *n = g->first + k;
  if (a->rt_strides || a->lin_rank || a->ndyn) return -1;
  RgClass q = {.buf = a->buf, .offset = a->offset, .uniform = true};
  int nstr = store ? n->rank : n->rank + n->nred, ns = g->shared + g->nrow;
  for (int l = 0; l < g->shared; l++) q.str[l] = sym_is(a->stride[l], 0) ? NULL : a->stride[l];
  for (int j = 0; j < g->nr[k]; j++) {
    int l = g->row[k][j];
    const Sym *s = l < nstr && !sym_is(a->stride[l], 0) ? a->stride[l] : NULL;
    q.str[g->shared + j] = s;
    q.uniform &= s == NULL;
  }
  for (int i = 0; i < g->ncls; i++) {
    const RgClass *p = &g->cls[i];
    bool eq = p->buf == q.buf && p->offset == q.offset;
    for (int l = 0; eq && l < ns; l++) eq = p->str[l] == q.str[l];
    if (eq) return i;
  }
  if (!add || g->ncls == RG_MAXC) return -1;
  g->cls[g->ncls] = q;
  return g->ncls++;
}

/* Calls f on every load in e (dynamic indices' included). */
typedef struct RgWalk {
  RgGroup *g;
  int k;
  bool ok;
  int *bcls;     /* per buffer stored in the group: its class (-2 unset) */
  bool *stored;  /* per buffer: stored by a member before the current one */
  bool *inside;  /* per buffer: stored by some member */
  bool *memread; /* per buffer: read in the group before its first store */
} RgWalk;

static void rg_site(RgWalk *w, int buf, int id) {
  if (!w->inside[buf]) return;
  if (id < 0 || (w->bcls[buf] != -2 && w->bcls[buf] != id)) w->ok = false;
  w->bcls[buf] = id;
}

static void rg_loads(RgWalk *w, const LfExpr *e, const LfKernel *lk) {
  if (!e) return;
  for (int j = 0; j < e->nargs; j++) rg_loads(w, e->args[j], lk);
  if (e->kind != LFE_LOAD) return;
  for (int t = 0; t < e->acc.ndyn; t++) rg_loads(w, e->acc.dyn[t], lk);
  int b = e->acc.buf;
  if (lk->bufs[b].kind == LFB_SCALAR) return;
  int id = rg_class(w->g, w->k, &e->acc, false, true);
  rg_site(w, b, id);
  if (w->inside[b] && !w->stored[b]) w->memread[b] = true;
}

/* Whether expression e loads buffer b. */
static bool expr_reads(const LfExpr *e, int b) {
  if (!e) return false;
  for (int j = 0; j < e->nargs; j++)
    if (expr_reads(e->args[j], b)) return true;
  if (e->kind != LFE_LOAD) return false;
  for (int t = 0; t < e->acc.ndyn; t++)
    if (expr_reads(e->acc.dyn[t], b)) return true;
  return e->acc.buf == b;
}

static bool access_reads(const LfAccess *a, int b) {
  for (int t = 0; t < a->ndyn; t++)
    if (expr_reads(a->dyn[t], b)) return true;
  return false;
}

/* Whether a nest outside [g0, g0 + n) reads buffer b. */
static bool read_outside(const LfKernel *lk, int g0, int n, int b) {
  for (int i = 0; i < lk->nnests; i++) {
    if (i >= g0 && i < g0 + n) continue;
    const LfNest *m = &lk->nests[i];
    bool r = expr_reads(m->value, b) || expr_reads(m->post, b) || expr_reads(m->scan_init, b) ||
             expr_reads(m->pro[0], b) || expr_reads(m->pro[1], b) || access_reads(&m->store, b) ||
             access_reads(&m->cstore, b);
    for (int j = 0; !r && j < m->nred; j++)
      r = (m->red_lo && expr_reads(m->red_lo[j], b)) || (m->red_hi && expr_reads(m->red_hi[j], b));
    for (int j = 0; !r && j < m->nopnd; j++) r = m->opnd[j].buf == b || access_reads(&m->opnd[j], b);
    if (r) return true;
  }
  return false;
}

static const Sym *loop_extent(const LfNest *n, int l) {
  return l < n->rank ? n->shape[l] : n->red[l - n->rank];
}

/* Whether the group at `first` runs from registers (fills g). */
static bool rg_analyze(Cg *c, const LfNest *first, RgGroup *g) {
  const LfKernel *lk = c->lk;
  memset(g, 0, sizeof *g);
  g->first = first;
  g->n = first->group;
  g->shared = first->shared;
  if (g->n > RG_MAXM || g->shared < 1) return false;
  int ref = -1; /* the first member with row loops */
  for (int k = 0; k < g->n; k++) {
    const LfNest *n = first + k;
    Op op = n->reduce;
    if (n->check || n->rank < g->shared) return false;
    if (op != OP_COUNT && op != OP_SUM && op != OP_MEAN && op != OP_PROD && op != OP_AMAX &&
        op != OP_AMIN)
      return false;
    for (int j = 0; j < n->nred; j++)
      if ((n->red_lo && n->red_lo[j]) || (n->red_hi && n->red_hi[j])) return false;
    int nr = 0;
    for (int l = g->shared; l < n->rank + n->nred; l++) {
      const Sym *e = loop_extent(n, l);
      if (sym_is(e, 1)) continue;
      if (op != OP_COUNT && l < n->rank) return false; /* several statistics per row */
      if (nr == MAXL) return false;
      if (ref >= 0 && (nr >= g->nrow || g->ext[nr] != e)) return false;
      if (ref < 0) g->ext[nr] = e;
      g->row[k][nr++] = l;
    }
    if (!nr && op != OP_COUNT) return false;
    if (nr && ref < 0) {
      ref = k;
      g->nrow = nr;
    }
    if (nr && nr != g->nrow) return false;
    g->nr[k] = nr;
  }
  if (ref < 0) return false;
  int nb = lk->nbufs;
  int *bcls = arena_alloc(c->m->arena, sizeof *bcls * (size_t)(nb + 1));
  bool *fl = arena_alloc(c->m->arena, sizeof *fl * (size_t)(3 * nb + 3));
  memset(fl, 0, sizeof *fl * (size_t)(3 * nb + 3));
  RgWalk w = {.g = g, .ok = true, .bcls = bcls, .stored = fl, .inside = fl + nb + 1,
              .memread = fl + 2 * nb + 2};
  for (int b = 0; b < nb; b++) bcls[b] = -2;
  for (int k = 0; k < g->n; k++) w.inside[first[k].store.buf] = true;
  for (int k = 0; k < g->n && w.ok; k++) {
    const LfNest *n = first + k;
    w.k = k;
    rg_loads(&w, n->value, lk);
    rg_loads(&w, n->post, lk);
    int id = rg_class(g, k, &n->store, true, true);
    if (id >= 0 && g->cls[id].uniform != (n->reduce != OP_COUNT || !g->nr[k])) return false;
    if (id < 0 && (n->reduce != OP_COUNT || w.bcls[n->store.buf] != -2)) return false;
    if (id < 0) w.bcls[n->store.buf] = -1; /* no other site may follow */
    else rg_site(&w, n->store.buf, id);
    if (access_reads(&n->store, n->store.buf)) return false;
    g->store_cls[k] = id;
    w.stored[n->store.buf] = true;
  }
  if (!w.ok) return false;
  int g0 = (int)(first - lk->nests);
  for (int k = 0; k < g->n; k++) {
    int id = g->store_cls[k], b = first[k].store.buf;
    bool later = false;
    for (int j = k + 1; id >= 0 && j < g->n; j++) later |= g->store_cls[j] == id;
    bool dead_scratch = lk->bufs[b].kind == LFB_SCRATCH && !w.memread[b] &&
                        !read_outside(lk, g0, g->n, b);
    g->store_needed[k] = id < 0 || !(later || dead_scratch);
  }
  for (int i = 0; i < g->ncls; i++) {
    const Sym *last = g->cls[i].str[g->shared + g->nrow - 1]; /* NULL: stride 0 */
    g->cls[i].vec = last && sym_is(last, 1);
  }
  return true;
}

/* Whether a vector variant has anything to load or store 4 at once. */
static bool rg_has_vec(const RgGroup *g) {
  for (int i = 0; i < g->ncls; i++)
    if (g->cls[i].vec) return true;
  return false;
}

/* The vector variant's run-time condition (i1): the last row loop's
 * extent a multiple of 4, and every vector class's group of 4 aligned to
 * its size (at most 16 bytes) wherever it starts: the element 0 address
 * and every other stride. */
static LLVMValueRef rg_vec_ok(Cg *c, const RgGroup *g) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef ok = LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, cg_sym_val(c, g->ext[g->nrow - 1]), i64c(c, 3), ""),
                                  i64c(c, 0), "");
  for (int i = 0; i < g->ncls; i++) {
    const RgClass *q = &g->cls[i];
    if (!q->vec) continue;
    int sz = dtype_size(c->lk->bufs[q->buf].dtype), A = 4 * sz > 16 ? 16 : 4 * sz;
    LLVMValueRef m = i64c(c, A - 1), szv = i64c(c, sz);
    LLVMValueRef a = LLVMBuildAdd(b, LLVMBuildPtrToInt(b, c->base[q->buf], c->i64, ""),
                                  LLVMBuildMul(b, cg_sym_val(c, q->offset), szv, ""), "");
    for (int l = 0; l < g->shared + g->nrow - 1; l++)
      if (q->str[l]) a = LLVMBuildOr(b, a, LLVMBuildMul(b, cg_sym_val(c, q->str[l]), szv, ""), "");
    ok = LLVMBuildAnd(b, ok, LLVMBuildICmp(b, LLVMIntEQ, LLVMBuildAnd(b, a, m, ""), i64c(c, 0), ""), "");
  }
  return ok;
}

/* The row length E (i64): the product of the row loops' extents. */
static LLVMValueRef rg_row_len(Cg *c, const RgGroup *g) {
  LLVMValueRef e = i64c(c, 1);
  for (int j = 0; j < g->nrow; j++) e = LLVMBuildMul(c->b, e, cg_sym_val(c, g->ext[j]), "");
  return e;
}

/* The tier a row of E elements runs in (i32: RG_NT for the general kernel). */
static LLVMValueRef rg_tier_of(Cg *c, LLVMValueRef E) {
  LLVMValueRef t = i32c(c, RG_NT);
  for (int i = RG_NT - 1; i >= 0; i--)
    t = sel(c, LLVMBuildICmp(c->b, LLVMIntSLE, E, i64c(c, (long long)RG_TIERS[i].T * RG_TIERS[i].V), ""),
            i32c(c, i), t);
  return sel(c, LLVMBuildICmp(c->b, LLVMIntSGE, E, i64c(c, 1), ""), t, i32c(c, RG_NT));
}

LLVMValueRef cu_group_blocks(Cg *c, const LfNest *first) {
  LLVMValueRef rows = cu_outer_product(c, first, 0, first->shared), per = i64c(c, 1);
  RgGroup g;
  if (rg_analyze(c, first, &g)) { /* the tier rg_dispatch picks */
    LLVMValueRef t = rg_tier_of(c, rg_row_len(c, &g));
    if (rg_has_vec(&g)) t = sel(c, rg_vec_ok(c, &g), t, i32c(c, RG_NT));
    for (int i = 0; i < RG_NT; i++)
      per = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, t, i32c(c, i), ""), i64c(c, CU_BLOCK / RG_TIERS[i].T), per);
  }
  LLVMValueRef n = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, rows, LLVMBuildSub(c->b, per, i64c(c, 1), ""), ""),
                                 per, "");
  return cg_smin(c, n, i64c(c, CU_MAX_BLOCKS), false);
}

/* The registers of one row while a tier runs (the load hook's state). */
typedef struct RgRun {
  RgGroup *g;
  int V, slot;
  LLVMValueRef *cache; /* [class * V + slot]; a uniform class: slot 0 */
  LLVMValueRef *valid; /* per slot: inside the row (i1) */
  bool vec;            /* the vector variant: slots 4c .. 4c + 3 adjacent */
} RgRun;

/* A value loaded from memory as cg_load_el converts it. */
static LLVMValueRef loaded(Cg *c, LLVMValueRef v, DType dt) {
  if (dt == DT_BOOL) return cg_to_bool(c, v);
  if (dt == DT_BF16) return cg_bf16_to_f32v(c, v);
  if (dt == DT_F16) return LLVMBuildFPExt(c->b, v, c->f32, "");
  return v;
}

/* The address of e's element for the current slot, or, for a slot past
 * the row's end, of the row's element 0 (always there: E >= 1): every
 * load is unconditional, so a thread's loads are all in flight at once
 * (a load under a branch waits for the loads before it to be used). */
static LLVMValueRef rg_address(Cg *c, NestCtx *x, const LfExpr *e, RgRun *r, int back) {
  DType dt = c->lk->bufs[e->acc.buf].dtype;
  int n = x->n->rank + x->n->nred, k = (int)(x->n - r->g->first);
  LLVMValueRef p = cg_address(c, x, &e->acc, dt, n), o = i64c(c, -back);
  if (back) p = LLVMBuildGEP2(c->b, cg_storage_type(c, dt), p, &o, 1, "");
  NestCtx y = *x;
  for (int j = 0; j < r->g->nr[k]; j++) y.iv[r->g->row[k][j]] = i64c(c, 0);
  return sel(c, r->valid[r->slot], p, cg_address(c, &y, &e->acc, dt, n));
}

/* The 4 slots of the current slot's group, one vector load (the slot's
 * address less its place in the group: the class has unit stride). */
static LLVMValueRef rg_load4(Cg *c, NestCtx *x, const LfExpr *e, RgRun *r, int id) {
  DType dt = c->lk->bufs[e->acc.buf].dtype;
  LLVMTypeRef st = cg_storage_type(c, dt), vt = LLVMVectorType(st, 4);
  int w = r->slot % 4, sz = dtype_size(dt);
  LLVMValueRef v = LLVMBuildLoad2(c->b, vt, rg_address(c, x, e, r, w), "");
  LLVMSetAlignment(v, (unsigned)(4 * sz > 16 ? 16 : 4 * sz));
  int s0 = r->slot - w;
  for (int j = 0; j < 4; j++)
    r->cache[id * r->V + s0 + j] = loaded(c, LLVMBuildExtractElement(c->b, v, i32c(c, j), ""), dt);
  return r->cache[id * r->V + r->slot];
}

static LLVMValueRef rg_load(Cg *c, NestCtx *x, const LfExpr *e) {
  RgRun *r = c->load_data;
  long k = x->n - r->g->first;
  if (k < 0 || k >= r->g->n) return NULL;
  int id = rg_class(r->g, (int)k, &e->acc, false, false);
  DType dt = c->lk->bufs[e->acc.buf].dtype;
  if (id < 0) /* not kept (dynamic, linearized, descriptor strides): each time, in range */
    return cg_load_el(c, rg_address(c, x, e, r, 0), dt);
  LLVMValueRef *p = &r->cache[id * r->V + (r->g->cls[id].uniform ? 0 : r->slot)];
  if (*p) return *p;
  if (r->g->cls[id].uniform) { /* the row's, always in range */
    *p = cg_load_el(c, cg_address(c, x, &e->acc, dt, x->n->rank + x->n->nred), dt);
    return *p;
  }
  if (r->vec && r->g->cls[id].vec) return rg_load4(c, x, e, r, id);
  *p = cg_load_el(c, rg_address(c, x, e, r, 0), dt);
  return *p;
}

/* v (compute type) as a load reads it back after cg_store_el as dt. */
static LLVMValueRef stored_value(Cg *c, LLVMValueRef v, DType dt) {
  if (dt == DT_BOOL) return cg_to_bool(c, cg_to_bool(c, v));
  if (dt == DT_BF16) return cg_bf16_to_f32v(c, cg_f32_to_bf16v(c, v));
  if (dt == DT_F16)
    return LLVMBuildFPExt(c->b, LLVMBuildFPTrunc(c->b, v, cg_storage_type(c, dt), ""), c->f32, "");
  return v;
}

/* Butterfly shuffle (xor lane mask m) of a 32- or 64-bit value. */
static LLVMValueRef shfl_bfly(Cg *c, LLVMValueRef v, int m) {
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind tk = LLVMGetTypeKind(t);
  unsigned bits = tk == LLVMDoubleTypeKind ? 64 : tk == LLVMFloatTypeKind ? 32 : LLVMGetIntTypeWidth(t);
  LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, bits);
  LLVMValueRef iv = tk == LLVMIntegerTypeKind ? v : LLVMBuildBitCast(c->b, v, it, "");
  LLVMValueRef f = LLVMGetNamedFunction(c->mod, "llvm.nvvm.shfl.sync.bfly.i32");
  if (!f) {
    LLVMTypeRef ps[4] = {c->i32, c->i32, c->i32, c->i32};
    f = LLVMAddFunction(c->mod, "llvm.nvvm.shfl.sync.bfly.i32", LLVMFunctionType(c->i32, ps, 4, 0));
  }
  LLVMValueRef r = NULL;
  for (unsigned p = 0; p < bits / 32 + (bits < 32); p++) {
    LLVMValueRef w = iv;
    if (bits == 64) w = LLVMBuildTrunc(c->b, p ? LLVMBuildLShr(c->b, iv, ci(it, 32), "") : iv, c->i32, "");
    else if (bits < 32) w = LLVMBuildZExt(c->b, iv, c->i32, "");
    LLVMValueRef a[4] = {i32c(c, -1), w, i32c(c, m), i32c(c, 31)};
    LLVMValueRef s = call(c, f, a, 4);
    if (bits == 64) {
      s = LLVMBuildZExt(c->b, s, it, "");
      r = p ? LLVMBuildOr(c->b, r, LLVMBuildShl(c->b, s, ci(it, 32), ""), "") : s;
    } else {
      r = bits < 32 ? LLVMBuildTrunc(c->b, s, it, "") : s;
    }
  }
  return tk == LLVMIntegerTypeKind ? r : LLVMBuildBitCast(c->b, r, t, "");
}

/* Combines a over a team of T threads (32 or the block); every thread
 * gets the same bits. */
static LLVMValueRef rg_team_reduce(Cg *c, const Red *r, LLVMValueRef a, int T, LLVMValueRef tid) {
  LLVMBuilderRef b = c->b;
  LLVMValueRef lane = LLVMBuildAnd(b, tid, i64c(c, 31), ""), no = i64c(c, 0);
  for (int m = 1; m < 32; m *= 2) {
    LLVMValueRef o = shfl_bfly(c, a, m);
    LLVMValueRef hi = LLVMBuildICmp(b, LLVMIntNE, LLVMBuildAnd(b, lane, i64c(c, m), ""), no, "");
    LLVMValueRef lo = sel(c, hi, o, a), up = sel(c, hi, a, o), ia = no;
    combine(c, r, &lo, &ia, up, no);
    a = lo;
  }
  if (T == 32) return a;
  enum { W = CU_BLOCK / 32 };
  LLVMValueRef sa = cu_shared(c, r->t, W, "row_red");
  LLVMValueRef warp = LLVMBuildLShr(b, tid, i64c(c, 5), "");
  LLVMBasicBlockRef join;
  if_then(c, LLVMBuildICmp(b, LLVMIntEQ, lane, no, ""), &join);
  LLVMBuildStore(b, a, LLVMBuildGEP2(b, r->t, sa, &warp, 1, ""));
  end_if(c, join);
  cu_barrier(c);
  a = get(c, r->t, sa);
  for (int w = 1; w < W; w++) {
    LLVMValueRef o = i64c(c, w), ia = no;
    combine(c, r, &a, &ia, get(c, r->t, LLVMBuildGEP2(b, r->t, sa, &o, 1, "")), no);
  }
  cu_barrier(c); /* the slots are written again for the next row */
  return a;
}

/* Stores v[0..3] (compute type) as dt at p, p + 1, ... when `in`. */
static void rg_store4(Cg *c, LLVMValueRef *v, LLVMValueRef p, DType dt, LLVMValueRef in) {
  LLVMTypeRef st = cg_storage_type(c, dt), vt = LLVMVectorType(st, 4);
  LLVMValueRef q = LLVMGetUndef(vt);
  for (int j = 0; j < 4; j++) {
    LLVMValueRef e = v[j];
    if (dt == DT_BOOL) e = cg_to_bool(c, e);
    if (dt == DT_BF16) e = cg_f32_to_bf16v(c, e);
    if (dt == DT_F16) e = LLVMBuildFPTrunc(c->b, e, st, "");
    q = LLVMBuildInsertElement(c->b, q, e, i32c(c, j), "");
  }
  LLVMBasicBlockRef join;
  if_then(c, in, &join);
  int sz = dtype_size(dt);
  LLVMSetAlignment(LLVMBuildStore(c->b, q, p), (unsigned)(4 * sz > 16 ? 16 : 4 * sz));
  end_if(c, join);
}

/* Member k of the group at the current row, its elements' positions
 * (per slot: the row loops' values, and whether the slot is in the row). */
static void rg_member(Cg *c, RgRun *run, int k, LLVMValueRef **rts, const LLVMValueRef *ivs,
                      LLVMValueRef *const *pos, const LLVMValueRef *valid, LLVMValueRef E,
                      int T, LLVMValueRef tid, LLVMValueRef lt) {
  const RgGroup *g = run->g;
  const LfNest *n = g->first + k;
  int V = run->V, sid = g->store_cls[k];
  NestCtx x = {.n = n};
  for (int l = 0; l < n->rank; l++) x.ub[l] = cg_sym_val(c, n->shape[l]);
  for (int l = 0; l < n->nred; l++) x.ub[n->rank + l] = cg_sym_val(c, n->red[l]);
  rt_strides(c, n, &x, rts);
  for (int l = 0; l < n->rank + n->nred; l++) x.iv[l] = l < g->shared ? ivs[l] : i64c(c, 0);
  DType bt = c->lk->bufs[n->store.buf].dtype;
  LLVMBasicBlockRef join;
  if (n->reduce == OP_COUNT && !g->nr[k]) { /* one value per row */
    run->slot = 0;
    LLVMValueRef v = cg_eval(c, &x, n->value);
    if (sid >= 0) run->cache[sid * V] = stored_value(c, v, bt);
    if (!g->store_needed[k]) return;
    if_then(c, LLVMBuildICmp(c->b, LLVMIntEQ, lt, i64c(c, 0), ""), &join);
    cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
    end_if(c, join);
    return;
  }
  if (n->reduce == OP_COUNT) {
    bool vs = run->vec && sid >= 0 && g->cls[sid].vec && g->store_needed[k];
    LLVMValueRef four[4];
    for (int s = 0; s < V; s++) {
      run->slot = s;
      for (int j = 0; j < g->nrow; j++) x.iv[g->row[k][j]] = pos[s][j];
      LLVMValueRef v = cg_eval(c, &x, n->value);
      if (sid >= 0) run->cache[sid * V + s] = stored_value(c, v, bt);
      if (!g->store_needed[k]) continue;
      if (vs) { /* the group of 4 at once, at its first slot's address */
        four[s % 4] = v;
        if (s % 4 < 3) continue;
        for (int j = 0; j < g->nrow; j++) x.iv[g->row[k][j]] = pos[s - 3][j];
        rg_store4(c, four, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype, valid[s]);
        continue;
      }
      if_then(c, valid[s], &join);
      cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
      end_if(c, join);
    }
    return;
  }
  Red r = red_of(c, n);
  LLVMValueRef a = red_init(c, &r), no = i64c(c, 0);
  for (int s = 0; s < V; s++) {
    run->slot = s;
    for (int j = 0; j < g->nrow; j++) x.iv[g->row[k][j]] = pos[s][j];
    LLVMValueRef v = cg_convert(c, cg_eval(c, &x, n->value), r.in, r.ad), b = a, ia = no;
    combine(c, &r, &b, &ia, v, no);
    a = sel(c, valid[s], b, a);
  }
  a = rg_team_reduce(c, &r, a, T, tid);
  run->slot = 0;
  for (int j = 0; j < g->nrow; j++) x.iv[g->row[k][j]] = no;
  LLVMValueRef acc = var(c, r.t, a), idx = var(c, c->i64, no);
  LLVMValueRef v = finish(c, &r, &x, acc, idx, E);
  run->cache[sid * V] = stored_value(c, v, bt);
  if (!g->store_needed[k]) return;
  if_then(c, LLVMBuildICmp(c->b, LLVMIntEQ, lt, no, ""), &join);
  cg_store_el(c, v, cg_address(c, &x, &n->store, n->dtype, n->rank), n->dtype);
  end_if(c, join);
}

/* Tier (T, V): the rows grid-stride, CU_BLOCK / T per block; returns. */
static void rg_tier(Cg *c, RgGroup *g, LLVMValueRef **rts, int T, int V, bool vec, LLVMValueRef E) {
  LLVMBuilderRef b = c->b;
  int R = CU_BLOCK / T;
  LLVMValueRef tid = LLVMBuildZExt(b, cu_sreg(c, "tid.x"), c->i64, "");
  LLVMValueRef lt = LLVMBuildAnd(b, tid, i64c(c, T - 1), ""), team = LLVMBuildLShr(b, tid, i64c(c, __builtin_ctz((unsigned)T)), "");
  LLVMValueRef rows = cu_outer_product(c, g->first, 0, g->shared);
  LLVMValueRef ctaid = LLVMBuildZExt(b, cu_sreg(c, "ctaid.x"), c->i64, "");
  LLVMValueRef nct = LLVMBuildZExt(b, cu_sreg(c, "nctaid.x"), c->i64, "");
  /* the slots' positions in the row, the same for every row */
  LLVMValueRef *valid = arena_alloc(c->m->arena, sizeof *valid * (size_t)V);
  LLVMValueRef **pos = arena_alloc(c->m->arena, sizeof *pos * (size_t)V);
  LLVMValueRef ext32[MAXL];
  for (int j = 0; j < g->nrow; j++) ext32[j] = LLVMBuildTrunc(b, cg_sym_val(c, g->ext[j]), c->i32, "");
  /* slot s is at e = lt + s * T, in the row when s * T < E - lt (E <=
   * 4096 here: i32); the vector variant's at e = 4 (lt + c T) + w for
   * s = 4 c + w, in the row when 4 c T < E - 4 lt (E a multiple of 4) */
  int W = vec ? 4 : 1;
  LLVMValueRef lw = LLVMBuildMul(b, lt, i64c(c, W), "");
  LLVMValueRef left = LLVMBuildTrunc(b, LLVMBuildSub(b, E, lw, ""), c->i32, "");
  for (int s = 0; s < V; s++) {
    long long at = (long long)(s / W) * T * W;
    LLVMValueRef e = LLVMBuildAdd(b, lw, i64c(c, at + s % W), "");
    valid[s] = LLVMBuildICmp(b, LLVMIntSGT, left, i32c(c, at), "");
    pos[s] = arena_alloc(c->m->arena, sizeof **pos * (size_t)(g->nrow + 1));
    if (g->nrow == 1) {
      pos[s][0] = e;
      continue;
    }
    LLVMValueRef e32 = LLVMBuildTrunc(b, e, c->i32, "");
    for (int j = g->nrow - 1; j >= 0; j--) { /* e < 2^31: 32-bit division */
      LLVMValueRef q = j ? LLVMBuildURem(b, e32, ext32[j], "") : e32;
      pos[s][j] = LLVMBuildZExt(b, q, c->i64, "");
      if (j) e32 = LLVMBuildUDiv(b, e32, ext32[j], "");
    }
  }
  CuLoop l;
  LLVMValueRef row = cu_loop_open(c, &l, LLVMBuildAdd(b, LLVMBuildMul(b, ctaid, i64c(c, R), ""), team, ""),
                                  rows, LLVMBuildMul(b, nct, i64c(c, R), ""));
  LLVMValueRef ivs[MAXL];
  cu_split_rowmajor(c, row, g->first->shape, g->shared, ivs);
  RgRun run = {.g = g, .V = V, .valid = valid, .vec = vec};
  run.cache = arena_alloc(c->m->arena, sizeof *run.cache * (size_t)(g->ncls * V + 1));
  memset(run.cache, 0, sizeof *run.cache * (size_t)(g->ncls * V + 1));
  c->load_hook = rg_load;
  c->load_data = &run;
  for (int k = 0; k < g->n; k++) rg_member(c, &run, k, rts, ivs, pos, valid, E, T, tid, lt);
  c->load_hook = NULL;
  c->load_data = NULL;
  cu_loop_close(c, &l);
  LLVMBuildRetVoid(b);
}

/* The tiers of an eligible group, chosen by row length; leaves the
 * builder where the general kernel goes. */
static void rg_dispatch(Cg *c, RgGroup *g, LLVMValueRef **rts) {
  LLVMValueRef E = rg_row_len(c, g), t = rg_tier_of(c, E);
  bool vec = rg_has_vec(g);
  /* one variant per group (each tier is large straight-line code: the
   * driver's JIT time grows faster than its size): the vector one when
   * some access can use it, rows it does not fit taking the general kernel */
  if (vec) t = sel(c, rg_vec_ok(c, g), t, i32c(c, RG_NT));
  LLVMBasicBlockRef general = block(c, "rows_general");
  LLVMValueRef sw = LLVMBuildSwitch(c->b, t, general, RG_NT);
  for (int i = 0; i < RG_NT; i++) {
    LLVMBasicBlockRef bb = block(c, "rows_tier");
    LLVMAddCase(sw, i32c(c, i), bb);
    LLVMPositionBuilderAtEnd(c->b, bb);
    rg_tier(c, g, rts, RG_TIERS[i].T, RG_TIERS[i].V, vec, E);
  }
  LLVMPositionBuilderAtEnd(c->b, general);
}

void cu_emit_group_kernel(Cg *c, const LfNest *first, LLVMValueRef fn) {
  LLVMValueRef *rts[64];
  if (c->k->nresults > 64) ICE("more than 64 results");
  cu_unpack(c, fn, rts);
  RgGroup *g = arena_alloc(c->m->arena, sizeof *g);
  if (rg_analyze(c, first, g)) rg_dispatch(c, g, rts);
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
  else if (kind_of(c, n) == SPLIT_DYN) {
    LLVMBasicBlockRef few = block(c, "split"), many = block(c, "warps"), done = block(c, "reduced");
    LLVMBuildCondBr(c->b, cu_split_used(c, n), few, many);
    LLVMPositionBuilderAtEnd(c->b, few);
    NestCtx y = x;
    emit_split(c, n, &y, partials_param(c, fn));
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, many);
    emit_reduction(c, n, &x, p.group);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
  } else if (kind_of(c, n) != SPLIT_NONE) {
    emit_split(c, n, &x, partials_param(c, fn));
  }
  else emit_reduction(c, n, &x, p.group);
  LLVMBuildRetVoid(c->b);
}
