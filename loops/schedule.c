/* schedule.c — how a target runs a nest's loops, decided from the loop
 * form alone (loops.h LfSchedule): which adjacent loops collapse into one
 * loop, their order (the nest's memory order, LfNest.order), the tile of
 * a transposing nest, and how many outer loops form the parallel index;
 * the sizes come from the target's row of the parameter table.  No code
 * generator state: a backend reads the schedule and emits its loops
 * (cpu/vloops.c).
 * Needs: loops.h.  Used by: cpu/. */
#include <string.h>

#include "loops.h"

/* The parameter table: one row per target. */
static const LfTarget targets[] = {
  /* tile_copy: cpu/transpose.c's register blocks walk a tile of a
   * transposing copy one output cache line at a time; a tile of 256 keeps
   * each input row's run per tile at 1 KB of f32 while the lines in
   * flight stay in L1 */
  {.name = "cpu", .par_min_elems = 32768, .tile = 32, .tile_copy = 256,
   .gemm_mr = 6, .gemm_mr_512 = 12, .gemm_nv = 2, .gemm_mc_panels = 16, .gemm_kc = 256,
   .gemm_nc = 4096,
   /* K quads (cpu/gemm_quad.c): 6 x 4 zmm, a B panel row of 64 bytes
   * (one cache line of a row-major B per K index when packing); 12 x 2
   * ran 7 to 12% slower at 128 x 3072 x 3072 and 1024^3 on Zen 5 */
   .gemm_quad_mr_512 = 6, .gemm_quad_nv_512 = 4},
  /* CUDA (cuda/): the schedule's collapsed loops and memory order give
   * each kernel's thread index, over every outer loop (par_all: one
   * thread per outer iteration, grid-stride); tiles and GEMM blocks are
   * the backend's own (cuda/cuda.h) */
  {.name = "cuda", .par_min_elems = 256, .par_all = true, .tile = 32},
};

const LfTarget *lf_target_params(const char *name) {
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++)
    if (!strcmp(targets[i].name, name)) return &targets[i];
  ICE("no scheduling parameters for target '%s'", name);
}

/* The loop variable at depth i (outermost first). */
static int nest_loop_at(const LfNest *n, int i) { return n->order ? n->order[i] : i; }

const Sym *lf_loop_extent(const LfNest *n, int l) {
  return l < n->rank ? n->shape[l] : n->red[l - n->rank];
}

bool lf_acc_collapses(SymTab *st, const LfNest *n, const LfAccess *a, int oa, int ib) {
  if (a->lin_rank || a->rt_strides) return false;
  /* a dynamic term: its own loads must collapse (then it has the same
   * value at the collapsed index) */
  for (int t = 0; t < a->ndyn; t++)
    if (!lf_expr_collapses(st, n, a->dyn[t], oa, ib)) return false;
  const Sym *so = a->stride[oa], *si = a->stride[ib];
  if (sym_is(so, 0) && sym_is(si, 0)) return true;
  /* Parameters carry strides like W (their semantic geometry), dense
   * stores max(W, 1): both are right, since an extent of 0 leaves the
   * collapsed loop (extent[a] * 0) without iterations. */
  const Sym *eb = lf_loop_extent(n, ib);
  return so == sym_mul(st, si, sym_max(st, eb, sym_const(st, 1))) || so == sym_mul(st, si, eb);
}

bool lf_expr_collapses(SymTab *st, const LfNest *n, const LfExpr *e, int oa, int ib) {
  if (e->kind == LFE_ARANGE || e->kind == LFE_INDEX) return e->loop != oa && e->loop != ib;
  if (e->kind == LFE_LOAD) return lf_acc_collapses(st, n, &e->acc, oa, ib);
  for (int j = 0; j < e->nargs; j++)
    if (!lf_expr_collapses(st, n, e->args[j], oa, ib)) return false;
  return true;
}

/* Whether a nest's reduction-loop bounds and post expression (loops.h)
 * allow collapsing loops oa, ib: never a loop with its own bounds. */
static bool bounds_collapse(SymTab *st, const LfNest *n, int oa, int ib) {
  for (int j = 0; j < n->nred && n->red_lo; j++) {
    if (!n->red_lo[j]) continue;
    if (n->rank + j == oa || n->rank + j == ib || !lf_expr_collapses(st, n, n->red_lo[j], oa, ib) ||
        !lf_expr_collapses(st, n, n->red_hi[j], oa, ib))
      return false;
  }
  return !n->post || lf_expr_collapses(st, n, n->post, oa, ib);
}

