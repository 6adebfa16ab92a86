/* vloops.c — how the CPU runs one nest's loops: collapsing adjacent
 * loops with matching strides, memory order, the unit-stride inner loop,
 * tiles for transposing accesses (plan_vloops, plan_tile), odometer
 * stepping of a flattened range, 8 x 8 register-block transposes, and the
 * loops over a range of outer iterations (cpu_emit_nest_range).
 * Needs: cpu.h.  Used by: parallel.c. */
#include "cpu.h"

/* The loop variable at depth i (outermost first). */
static int nest_loop_at(const LfNest *n, int i) { return n->order ? n->order[i] : i; }

const Sym *cpu_loop_extent(const LfNest *n, int l) {
  return l < n->rank ? n->shape[l] : n->red[l - n->rank];
}

bool cpu_acc_collapses(Cg *c, const LfNest *n, const LfAccess *a, int oa, int ib) {
  if (a->lin_rank || a->rt_strides) return false;
  const Sym *so = a->stride[oa], *si = a->stride[ib];
  if (sym_is(so, 0) && sym_is(si, 0)) return true;
  /* Parameters carry strides like W (their semantic geometry), dense
   * stores max(W, 1): both are right, since an extent of 0 leaves the
   * collapsed loop (extent[a] * 0) without iterations. */
  SymTab *st = c->m->st;
  const Sym *eb = cpu_loop_extent(n, ib);
  return so == sym_mul(st, si, sym_max(st, eb, sym_const(st, 1))) || so == sym_mul(st, si, eb);
}

bool cpu_expr_collapses(Cg *c, const LfNest *n, const LfExpr *e, int oa, int ib) {
  if (e->kind == LFE_ARANGE || e->kind == LFE_INDEX) return e->loop != oa && e->loop != ib;
  if (e->kind == LFE_LOAD) return cpu_acc_collapses(c, n, &e->acc, oa, ib);
  for (int j = 0; j < e->nargs; j++)
    if (!cpu_expr_collapses(c, n, e->args[j], oa, ib)) return false;
  return true;
}

/* Whether a nest's reduction-loop bounds and post expression (loops.h)
 * allow collapsing loops oa, ib: never a loop with its own bounds. */
static bool bounds_collapse(Cg *c, const LfNest *n, int oa, int ib) {
  for (int j = 0; j < n->nred && n->red_lo; j++) {
    if (!n->red_lo[j]) continue;
    if (n->rank + j == oa || n->rank + j == ib || !cpu_expr_collapses(c, n, n->red_lo[j], oa, ib) ||
        !cpu_expr_collapses(c, n, n->red_hi[j], oa, ib))
      return false;
  }
  return !n->post || cpu_expr_collapses(c, n, n->post, oa, ib);
}

static bool const_stride(const Sym *s, int64_t *v) { return sym_is_const(s, v); }

/* Whether some load of e reads along loop j with stride 1 but along the
 * innermost loop i with another non-zero stride (a transposing read). */
static bool transposing_load(const LfExpr *e, int j, int i) {
  if (e->kind == LFE_LOAD) {
    int64_t sj, si;
    if (e->acc.lin_rank || e->acc.rt_strides) return false;
    return const_stride(e->acc.stride[j], &sj) && sj == 1 &&
           !(const_stride(e->acc.stride[i], &si) && (si == 0 || si == 1));
  }
  for (int a = 0; a < e->nargs; a++)
    if (transposing_load(e->args[a], j, i)) return true;
  return false;
}

/* Transposes (a permute copy, NHWC -> NCHW preprocessing): the innermost
 * loop i stores with unit stride but a load is unit-stride along another
 * outer loop j.  Loop j then moves innermost, over tiles of TILE (a
 * constant extent <= TILE: all of it, fully unrolled by LLVM), so that
 * the reads and the writes of a tile stay in cache and a small j turns
 * the strided reads into full interleave groups the vectorizer handles. */
