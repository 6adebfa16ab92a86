/* geometry.c — PyTorch's strided-tensor rules over symbolic sizes
 * (spec/pytorch-semantics.md §1–§7), as declared in geometry.h.
 *
 * Needs: sym.h (all arithmetic goes through sym_*; equal expressions are
 * pointer-equal), ir.h (run-time checks via ir_add_check), an arena for
 * results and messages.  Produces result geometries and error messages.
 *
 * Symbols are decided for the generic case: a non-constant size is neither
 * 0 nor 1.  Two kinds of comparison are used:
 *  - exact: pointer equality, or a constant difference (prove_le);
 *  - generic: the pure predicates (is_contiguous, ...) have no SymTab, so
 *    they compare expressions numerically at a few assignments of the
 *    variables (all >= 2); a relation holds only when it holds at every
 *    assignment, otherwise it is "unknown" and the conservative answer is
 *    taken.  The same comparison orders strides when sorting dims.
 * Facts that depend on a symbol's value and that PyTorch checks at run time
 * become IrChecks on the context's kernel (none when c->m is NULL); so do
 * generic decisions that would change the program's shapes where a symbol
 * is 1 (squeeze() keeping a symbolic dim), and equalities of sizes written
 * two ways that symprove cannot decide (geom_same_size). */
#include "geometry.h"

#include <string.h>

/* ---- small helpers -------------------------------------------------- */

static const Sym *K(GeomCtx *c, int64_t v) { return sym_const(c->st, v); }
static const Sym *mul(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_mul(c->st, a, b);
}
static const Sym *add(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_add(c->st, a, b);
}
static const Sym *sub(GeomCtx *c, const Sym *a, const Sym *b) {
  return sym_sub(c->st, a, b);
}

static const Sym **syms_new(GeomCtx *c, int n) {
  return arena_alloc(c->arena, sizeof(const Sym *) * (size_t)(n > 0 ? n : 1));
}

/* Builds *out from freshly allocated arrays (so out may alias the input). */
static void geom_set(Geom *out, int rank, const Sym **shape,
                     const Sym **stride, const Sym *offset) {
  out->rank = rank;
  out->shape = shape;
  out->stride = stride;
  out->offset = offset;
}

static void geom_copy(GeomCtx *c, const Geom *in, Geom *out) {
  const Sym **sh = syms_new(c, in->rank), **st = syms_new(c, in->rank);
  for (int d = 0; d < in->rank; d++) {
    sh[d] = in->shape[d];
    st[d] = in->stride[d];
  }
  geom_set(out, in->rank, sh, st, in->offset);
}

static const char *S(GeomCtx *c, const Sym *s) { return sym_str(c->arena, s); }

static const char *shp(GeomCtx *c, const Geom *g) {
  return geom_shape_str(c->arena, g->shape, g->rank);
}
static const char *strd(GeomCtx *c, const Geom *g) {
  return geom_stride_str(c->arena, g->stride, g->rank);
}

static bool is_const(const Sym *s) {
  int64_t v;
  return sym_is_const(s, &v);
}

static bool has_zero(const Sym *const *shape, int n) {
  for (int i = 0; i < n; i++)
    if (sym_is(shape[i], 0)) return true;
  return false;
}

/* ---- exact reasoning (with a SymTab) -------------------------------- */

typedef enum Tri { T_NO, T_YES, T_UNKNOWN } Tri;

/* Variables stand for sizes and strides, so they are never negative. */
static Tri prove_nonneg(const Sym *x) {
  int64_t v;
  int id;
  if (sym_is_const(x, &v)) return v >= 0 ? T_YES : T_NO;
  if (sym_is_var(x, &id)) return T_YES;
  return T_UNKNOWN;
}

static Tri prove_le(GeomCtx *c, const Sym *a, const Sym *b) {
  if (a == b) return T_YES;
  return prove_nonneg(sub(c, b, a));
}

static Tri prove_lt(GeomCtx *c, const Sym *a, const Sym *b) {
  return prove_le(c, add(c, a, K(c, 1)), b);
}

/* min/max folded when the order is provable, else an opaque atom. */
static const Sym *smin(GeomCtx *c, const Sym *a, const Sym *b) {
  if (prove_le(c, a, b) == T_YES) return a;
  if (prove_le(c, b, a) == T_YES) return b;
  return sym_min(c->st, a, b);
}
static const Sym *smax(GeomCtx *c, const Sym *a, const Sym *b) {
  if (prove_le(c, a, b) == T_YES) return b;
  if (prove_le(c, b, a) == T_YES) return a;
  return sym_max(c->st, a, b);
}

/* Records `lhs op rhs` as a run-time check unless it is provable; returns
 * false when it is provably violated (the caller reports the error). */
static bool need(GeomCtx *c, const Sym *lhs, IrCheckOp op, const Sym *rhs,
                 const char *msg) {
  IR_ASSERT(op == CHK_LT || op == CHK_LE);
  Tri t = op == CHK_LT ? prove_lt(c, lhs, rhs) : prove_le(c, lhs, rhs);
  if (t == T_NO) return false;
  if (t == T_UNKNOWN && c->m && c->k) {
    IrCheck chk = {.lhs = lhs, .rhs = rhs, .op = op, .msg = msg, .loc = c->loc};
    ir_add_check(c->m, c->k, &chk);
  }
  return true;
}

/* ---- size equality under the entry checks' facts ---------------------- */

/* Facts the context kernel's entry checks establish so far (variable
 * ranges, see symprove.h); all variables in [0, +inf) without a kernel. */
static SymFacts geom_facts(GeomCtx *c) {
  static const SymRel rel[] = {[CHK_EQ] = SYM_EQ, [CHK_LE] = SYM_LE, [CHK_LT] = SYM_LT};
  int n = c->k ? c->k->nsyms : 0;
  for (int i = 0; c->k && i < c->k->nchecks; i++) {
    if (sym_max_var(c->k->checks[i].lhs) > n) n = sym_max_var(c->k->checks[i].lhs);
    if (sym_max_var(c->k->checks[i].rhs) > n) n = sym_max_var(c->k->checks[i].rhs);
  }
  SymFacts f = sym_facts_new(c->arena, n);
  for (int i = 0; c->k && i < c->k->nchecks; i++) {
    const IrCheck *ck = &c->k->checks[i];
    sym_facts_add(c->st, &f, ck->lhs, rel[ck->op], ck->rhs);
  }
  return f;
}