static bool const_stride(const Sym *s, int64_t *v) { return sym_is_const(s, v); }

/* Whether some load of e reads along loop j with stride 1 but along the
 * innermost loop i with another non-zero stride (a transposing read). */
static bool transposing_load(const LfExpr *e, int j, int i) {
  if (e->kind == LFE_LOAD) {
    int64_t sj, si;
    if (e->acc.lin_rank || e->acc.rt_strides || e->acc.ndyn) return false;
    return const_stride(e->acc.stride[j], &sj) && sj == 1 &&
           !(const_stride(e->acc.stride[i], &si) && (si == 0 || si == 1));
  }
  for (int a = 0; a < e->nargs; a++)
    if (transposing_load(e->args[a], j, i)) return true;
  return false;
}

/* Whether n stores a load of its own dtype, unit-stride along loop i
 * (a transposing copy runs as register blocks: cpu/transpose.c). */
static bool plain_copy(const LfNest *n, int i) {
  const LfExpr *e = n->value;
  return e->kind == LFE_LOAD && e->dtype == n->dtype && !e->acc.lin_rank && !e->acc.rt_strides &&
         !e->acc.ndyn && !n->store.ndyn && sym_is(n->store.stride[i], 1) && n->nred == 0 && !n->post;
}

/* Transposes (a permute copy, NHWC -> NCHW preprocessing): the innermost
 * loop i stores with unit stride but a load is unit-stride along another
 * outer loop j.  Loop j then moves innermost, over tiles of t->tile (a
 * constant extent <= the tile: all of it, fully unrolled by LLVM), so
 * that the reads and the writes of a tile stay in cache and a small j
 * turns the strided reads into full interleave groups the vectorizer
 * handles. */
static void plan_tile(const LfNest *n, const LfTarget *t, LfSchedule *s) {
  s->tile_var = -1;
  if (n->reduce != OP_COUNT || s->nouter < 2 || s->n != s->nouter || n->store.rt_strides ||
      n->store.lin_rank)
    return;
  int i = lf_schedule_var(s, s->nouter - 1);
  int64_t ss;
  for (int k = 0; k < s->nouter - 1; k++) {
    int j = lf_schedule_var(s, k);
    if (const_stride(n->store.stride[j], &ss) && ss == 1) continue;
    if (!transposing_load(n->value, j, i)) continue;
    s->tile_var = j;
    s->tile_k = k;
    s->tile = t->tile;
    /* the extent: the product of the collapsed loops' (wrapping, as the
     * code computing it at run time) */
    uint64_t ext = 1;
    bool known = true;
    for (int m = 0; m < s->count[k]; m++) {
      int64_t e;
      if (sym_is_const(lf_loop_extent(n, s->order[s->first[k] + m]), &e)) ext *= (uint64_t)e;
      else known = false;
    }
    s->blocked = !(known && (int64_t)ext <= t->tile);
    if (s->blocked && t->tile_copy > 0 && plain_copy(n, i)) s->tile = t->tile_copy;
    return;
  }
}

int lf_schedule_var(const LfSchedule *s, int k) { return s->order[s->first[k] + s->count[k] - 1]; }

/* Collapses within the outer loops and within the reduction loops (the
 * store does not depend on the latter).  ARGMAX/ARGMIN count positions
 * linearly, so collapsing their loops keeps the same order. */
LfSchedule lf_schedule(SymTab *st, const LfNest *n, const LfTarget *t) {
  LfSchedule s = {.n = 0};
  int no = 0;
  for (int part = 0; part < 2; part++) {
    int lo = part ? n->rank : 0, hi = part ? n->rank + n->nred : n->rank, first = s.n;
    for (int i = lo; i < hi; i++) {
      int l = part ? i : nest_loop_at(n, i);
      if (s.n > first) {
        int prev = s.order[no - 1];
        if (lf_expr_collapses(st, n, n->value, prev, l) &&
            (part || lf_acc_collapses(st, n, &n->store, prev, l)) &&
            bounds_collapse(st, n, prev, l)) {
          s.order[no++] = l;
          s.count[s.n - 1]++;
          continue;
        }
      }
      s.first[s.n] = no;
      s.count[s.n++] = 1;
      s.order[no++] = l;
    }
    if (!part) s.nouter = s.n;
  }
  plan_tile(n, t, &s);
  int nouter = s.nouter - (s.tile_var >= 0 && !s.blocked); /* after tiling */
  s.par = t->par_all ? nouter : nouter >= 2 ? nouter - 1 : 1;
  return s;
}