static void plan_tile(Cg *c, const LfNest *n, VLoops *v) {
  v->tile_var = -1;
  if (n->reduce != OP_COUNT || v->nouter < 2 || v->n != v->nouter || n->store.rt_strides ||
      n->store.lin_rank)
    return;
  int i = v->var[v->nouter - 1];
  int64_t ss;
  for (int k = 0; k < v->nouter - 1; k++) {
    int j = v->var[k];
    if (const_stride(n->store.stride[j], &ss) && ss == 1) continue;
    if (!transposing_load(n->value, j, i)) continue;
    int64_t ext;
    v->tile_var = j;
    v->tile_ub = v->ub[k];
    v->blocked = !(LLVMIsConstant(v->ub[k]) && (ext = LLVMConstIntGetSExtValue(v->ub[k])) <= TILE);
    v->tile = TILE;
    if (v->blocked) {
      v->var[k] = VL_BLOCK;
      v->ub[k] = LLVMBuildUDiv(c->b, LLVMBuildAdd(c->b, v->ub[k], i64c(c, TILE - 1), ""),
                               i64c(c, TILE), "");
    } else {
      for (int m = k; m + 1 < v->n; m++) v->var[m] = v->var[m + 1], v->ub[m] = v->ub[m + 1];
      v->n--, v->nouter--;
    }
    return;
  }
}

/* Collapses within the outer loops and within the reduction loops (the
 * store does not depend on the latter).  ARGMAX/ARGMIN count positions
 * linearly, so collapsing their loops keeps the same order. */
void cpu_plan_vloops(Cg *c, const LfNest *n, NestCtx *x, VLoops *v) {
  v->n = 0;
  for (int part = 0; part < 2; part++) {
    int lo = part ? n->rank : 0, hi = part ? n->rank + n->nred : n->rank, first = v->n;
    for (int i = lo; i < hi; i++) {
      int l = part ? i : nest_loop_at(n, i);
      if (v->n > first) {
        int prev = v->var[v->n - 1];
        bool ok = cpu_expr_collapses(c, n, n->value, prev, l) &&
                  (part || cpu_acc_collapses(c, n, &n->store, prev, l)) &&
                  bounds_collapse(c, n, prev, l);
        if (ok) {
          x->iv[prev] = i64c(c, 0);
          v->var[v->n - 1] = l;
          v->ub[v->n - 1] = LLVMBuildMul(c->b, v->ub[v->n - 1], x->ub[l], "");
          if (part) { /* emit_reduce runs prev once and l over both */
            x->ub[l] = v->ub[v->n - 1];
            x->ub[prev] = i64c(c, 1);
          }
          continue;
        }
      }
      v->var[v->n] = l;
      v->ub[v->n++] = x->ub[l];
    }
    if (!part) v->nouter = v->n;
  }
  plan_tile(c, n, v);
}

/* Steps the odometer idx over virtual loops 0..p-1 by one. */
void cpu_odometer_step(Cg *c, const VLoops *vl, LLVMValueRef *idx, int p) {
  LLVMValueRef carry = i64c(c, 1);
  for (int j = p - 1; j >= 0; j--) {
    LLVMValueRef nv = LLVMBuildAdd(c->b, LLVMBuildLoad2(c->b, c->i64, idx[j], ""), carry, "");
    if (j == 0) {
      LLVMBuildStore(c->b, nv, idx[j]);
      break;
    }
    LLVMValueRef wrap = LLVMBuildICmp(c->b, LLVMIntEQ, nv, vl->ub[j], "");
    LLVMBuildStore(c->b, sel(c, wrap, i64c(c, 0), nv), idx[j]);
    carry = LLVMBuildZExt(c->b, wrap, c->i64, "");
  }
}

/* ---- transposing copies in 8 x 8 register blocks ----------------------------
 * A tiled nest (plan_tile) whose value is a plain load of its own dtype
 * is a transpose: along the innermost loop i the store is unit-stride and
 * the load strided; along the tile loop j the load is unit-stride.  It
 * runs as 8 x 8 blocks: eight vector loads along j (rows i0..i0+7),
 * a transpose in registers (three rounds of shuffles), eight vector
 * stores along i; the edges of i and of the tile go element by element. */
#define TB 8