static bool has_check(const IrKernel *k, const Sym *a, IrCheckOp op, const Sym *b) {
  for (int i = 0; i < k->nchecks; i++) {
    const IrCheck *ck = &k->checks[i];
    if (ck->op == op && ((ck->lhs == a && ck->rhs == b) ||
                         (op == CHK_EQ && ck->lhs == b && ck->rhs == a)))
      return true;
  }
  return false;
}

bool geom_same_size(GeomCtx *c, const Sym *a, const Sym *b, const char *msg) {
  if (a == b) return true;
  SymFacts f = geom_facts(c);
  SymTruth t = sym_decide(c->st, &f, a, SYM_EQ, b);
  if (t != SYM_UNKNOWN) return t == SYM_YES;
  if (!c->m || !c->k || sym_differ_generically(&f, a, b)) return false;
  if (!has_check(c->k, a, CHK_EQ, b)) {
    IrCheck chk = {.lhs = a, .rhs = b, .op = CHK_EQ, .msg = msg, .loc = c->loc};
    ir_add_check(c->m, c->k, &chk);
  }
  return true;
}

const char *geom_size_text(GeomCtx *c, const Sym *s) {
  SymFacts f = geom_facts(c);
  for (int i = 0; i < f.n; i++)
    if (f.lo[i] < 2 && f.hi[i] >= 2) f.lo[i] = 2;
  const char *raw = S(c, s), *gen = S(c, sym_simplify(c->st, &f, s));
  if (strlen(gen) >= strlen(raw)) return raw;
  return arena_printf(c->arena, "%s (%s for sizes >= 2)", raw, gen);
}

/* ---- generic numeric comparison (no SymTab needed) ------------------ */

enum { NPTS = 3, MAXVARS = 256 };

/* A Sym's values at NPTS assignments of the variables: all 2 (the
 * smallest generic size), increasing with the id, decreasing with it, so
 * that distinct variables compare both ways. */
typedef struct Num {
  bool ok;
  int64_t v[NPTS];
} Num;

static int64_t env_value(int pt, int id) {
  switch (pt) {
  case 0: return 2;
  case 1: return 3 + id;
  default: return 3 + MAXVARS - id;
  }
}

static Num num_of(const Sym *s) {
  Num n = {.ok = true};
  int nv = sym_max_var(s);
  if (nv > MAXVARS) return (Num){.ok = false};
  int64_t env[MAXVARS];
  for (int pt = 0; pt < NPTS; pt++) {
    for (int i = 0; i < nv; i++) env[i] = env_value(pt, i);
    if (!sym_eval(s, env, &n.v[pt])) return (Num){.ok = false};
  }
  return n;
}

static Num num_const(int64_t v) {
  Num n = {.ok = true};
  for (int pt = 0; pt < NPTS; pt++) n.v[pt] = v;
  return n;
}

static Num num_mul(Num a, Num b) {
  if (!a.ok || !b.ok) return (Num){.ok = false};
  Num r = {.ok = true};
  for (int pt = 0; pt < NPTS; pt++) {
    int64_t x = a.v[pt], y = b.v[pt];
    if (x != 0 && (y > INT64_MAX / (x < 0 ? -x : x) ||
                   y < -(INT64_MAX / (x < 0 ? -x : x))))
      return (Num){.ok = false};
    r.v[pt] = x * y;
  }
  return r;
}

typedef enum Cmp { C_LT, C_EQ, C_GT, C_UNKNOWN } Cmp;

static Cmp num_cmp(Num a, Num b) {
  if (!a.ok || !b.ok) return C_UNKNOWN;
  int lt = 0, eq = 0, gt = 0;
  for (int pt = 0; pt < NPTS; pt++) {
    lt += a.v[pt] < b.v[pt];
    eq += a.v[pt] == b.v[pt];
    gt += a.v[pt] > b.v[pt];
  }
  return lt == NPTS ? C_LT : eq == NPTS ? C_EQ : gt == NPTS ? C_GT : C_UNKNOWN;
}

static Cmp gcmp(const Sym *a, const Sym *b) {
  if (a == b) return C_EQ;
  return num_cmp(num_of(a), num_of(b));
}

static bool num_eq(const Sym *s, Num n) {
  return num_cmp(num_of(s), n) == C_EQ;
}

/* A size that is generically >= 2 (a symbol, or a constant >= 2). */
static bool size_lt2(const Sym *s) {
  int64_t v;
  return sym_is_const(s, &v) && v < 2;
}

/* ---- printing -------------------------------------------------------- */

static char *list_str(Arena *a, const Sym *const *v, int n, const char *open,
                      const char *close) {
  char *s = arena_strdup(a, open);
  for (int i = 0; i < n; i++)
    s = arena_printf(a, "%s%s%s", s, i ? ", " : "", sym_str(a, v[i]));
  return arena_printf(a, "%s%s", s, close);
}

char *geom_shape_str(Arena *a, const Sym *const *v, int n) {
  return list_str(a, v, n, "[", "]");
}

char *geom_stride_str(Arena *a, const Sym *const *v, int n) {
  return list_str(a, v, n, "[", "]");
}

static char *ints_str(Arena *a, const int64_t *v, int n) {
  char *s = arena_strdup(a, "[");
  for (int i = 0; i < n; i++)
    s = arena_printf(a, "%s%s%lld", s, i ? ", " : "", (long long)v[i]);
  return arena_printf(a, "%s]", s);
}

/* ---- allocation strides and layout predicates (§3) ------------------- */

void geom_contiguous(GeomCtx *c, int rank, const Sym *const *shape,
                     Geom *out) {
  const Sym **sh = syms_new(c, rank), **st = syms_new(c, rank);
  const Sym *acc = K(c, 1);
  for (int d = rank - 1; d >= 0; d--) {
    sh[d] = shape[d];
    st[d] = acc;
    /* max(size, 1): only a literal 0 differs from the size itself. */
    if (!sym_is(shape[d], 0)) acc = mul(c, acc, shape[d]);
  }
  geom_set(out, rank, sh, st, K(c, 0));
}

void geom_channels_last(GeomCtx *c, const Sym *const *shape, Geom *out) {
  const Sym **sh = syms_new(c, 4), **st = syms_new(c, 4);
  for (int d = 0; d < 4; d++) sh[d] = shape[d];
  st[1] = K(c, 1);
  st[3] = shape[1];
  st[2] = mul(c, shape[3], shape[1]);
  st[0] = mul(c, st[2], shape[2]);
  geom_set(out, 4, sh, st, K(c, 0));
}

/* Walks dims in `order`, skipping size-1 dims, requiring dense strides. */
static bool dense_in_order(const Geom *g, const int *order, int n) {
  Num expected = num_const(1);
  for (int i = 0; i < n; i++) {
    int d = order[i];
    if (sym_is(g->shape[d], 1)) continue;
    if (!num_eq(g->stride[d], expected)) return false;
    expected = num_mul(expected, num_of(g->shape[d]));
  }
  return true;
}

bool geom_is_contiguous(const Geom *g) {
  if (has_zero(g->shape, g->rank)) return true;
  int order[64];
  if (g->rank > 64) return false;
  for (int i = 0; i < g->rank; i++) order[i] = g->rank - 1 - i;
  return dense_in_order(g, order, g->rank);
}

bool geom_is_channels_last(const Geom *g) {
  static const int order[4] = {1, 3, 2, 0};
  return g->rank == 4 && dense_in_order(g, order, 4);
}

bool geom_suggests_channels_last(const Geom *g) {
  static const int order[4] = {1, 3, 2, 0};
  if (g->rank != 4 || sym_is(g->stride[1], 0)) return false;
  Num min = num_const(0);
  for (int i = 0; i < 4; i++) {
    int d = order[i];
    if (sym_is(g->shape[d], 0)) return false;
    Cmp cs = num_cmp(num_of(g->stride[d]), min);
    if (cs != C_GT && cs != C_EQ) return false; /* less, or not provably not */
    if (d == 0 && num_cmp(min, num_of(g->stride[1])) == C_EQ) return false;
    Num sz = sym_is(g->shape[d], 1) ? num_const(1) : num_of(g->shape[d]);
    min = num_mul(num_of(g->stride[d]), sz);
  }
  return true;
}

/* Sort dims by stride, size<2 dims last (is_non_overlapping_and_dense). */
static void sort_by_stride(const Geom *g, int *perm) {
  for (int i = 0; i < g->rank; i++) perm[i] = i;
  for (int i = 1; i < g->rank; i++) {
    for (int j = i; j > 0; j--) {
      int a = perm[j - 1], b = perm[j];
      bool b_first = size_lt2(g->shape[b])   ? false
                     : size_lt2(g->shape[a]) ? true
                     : gcmp(g->stride[b], g->stride[a]) == C_LT;
      if (!b_first) break;
      perm[j - 1] = b;
      perm[j] = a;
    }
  }
}

/* c10 sets the flag when contiguous in either format, else computes it. */
bool geom_is_dense(const Geom *g) {
  if (geom_is_contiguous(g) || geom_is_channels_last(g)) return true;
  if (g->rank == 1)
    return size_lt2(g->shape[0]) || sym_is(g->stride[0], 1);
  int perm[64];
  if (g->rank > 64) return false;
  sort_by_stride(g, perm);
  Num expected = num_const(1);
  for (int i = 0; i < g->rank; i++) {
    int d = perm[i];
    if (size_lt2(g->shape[d])) return true;
    if (!num_eq(g->stride[d], expected)) return false;
    expected = num_mul(expected, num_of(g->shape[d]));
  }
  return true;
}

/* ---- dims -------------------------------------------------------------- */

const char *geom_wrap_dim(GeomCtx *c, int64_t dim, int rank, int *out) {
  int64_t n = rank > 0 ? rank : 1; /* a 0-dim tensor wraps like rank 1 */
  if (dim < -n || dim >= n)
    return arena_printf(c->arena,
                        "dim %lld is out of range for a %d-dim tensor "
                        "(expected a dim in [%lld, %lld])",
                        (long long)dim, rank, (long long)-n,
                        (long long)(n - 1));
  *out = (int)(dim < 0 ? dim + n : dim);
  return NULL;
}

/* ---- view / reshape (§1, §2) ------------------------------------------- */

/* Replaces one -1 in sizes by numel / (product of the others). */
static const char *infer_size(GeomCtx *c, const Geom *in,
                              const Sym *const *sizes, int n,
                              const Sym **res) {
  const Sym *numel = sym_prod(c->st, in->shape, in->rank);
  const Sym *p = K(c, 1);
  int infer = -1;
  for (int i = 0; i < n; i++) {
    int64_t v;
    res[i] = sizes[i];
    if (sym_is(sizes[i], -1)) {
      if (infer >= 0) return "only one dimension can be inferred (-1)";
      infer = i;
    } else if (sym_is_const(sizes[i], &v) && v < 0) {
      return arena_printf(c->arena, "invalid size %lld in shape %s",
                          (long long)v, geom_shape_str(c->arena, sizes, n));
    } else {
      p = mul(c, p, sizes[i]);
    }
  }
  const char *want = geom_shape_str(c->arena, sizes, n);
  int64_t pv, nv;
  if (infer < 0) {
    if (p == numel) return NULL;
    return arena_printf(c->arena,
                        "shape %s is invalid for a tensor of %s elements "
                        "(shape %s); the sizes must multiply to %s",
                        want, S(c, numel), shp(c, in), S(c, numel));
  }
  if (sym_is(p, 0))
    return arena_printf(c->arena,
                        "cannot infer -1 in shape %s: the other sizes "
                        "multiply to 0, so any size would fit; give it "
                        "explicitly",
                        want);
  const Sym *q;
  if (sym_div_exact(c->st, numel, p, &q)) {
    res[infer] = q;
    return NULL;
  }
  if (sym_is_const(numel, &nv) && sym_is_const(p, &pv))
    return arena_printf(c->arena,
                        "shape %s is invalid for a tensor of %lld elements "
                        "(shape %s): %lld is not a multiple of %lld",
                        want, (long long)nv, shp(c, in), (long long)nv,
                        (long long)pv);
  return arena_printf(c->arena,
                      "cannot infer -1 in shape %s for a tensor of %s "
                      "elements (shape %s) symbolically; give the size "
                      "explicitly",
                      want, S(c, numel), shp(c, in));
}