/* Whether n, planned as vl with p parallel loops, takes the block path. */
static bool transpose_blocks(const LfNest *n, const VLoops *vl, int p) {
  if (vl->tile_var < 0 || p >= vl->nouter || vl->var[vl->nouter - 1] < 0) return false;
  const LfExpr *e = n->value;
  if (n->reduce != OP_COUNT || e->kind != LFE_LOAD || e->dtype != n->dtype || e->acc.lin_rank ||
      e->acc.rt_strides || n->store.rt_strides || n->store.lin_rank)
    return false;
  int i = vl->var[vl->nouter - 1], j = vl->tile_var;
  int64_t ext;
  if (!vl->blocked && (!LLVMIsConstant(vl->tile_ub) ||
                       (ext = LLVMConstIntGetSExtValue(vl->tile_ub)) < TB))
    return false;
  return sym_is(n->store.stride[i], 1) && sym_is(e->acc.stride[j], 1);
}

static LLVMValueRef shuffle8(Cg *c, LLVMValueRef a, LLVMValueRef b, const int *m) {
  LLVMValueRef mask[8];
  for (int k = 0; k < 8; k++) mask[k] = i32c(c, m[k]);
  return LLVMBuildShuffleVector(c->b, a, b, LLVMConstVector(mask, 8), "");
}

/* r[0..7] = the columns of the 8 x 8 block whose rows are r[0..7]. */
static void transpose8(Cg *c, LLVMValueRef *r) {
  static const int lo[8] = {0, 8, 1, 9, 4, 12, 5, 13}, hi[8] = {2, 10, 3, 11, 6, 14, 7, 15};
  static const int q0[8] = {0, 1, 8, 9, 4, 5, 12, 13}, q1[8] = {2, 3, 10, 11, 6, 7, 14, 15};
  static const int h0[8] = {0, 1, 2, 3, 8, 9, 10, 11}, h1[8] = {4, 5, 6, 7, 12, 13, 14, 15};
  LLVMValueRef t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    t[k] = shuffle8(c, r[k], r[k + 1], lo);
    t[k + 1] = shuffle8(c, r[k], r[k + 1], hi);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = shuffle8(c, t[k], t[k + 2], q0);
    u[k + 1] = shuffle8(c, t[k], t[k + 2], q1);
    u[k + 2] = shuffle8(c, t[k + 1], t[k + 3], q0);
    u[k + 3] = shuffle8(c, t[k + 1], t[k + 3], q1);
  }
  for (int k = 0; k < 4; k++) {
    r[k] = shuffle8(c, u[k], u[k + 4], h0);
    r[k + 4] = shuffle8(c, u[k], u[k + 4], h1);
  }
}

/* One element at the current loop variables (the scalar edges). */
static void copy_element(Cg *c, NestCtx *x, const LfNest *n) {
  LLVMValueRef v = cg_eval(c, x, n->value);
  cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
}

/* The innermost loop i over [0, iub) and the tile loop j over [t0, t1),
 * in blocks (transpose_blocks), the outer loop variables already set. */
static void emit_transpose_blocks(Cg *c, const LfNest *n, NestCtx *x, int i, int j,
                                  LLVMValueRef iub, LLVMValueRef t0, LLVMValueRef t1) {
  LLVMTypeRef et = cg_storage_type(c, n->dtype), vt = LLVMVectorType(et, TB);
  unsigned align = (unsigned)dtype_size(n->dtype);
  x->iv[i] = x->iv[j] = i64c(c, 0);
  LLVMValueRef src = cg_address(c, x, &n->value->acc, n->dtype, n->rank);
  LLVMValueRef dst = cg_address(c, x, &n->store, n->dtype, n->rank);
  LLVMValueRef si = cg_sym_val(c, n->value->acc.stride[i]), sj = cg_sym_val(c, n->store.stride[j]);
  LLVMValueRef k8 = i64c(c, TB), ifull = LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, iub, k8, ""), k8, "");
  LLVMValueRef jn = LLVMBuildSub(c->b, t1, t0, "");
  LLVMValueRef jfull = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, LLVMBuildSDiv(c->b, jn, k8, ""), k8, ""), "");
  LLVMValueRef i0 = LLVMBuildMul(c->b, cg_open_loop(c, LLVMBuildSDiv(c->b, iub, k8, "")), k8, "");
  LLVMValueRef j0 = LLVMBuildAdd(c->b, t0, LLVMBuildMul(c->b, cg_open_loop(c, LLVMBuildSDiv(c->b, jn, k8, "")), k8, ""), "");
  LLVMValueRef r[TB];
  for (int k = 0; k < TB; k++) {
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, i0, i64c(c, k), ""), si, ""), j0, "");
    r[k] = LLVMBuildLoad2(c->b, vt, LLVMBuildGEP2(c->b, et, src, &off, 1, ""), "");
    LLVMSetAlignment(r[k], align);
  }
  transpose8(c, r);
  for (int k = 0; k < TB; k++) {
    LLVMValueRef off = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, LLVMBuildAdd(c->b, j0, i64c(c, k), ""), sj, ""), i0, "");
    LLVMSetAlignment(LLVMBuildStore(c->b, r[k], LLVMBuildGEP2(c->b, et, dst, &off, 1, "")), align);
  }
  cg_close_loop(c);
  /* the tile's last columns for these eight rows */
  x->iv[j] = cg_open_loop_from(c, jfull, t1);
  x->iv[i] = cg_open_loop_from(c, i0, LLVMBuildAdd(c->b, i0, k8, ""));
  copy_element(c, x, n);
  cg_close_loop(c);
  cg_close_loop(c);
  cg_close_loop(c);
  /* the last rows */
  x->iv[i] = cg_open_loop_from(c, ifull, iub);
  x->iv[j] = cg_open_loop_from(c, t0, t1);
  copy_element(c, x, n);
  cg_close_loop(c);
  cg_close_loop(c);
}