/* computeStride's "consume while view_numel < chunk_numel": exact for
 * constants; for symbols, "not equal" (the generic case). */
static bool chunk_short(const Sym *view_numel, const Sym *chunk_numel) {
  int64_t a, b;
  if (sym_is_const(view_numel, &a) && sym_is_const(chunk_numel, &b))
    return a < b;
  return view_numel != chunk_numel;
}

/* Strides for a numel == 0 view: contiguous with max(size, 1). */
static void zero_numel_strides(GeomCtx *c, const Sym *const *shape, int n,
                               const Sym **st) {
  Geom g;
  geom_contiguous(c, n, shape, &g);
  for (int d = 0; d < n; d++) st[d] = g.stride[d];
}

/* PyTorch's computeStride: false when the view is impossible. */
static bool compute_stride(GeomCtx *c, const Geom *in, const Sym *const *ns,
                           int n, const Sym **st) {
  if (in->rank == 0) {
    for (int d = 0; d < n; d++) st[d] = K(c, 1);
    return true;
  }
  if (has_zero(in->shape, in->rank)) {
    if (sym_list_equal(in->shape, in->rank, ns, n))
      for (int d = 0; d < n; d++) st[d] = in->stride[d];
    else
      zero_numel_strides(c, ns, n, st);
    return true;
  }
  int view_d = n - 1;
  const Sym *base = in->stride[in->rank - 1];
  const Sym *chunk = K(c, 1), *view = K(c, 1);
  for (int d = in->rank - 1; d >= 0; d--) {
    chunk = mul(c, chunk, in->shape[d]);
    bool end = d == 0 || (!sym_is(in->shape[d - 1], 1) &&
                          in->stride[d - 1] != mul(c, chunk, base));
    if (!end) continue;
    while (view_d >= 0 && (chunk_short(view, chunk) || sym_is(ns[view_d], 1))) {
      st[view_d] = mul(c, view, base);
      view = mul(c, view, ns[view_d]);
      view_d--;
    }
    if (view != chunk) return false;
    if (d > 0) {
      base = in->stride[d - 1];
      chunk = K(c, 1);
      view = K(c, 1);
    }
  }
  return view_d == -1;
}

const char *geom_view(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                      int n, Geom *out) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  const char *err = infer_size(c, in, sizes, n, sh);
  if (err) return err;
  if (!compute_stride(c, in, sh, n, st))
    return arena_printf(c->arena,
                        "cannot view shape %s with strides %s as %s: its "
                        "dims are not contiguous in memory; use reshape() "
                        "to copy",
                        shp(c, in), strd(c, in),
                        geom_shape_str(c->arena, sh, n));
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

const char *geom_reshape(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                         int n, Geom *out, bool *is_view) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  const char *err = infer_size(c, in, sizes, n, sh);
  if (err) return err;
  *is_view = compute_stride(c, in, sh, n, st);
  if (*is_view)
    geom_set(out, n, sh, st, in->offset);
  else
    geom_contiguous(c, n, sh, out);
  return NULL;
}

/* ---- permutations (§4) ----------------------------------------------- */

const char *geom_permute(GeomCtx *c, const Geom *in, const int64_t *perm,
                         int n, Geom *out) {
  const char *bad = arena_printf(
      c->arena, "permute() needs a permutation of %d dims, got %s", in->rank,
      ints_str(c->arena, perm, n));
  if (n != in->rank) return bad;
  bool *seen = arena_alloc(c->arena, (size_t)(n > 0 ? n : 1));
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < n; i++) {
    int d = 0;
    const char *err = geom_wrap_dim(c, perm[i], in->rank, &d);
    if (err) return arena_printf(c->arena, "%s; %s", bad, err);
    if (seen[d]) return bad;
    seen[d] = true;
    sh[i] = in->shape[d];
    st[i] = in->stride[d];
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

const char *geom_transpose(GeomCtx *c, const Geom *in, int64_t a, int64_t b,
                           Geom *out) {
  int da = 0, db = 0;
  const char *err = geom_wrap_dim(c, a, in->rank, &da);
  if (!err) err = geom_wrap_dim(c, b, in->rank, &db);
  if (err) return err;
  geom_copy(c, in, out);
  if (in->rank == 0) return NULL;
  out->shape[da] = in->shape[db];
  out->shape[db] = in->shape[da];
  out->stride[da] = in->stride[db];
  out->stride[db] = in->stride[da];
  return NULL;
}

/* ---- expand (§4, PyTorch inferExpandGeometry) ------------------------- */

const char *geom_expand(GeomCtx *c, const Geom *in, const Sym *const *sizes,
                        int n, Geom *out) {
  const char *want = geom_shape_str(c->arena, sizes, n);
  if (n < in->rank)
    return arena_printf(c->arena,
                        "expand() needs at least %d sizes for a tensor of "
                        "shape %s, got %s",
                        in->rank, shp(c, in), want);
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = n - 1; i >= 0; i--) {
    int d = in->rank - n + i; /* the input's dim at i, or < 0 if new */
    const Sym *size = d >= 0 ? in->shape[d] : K(c, 1);
    const Sym *stride = d >= 0       ? in->stride[d]
                        : i == n - 1 ? K(c, 1)
                                     : mul(c, sh[i + 1], st[i + 1]);
    const Sym *target = sizes[i];
    int64_t v;
    if (sym_is(target, -1)) {
      if (d < 0)
        return arena_printf(c->arena,
                            "expand() to %s: -1 is not allowed for the new "
                            "leading dim %d; give its size",
                            want, i);
      target = size;
    } else if (sym_is_const(target, &v) && v < 0) {
      return arena_printf(c->arena, "expand() to %s: invalid size %lld", want,
                          (long long)v);
    }
    if (target != size && !sym_is(size, 1) &&
        geom_same_size(c, size, target,
                       arena_printf(c->arena,
                                    "the expanded size %s must match the "
                                    "existing size %s at dim %d (expanding "
                                    "shape %s to %s)",
                                    S(c, target), S(c, size), i, shp(c, in), want))) {
      size = target; /* the same size written two ways: no broadcast */
    } else if (target != size) {
      if (!sym_is(size, 1))
        return arena_printf(c->arena,
                            "the expanded size %s must match the existing "
                            "size %s at non-singleton dimension %d (expanding "
                            "shape %s to %s); only size-1 dims can expand",
                            S(c, target), S(c, size), i, shp(c, in), want);
      size = target;
      stride = K(c, 0);
    }
    sh[i] = size;
    st[i] = stride;
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* ---- unsqueeze / squeeze --------------------------------------------- */

const char *geom_unsqueeze(GeomCtx *c, const Geom *in, int64_t dim,
                           Geom *out) {
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank + 1, &d);
  if (err) return err;
  int n = in->rank + 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0, j = 0; i < n; i++) {
    if (i == d) continue;
    sh[i] = in->shape[j];
    st[i] = in->stride[j++];
  }
  sh[d] = K(c, 1);
  st[d] = d == in->rank ? K(c, 1) : mul(c, in->shape[d], in->stride[d]);
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* squeeze() keeps a dim whose size is not the literal 1; PyTorch decides
 * with the actual size and would drop it where it is 1, giving another
 * rank than the program's.  A rank cannot depend on the call, so such a
 * size must not be 1: an entry check `1 <= (size - 1)**2` (0 stays, as
 * in PyTorch), unless the facts give size >= 2 or size is constant. */
static void kept_not_one(GeomCtx *c, const Geom *in, int d) {
  const Sym *size = in->shape[d];
  if (is_const(size) || !c->m || !c->k) return;
  SymFacts f = geom_facts(c);
  if (sym_decide(c->st, &f, K(c, 2), SYM_LE, size) == SYM_YES) return;
  const Sym *m1 = sub(c, size, K(c, 1));
  const Sym *sq = mul(c, m1, m1);
  if (has_check(c->k, K(c, 1), CHK_LE, sq)) return;
  IrCheck chk = {
      .lhs = K(c, 1), .rhs = sq, .op = CHK_LE, .loc = c->loc,
      .msg = arena_printf(c->arena,
                          "squeeze(): dim %d of shape %s has size %s = 1 here; "
                          "PyTorch would drop it, so the result would not "
                          "have the rank this program was compiled for "
                          "(declare a dim that may be 1 as the literal 1)",
                          d, shp(c, in), S(c, size))};
  ir_add_check(c->m, c->k, &chk);
}

const char *geom_squeeze(GeomCtx *c, const Geom *in, const int64_t *dim,
                         Geom *out) {
  int only = -1;
  if (dim) {
    const char *err = geom_wrap_dim(c, *dim, in->rank, &only);
    if (err) return err;
    if (in->rank == 0 || !sym_is(in->shape[only], 1)) {
      if (in->rank > 0) kept_not_one(c, in, only);
      geom_copy(c, in, out);
      return NULL;
    }
  }
  for (int d = 0; !dim && d < in->rank; d++) kept_not_one(c, in, d);
  const Sym **sh = syms_new(c, in->rank), **st = syms_new(c, in->rank);
  int n = 0;
  for (int d = 0; d < in->rank; d++) {
    bool drop = dim ? d == only : sym_is(in->shape[d], 1);
    if (drop) continue;
    sh[n] = in->shape[d];
    st[n++] = in->stride[d];
  }
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* ---- slicing, narrow, select (§4) ------------------------------------ */

/* A bound is negative when constant and < 0, or generically negative
 * (like -N); negative bounds count from the end. */
static bool bound_negative(const Sym *b) {
  int64_t v;
  if (sym_is_const(b, &v)) return v < 0;
  return num_cmp(num_of(b), num_const(0)) == C_LT;
}

/* x clamped into [lo, hi] where lo <= hi is known; the upper bound is
 * tried first, so x >= hi gives hi even when x vs lo is unknown. */
static const Sym *clamp(GeomCtx *c, const Sym *x, const Sym *lo,
                        const Sym *hi) {
  if (prove_le(c, hi, x) == T_YES) return hi;
  if (prove_le(c, x, lo) == T_YES) return lo;
  return smin(c, smax(c, x, lo), hi);
}

/* PyTorch's slice clamping: start into [0, size], end into [start, size]. */
static void slice_bounds(GeomCtx *c, const Sym *size, const Sym *start,
                         const Sym *stop, const Sym **s0, const Sym **s1) {
  start = start ? start : K(c, 0);
  stop = stop ? stop : size;
  if (bound_negative(start)) start = add(c, start, size);
  if (bound_negative(stop)) stop = add(c, stop, size);
  *s0 = clamp(c, start, K(c, 0), size);
  *s1 = clamp(c, stop, *s0, size);
}

const char *geom_slice(GeomCtx *c, const Geom *in, int dim, const Sym *start,
                       const Sym *stop, const Sym *step, Geom *out) {
  if (in->rank == 0)
    return "cannot slice a 0-dim tensor; only [...] and [None] apply to it";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  step = step ? step : K(c, 1);
  int64_t sv;
  if (sym_is_const(step, &sv) && sv <= 0)
    return arena_printf(c->arena,
                        "slice step must be positive, got %lld (dim %d of "
                        "shape %s)",
                        (long long)sv, d, shp(c, in));
  need(c, K(c, 1), CHK_LE, step,
       arena_printf(c->arena, "slice step %s must be positive", S(c, step)));
  const Sym *s0, *s1;
  slice_bounds(c, in->shape[d], start, stop, &s0, &s1);
  geom_copy(c, in, out);
  const Sym *span = sub(c, s1, s0);
  out->shape[d] = sym_is(step, 1) ? span
                          : sym_floordiv(c->st, sub(c, add(c, span, step),
                                                    K(c, 1)),
                                         step);
  out->stride[d] = mul(c, in->stride[d], step);
  out->offset = add(c, in->offset, mul(c, s0, in->stride[d]));
  return NULL;
}

/* narrow()'s start range check and wrap; NULL or an error. */
static const char *narrow_start(GeomCtx *c, const Sym *size, int d,
                                const Sym **start) {
  const Sym *s = *start;
  const char *range = arena_printf(
      c->arena,
      "narrow(): start %s is out of range for dim %d of size %s (expected a "
      "start in [-%s, %s])",
      S(c, s), d, S(c, size), S(c, size), S(c, size));
  if (bound_negative(s)) {
    if (!need(c, sym_neg(c->st, s), CHK_LE, size, range)) return range;
    *start = add(c, s, size);
  } else if (!need(c, K(c, 0), CHK_LE, s, range) ||
             prove_le(c, s, size) == T_NO) {
    return range; /* start <= size at run time follows from the end check */
  }
  return NULL;
}

const char *geom_narrow(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *start, const Sym *length, Geom *out) {
  if (in->rank == 0) return "narrow() cannot be applied to a 0-dim tensor";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *size = in->shape[d];
  const char *lenmsg = arena_printf(
      c->arena, "narrow(): length %s must be non-negative", S(c, length));
  if (!need(c, K(c, 0), CHK_LE, length, lenmsg)) return lenmsg;
  err = narrow_start(c, size, d, &start);
  if (err) return err;
  const char *over = arena_printf(
      c->arena,
      "narrow(): start %s + length %s exceeds the size %s of dim %d (shape "
      "%s)",
      S(c, start), S(c, length), S(c, size), d, shp(c, in));
  if (!need(c, add(c, start, length), CHK_LE, size, over)) return over;
  geom_copy(c, in, out);
  out->shape[d] = length;
  out->offset = add(c, in->offset, mul(c, start, in->stride[d]));
  return NULL;
}

const char *geom_select(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *index, Geom *out) {
  if (in->rank == 0) return "select() cannot be applied to a 0-dim tensor";
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *size = in->shape[d];
  const char *range = arena_printf(
      c->arena,
      "index %s is out of range for dim %d of size %s (shape %s); valid "
      "indices are -%s to %s - 1",
      S(c, index), d, S(c, size), shp(c, in), S(c, size), S(c, size));
  if (bound_negative(index)) {
    if (!need(c, sym_neg(c->st, index), CHK_LE, size, range)) return range;
    index = add(c, index, size);
  } else {
    if (!need(c, K(c, 0), CHK_LE, index, range)) return range;
    if (!need(c, index, CHK_LT, size, range)) return range;
  }
  const Sym *off = add(c, in->offset, mul(c, index, in->stride[d]));
  const Sym **sh = syms_new(c, in->rank - 1), **st = syms_new(c, in->rank - 1);
  for (int i = 0, j = 0; i < in->rank; i++) {
    if (i == d) continue;
    sh[j] = in->shape[i];
    st[j++] = in->stride[i];
  }
  geom_set(out, in->rank - 1, sh, st, off);
  return NULL;
}

/* ---- diagonal, unfold, as_strided ------------------------------------- */

const char *geom_diagonal(GeomCtx *c, const Geom *in, int64_t offset,
                          int64_t dim1, int64_t dim2, Geom *out) {
  int d1 = 0, d2 = 0;
  const char *err = geom_wrap_dim(c, dim1, in->rank, &d1);
  if (!err) err = geom_wrap_dim(c, dim2, in->rank, &d2);
  if (err) return err;
  if (in->rank < 2) return "diagonal() needs a tensor of at least 2 dims";
  if (d1 == d2)
    return arena_printf(c->arena,
                        "diagonal() needs two different dims, got %d and %d",
                        d1, d2);
  const Sym *s1 = in->shape[d1], *s2 = in->shape[d2], *o = K(c, offset);
  const Sym *len = offset >= 0 ? smin(c, s1, sub(c, s2, o))
                               : smin(c, add(c, s1, o), s2);
  if (offset != 0) len = smax(c, len, K(c, 0)); /* sizes are never < 0 */
  const Sym *off = in->offset;
  if (!sym_is(len, 0)) /* PyTorch leaves the offset alone when empty */
    off = offset >= 0 ? add(c, off, mul(c, o, in->stride[d2]))
                      : sub(c, off, mul(c, o, in->stride[d1]));
  int n = in->rank - 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0, j = 0; i < in->rank; i++) {
    if (i == d1 || i == d2) continue;
    sh[j] = in->shape[i];
    st[j++] = in->stride[i];
  }
  sh[n - 1] = len;
  st[n - 1] = add(c, in->stride[d1], in->stride[d2]);
  geom_set(out, n, sh, st, off);
  return NULL;
}

const char *geom_unfold(GeomCtx *c, const Geom *in, int64_t dim,
                        const Sym *size, const Sym *step, Geom *out) {
  int d = 0;
  const char *err = geom_wrap_dim(c, dim, in->rank, &d);
  if (err) return err;
  const Sym *max = in->rank == 0 ? K(c, 1) : in->shape[d];
  const char *big = arena_printf(
      c->arena,
      "unfold(): size %s must be between 0 and the size %s of dim %d (shape "
      "%s)",
      S(c, size), S(c, max), d, shp(c, in));
  if (!need(c, K(c, 0), CHK_LE, size, big)) return big;
  if (!need(c, size, CHK_LE, max, big)) return big;
  const char *neg = arena_printf(
      c->arena, "unfold(): step %s must be positive", S(c, step));
  if (!need(c, K(c, 1), CHK_LE, step, neg)) return neg;
  int n = in->rank + 1;
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < in->rank; i++) {
    sh[i] = in->shape[i];
    st[i] = in->stride[i];
  }
  if (in->rank > 0) {
    sh[d] = add(c, sym_floordiv(c->st, sub(c, in->shape[d], size), step),
                K(c, 1));
    st[d] = mul(c, step, in->stride[d]);
  }
  sh[n - 1] = size;
  st[n - 1] = in->rank > 0 ? in->stride[d] : K(c, 1);
  geom_set(out, n, sh, st, in->offset);
  return NULL;
}