/* Emits the loops and body of n for parallel iterations [lo, hi) of the
 * first p virtual loops. */
void cpu_emit_nest_range(Cg *c, const LfNest *n, NestCtx *x, const VLoops *vl,
                            LLVMValueRef lo, LLVMValueRef hi, int p) {
  LLVMValueRef idx[MAXL], blk = NULL;
  if (p == 1) {
    LLVMValueRef iv = cg_open_loop_from(c, lo, hi);
    if (vl->var[0] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[0]] = iv;
  } else {
    LLVMValueRef rest = lo;
    for (int j = p - 1; j >= 0; j--) {
      idx[j] = cg_entry_alloca(c, c->i64, NULL);
      LLVMValueRef ub = vl->ub[j];
      LLVMBuildStore(c->b, j ? LLVMBuildURem(c->b, rest, ub, "") : rest, idx[j]);
      if (j) rest = LLVMBuildUDiv(c->b, rest, ub, "");
    }
    cg_open_loop_from(c, lo, hi);
    for (int j = 0; j < p; j++) {
      LLVMValueRef iv = LLVMBuildLoad2(c->b, c->i64, idx[j], "");
      if (vl->var[j] == VL_BLOCK) blk = iv;
      else x->iv[vl->var[j]] = iv;
    }
  }
  bool blocks = transpose_blocks(n, vl, p);
  int nopen = blocks ? vl->nouter - 1 : vl->nouter; /* blocks: i is theirs */
  for (int i = p; i < nopen; i++) {
    LLVMValueRef iv = cg_open_loop(c, vl->ub[i]);
    if (vl->var[i] == VL_BLOCK) blk = iv;
    else x->iv[vl->var[i]] = iv;
  }
  LLVMValueRef t0 = i64c(c, 0), t1 = vl->tile_ub;
  if (vl->tile_var >= 0 && vl->blocked) {
    t0 = LLVMBuildMul(c->b, blk, i64c(c, vl->tile), "");
    t1 = cg_smin(c, LLVMBuildAdd(c->b, t0, i64c(c, vl->tile), ""), vl->tile_ub, false);
  }
  if (blocks) {
    emit_transpose_blocks(c, n, x, vl->var[vl->nouter - 1], vl->tile_var,
                          vl->ub[vl->nouter - 1], t0, t1);
  } else {
    if (vl->tile_var >= 0) x->iv[vl->tile_var] = cg_open_loop_from(c, t0, t1);
    LLVMValueRef v = n->reduce == OP_COUNT ? cg_eval(c, x, n->value) : cpu_emit_reduce(c, x);
    cg_store_el(c, v, cg_address(c, x, &n->store, n->dtype, n->rank), n->dtype);
    if (vl->tile_var >= 0) cg_close_loop(c);
  }
  for (int i = p; i < nopen; i++) cg_close_loop(c);
  if (p > 1) cpu_odometer_step(c, vl, idx, p);
  cg_close_loop(c);
}