/* Elements a geometry's addresses need from offset 0: offset + 1 +
 * sum((size-1)*stride), or 0 when some size is the literal 0 (PyTorch's
 * computeStorageNbytes).  A symbolic size may be 0 at run time, where
 * nothing is needed: guarded scales the sum by min(numel, 1) then. */
static const Sym *storage_need(GeomCtx *c, const Geom *g, bool guarded) {
  const Sym *end = add(c, g->offset, K(c, 1)), *numel = K(c, 1);
  for (int d = 0; d < g->rank; d++) {
    if (sym_is(g->shape[d], 0)) return K(c, 0);
    end = add(c, end, mul(c, sub(c, g->shape[d], K(c, 1)), g->stride[d]));
    numel = mul(c, numel, g->shape[d]);
  }
  return guarded && !is_const(numel) ? mul(c, sym_min(c->st, numel, K(c, 1)), end) : end;
}

/* PyTorch's checkInBoundsForStorage: a non-empty as_strided view must
 * stay inside its input's storage, here the extent of the storage root's
 * own geometry (a parameter's descriptor, or an op's fresh result). */
static const char *as_strided_bound(GeomCtx *c, const Geom *out,
                                    const Geom *storage) {
  for (int d = 0; d < out->rank; d++)
    if (sym_is(out->shape[d], 0)) return NULL;
  const Sym *needed = storage_need(c, out, false), *have = storage_need(c, storage, false);
  const char *msg = arena_printf(
      c->arena,
      "as_strided(): sizes %s, strides %s and storage offset %s require a "
      "storage of %s elements, out of bounds for the input's storage of %s "
      "elements; offset + sum((size - 1) * stride) must stay below %s",
      shp(c, out), strd(c, out), S(c, out->offset), S(c, needed),
      S(c, have), S(c, have));
  return need(c, storage_need(c, out, true), CHK_LE, storage_need(c, storage, true), msg)
             ? NULL : msg;
}

const char *geom_as_strided(GeomCtx *c, const Geom *in, const Geom *storage,
                            const Sym *const *size, const Sym *const *stride,
                            int n, const Sym *offset, Geom *out) {
  const Sym **sh = syms_new(c, n), **st = syms_new(c, n);
  for (int i = 0; i < n; i++) {
    int64_t v;
    if (sym_is_const(size[i], &v) && v < 0)
      return arena_printf(c->arena,
                          "as_strided(): size %lld at dim %d of %s is "
                          "negative",
                          (long long)v, i, geom_shape_str(c->arena, size, n));
    if (sym_is_const(stride[i], &v) && v < 0)
      return arena_printf(c->arena,
                          "as_strided(): stride %lld at dim %d of %s is "
                          "negative; strides must be >= 0",
                          (long long)v, i,
                          geom_stride_str(c->arena, stride, n));
    sh[i] = size[i];
    st[i] = stride[i];
  }
  int64_t ov;
  if (offset && sym_is_const(offset, &ov) && ov < 0)
    return arena_printf(c->arena,
                        "as_strided(): storage offset %lld is negative",
                        (long long)ov);
  geom_set(out, n, sh, st, offset ? offset : in->offset);
  return storage ? as_strided_bound(c, out, storage) : NULL;
}

/* ---- clone with preserve_format (§6) ---------------------------------- */

/* Dense strides for dims taken fastest-first in `perm`; sizes <= 1 (and
 * literal 0) do not advance the stride. */
static void dense_from_perm(GeomCtx *c, const Geom *in, const int *perm,
                            const Sym **st) {
  const Sym *acc = K(c, 1);
  for (int i = 0; i < in->rank; i++) {
    int d = perm[i];
    st[d] = acc;
    if (!size_lt2(in->shape[d])) acc = mul(c, acc, in->shape[d]);
  }
}

/* infer_dense_strides' comparison: > 0 when dim a should come after b. */
static int preserve_order(const Geom *g, int a, int b) {
  const Sym *sa = g->stride[a], *sb = g->stride[b];
  if (sym_is(sa, 0) || sym_is(sb, 0)) return 0;
  Cmp cs = gcmp(sa, sb);
  if (cs == C_LT) return -1;
  if (cs == C_GT) return 1;
  if (cs == C_EQ && gcmp(g->shape[a], g->shape[b]) == C_GT) return 1;
  return 0;
}

void geom_preserve(GeomCtx *c, const Geom *in, Geom *out) {
  const Sym **sh = syms_new(c, in->rank), **st = syms_new(c, in->rank);
  for (int d = 0; d < in->rank; d++) sh[d] = in->shape[d];
  if (geom_is_dense(in)) {
    for (int d = 0; d < in->rank; d++) st[d] = in->stride[d];
  } else {
    int *perm = arena_alloc(c->arena, sizeof(int) * (size_t)(in->rank + 1));
    for (int i = 0; i < in->rank; i++) perm[i] = in->rank - 1 - i;
    for (int i = 1; i < in->rank; i++) {
      for (int d0 = i - 1, d1 = i; d0 >= 0; d0--) {
        int cmp = preserve_order(in, perm[d0], perm[d1]);
        if (cmp < 0) break;
        if (cmp > 0) {
          int t = perm[d0];
          perm[d0] = perm[d1];
          perm[d1] = t;
          d1 = d0;
        }
      }
    }
    dense_from_perm(c, in, perm, st);
  }
  geom_set(out, in->rank, sh, st, K(c, 0));
}

/* ---- broadcasting (§5) ------------------------------------------------- */

/* The entry check's message when two symbolic sizes may differ. */
static const char *broadcast_check_msg(GeomCtx *c, const char *shapes,
                                       const Sym *x, const Sym *y, int d) {
  return arena_printf(c->arena,
                      "cannot broadcast %s: sizes %s and %s at dim %d differ "
                      "for these sizes and neither is 1 (this program assumes "
                      "they are equal)",
                      shapes, S(c, x), S(c, y), d);
}

const char *geom_broadcast(GeomCtx *c, const Sym *const *a, int na,
                           const Sym *const *b, int nb, const Sym ***out,
                           int *nout) {
  int n = na > nb ? na : nb;
  const Sym **r = syms_new(c, n);
  for (int i = n - 1; i >= 0; i--) {
    int ia = na - n + i, ib = nb - n + i;
    const Sym *x = ia >= 0 ? a[ia] : K(c, 1);
    const Sym *y = ib >= 0 ? b[ib] : K(c, 1);
    const char *shapes = arena_printf(c->arena, "shapes %s and %s",
                                      geom_shape_str(c->arena, a, na),
                                      geom_shape_str(c->arena, b, nb));
    if (x == y || sym_is(y, 1))
      r[i] = x;
    else if (sym_is(x, 1))
      r[i] = y;
    else if (geom_same_size(c, x, y, broadcast_check_msg(c, shapes, x, y, i)))
      r[i] = x; /* equal sizes written two ways */
    else
      return arena_printf(
          c->arena,
          "cannot broadcast %s: sizes %s and %s at dim %d differ and neither "
          "is 1%s",
          shapes, geom_size_text(c, x), geom_size_text(c, y), i,
          is_const(x) && is_const(y) ? ""
              : " (symbolic sizes must be equal for every value of the "
                "symbols, or the literal 1)");
  }
  *out = r;
  *nout = n;
  return NULL;
}

/* ---- TensorIterator output layout (§7) -------------------------------- */

/* The fast paths: every operand with rank > 0 has exactly `shape`. */
static bool elementwise_fast(GeomCtx *c, const Geom *const *ops, int nops,
                             int rank, const Sym *const *shape, Geom *out) {
  bool contig = true, cl = true, dense = true;
  const Geom *last = NULL;
  for (int i = 0; i < nops; i++) {
    if (ops[i]->rank == 0) continue;
    if (!sym_list_equal(ops[i]->shape, ops[i]->rank, shape, rank)) return false;
    contig &= geom_is_contiguous(ops[i]);
    cl &= geom_is_channels_last(ops[i]);
    dense &= geom_is_dense(ops[i]);
    if (last && !sym_list_equal(last->stride, rank, ops[i]->stride, rank))
      dense = false;
    last = ops[i];
  }
  if (!last || contig) {
    geom_contiguous(c, rank, shape, out);
  } else if (cl) {
    geom_channels_last(c, shape, out);
  } else if (dense) {
    geom_contiguous(c, rank, shape, out);
    for (int d = 0; d < rank; d++) out->stride[d] = last->stride[d];
  } else {
    return false;
  }
  return true;
}

/* An operand's stride at output dim d after broadcasting: 0 where the
 * operand lacks the dim or broadcasts a size-1 dim. */
static const Sym *bstride(GeomCtx *c, const Geom *g, int rank,
                          const Sym *const *shape, int d) {
  int od = g->rank - rank + d;
  if (od < 0) return K(c, 0);
  if (sym_is(g->shape[od], 1) && !sym_is(shape[d], 1)) return K(c, 0);
  return g->stride[od];
}

/* reorder_dimensions' comparison: > 0 when dim a should come after b. */
static int iter_order(GeomCtx *c, const Geom *const *ops, int nops, int rank,
                      const Sym *const *shape, int a, int b) {
  for (int i = 0; i < nops; i++) {
    if (ops[i]->rank == 0) continue;
    const Sym *sa = bstride(c, ops[i], rank, shape, a);
    const Sym *sb = bstride(c, ops[i], rank, shape, b);
    if (sym_is(sa, 0) || sym_is(sb, 0)) continue;
    Cmp cs = gcmp(sa, sb);
    if (cs == C_LT) return -1;
    if (cs == C_GT) return 1;
    if (cs == C_EQ && gcmp(shape[a], shape[b]) == C_GT) return 1;
  }
  return 0;
}

void geom_elementwise_layout(GeomCtx *c, const Geom *const *ops, int nops,
                             int rank, const Sym *const *shape, Geom *out) {
  if (elementwise_fast(c, ops, nops, rank, shape, out)) return;
  int *perm = arena_alloc(c->arena, sizeof(int) * (size_t)(rank + 1));
  for (int i = 0; i < rank; i++) perm[i] = rank - 1 - i;
  for (int i = 1; i < rank; i++) {
    for (int d0 = i - 1, d1 = i; d0 >= 0; d0--) {
      int cmp = iter_order(c, ops, nops, rank, shape, perm[d0], perm[d1]);
      if (cmp < 0) break;
      if (cmp > 0) {
        int t = perm[d0];
        perm[d0] = perm[d1];
        perm[d1] = t;
        d1 = d0;
      }
    }
  }
  bool inverted = true;
  for (int i = 0; i < rank; i++) inverted &= perm[i] == rank - 1 - i;
  geom_contiguous(c, rank, shape, out);
  if (inverted) return;
  /* compatible_stride: sizes multiply as they are (a 0 zeroes the rest). */
  const Sym *acc = K(c, 1);
  for (int i = 0; i < rank; i++) {
    out->stride[perm[i]] = acc;
    acc = mul(c, acc, shape[perm[i]]);
  }
}
