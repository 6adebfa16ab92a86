/* geometry.c — PyTorch's strided-tensor rules over symbolic sizes
 * (spec/pytorch-semantics.md §1–§7), as declared in geometry.h: the
 * reasoning every rule shares (geometry_internal.h), allocation strides
 * and layout predicates (§3), dims, clone's preserve_format (§6),
 * broadcasting (§5) and TensorIterator's output layout (§7).  The view
 * rules (§1, §2, §4) are in geometry_views.c, which builds on this file.
 *
 * Needs: sym.h (all arithmetic goes through sym_*; equal expressions are
 * pointer-equal), ir.h (run-time checks via ir_add_check), an arena for
 * results and messages.  Produces result geometries and error messages.
 *
 * Symbols are decided for the generic case: a non-constant size is neither
 * 0 nor 1.  Two kinds of comparison are used:
 *  - exact: pointer equality, or a constant difference (geom_prove_le);
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
#include <string.h>

#include "geometry_internal.h"

/* ---- exact reasoning (with a SymTab) -------------------------------- */

/* Variables stand for sizes and strides, so they are never negative. */
static Tri prove_nonneg(const Sym *x) {
  int64_t v;
  int id;
  if (sym_is_const(x, &v)) return v >= 0 ? T_YES : T_NO;
  if (sym_is_var(x, &id)) return T_YES;
  return T_UNKNOWN;
}

Tri geom_prove_le(GeomCtx *c, const Sym *a, const Sym *b) {
  if (a == b) return T_YES;
  return prove_nonneg(sub(c, b, a));
}

static Tri prove_lt(GeomCtx *c, const Sym *a, const Sym *b) {
  return geom_prove_le(c, add(c, a, K(c, 1)), b);
}

/* min/max folded when the order is provable, else an opaque atom. */
const Sym *geom_min(GeomCtx *c, const Sym *a, const Sym *b) {
  if (geom_prove_le(c, a, b) == T_YES) return a;
  if (geom_prove_le(c, b, a) == T_YES) return b;
  return sym_min(c->st, a, b);
}
const Sym *geom_max(GeomCtx *c, const Sym *a, const Sym *b) {
  if (geom_prove_le(c, a, b) == T_YES) return b;
  if (geom_prove_le(c, b, a) == T_YES) return a;
  return sym_max(c->st, a, b);
}

/* Records `lhs op rhs` as a run-time check unless it is provable; returns
 * false when it is provably violated (the caller reports the error). */
bool geom_need(GeomCtx *c, const Sym *lhs, IrCheckOp op, const Sym *rhs,
               const char *msg) {
  IR_ASSERT(op == CHK_LT || op == CHK_LE);
  Tri t = op == CHK_LT ? prove_lt(c, lhs, rhs) : geom_prove_le(c, lhs, rhs);
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
SymFacts geom_facts(GeomCtx *c) {
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

bool geom_has_check(const IrKernel *k, const Sym *a, IrCheckOp op,
                    const Sym *b) {
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
  if (!geom_has_check(c->k, a, CHK_EQ, b)) {
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

enum { MAXVARS = 256 };

static int64_t env_value(int pt, int id) {
  switch (pt) {
  case 0: return 2;
  case 1: return 3 + id;
  default: return 3 + MAXVARS - id;
  }
}

Num geom_num_of(const Sym *s) {
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

Num geom_num_const(int64_t v) {
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

Cmp geom_num_cmp(Num a, Num b) {
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
  return geom_num_cmp(geom_num_of(a), geom_num_of(b));
}

static bool num_eq(const Sym *s, Num n) {
  return geom_num_cmp(geom_num_of(s), n) == C_EQ;
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

char *geom_ints_str(Arena *a, const int64_t *v, int n) {
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
  Num expected = geom_num_const(1);
  for (int i = 0; i < n; i++) {
    int d = order[i];
    if (sym_is(g->shape[d], 1)) continue;
    if (!num_eq(g->stride[d], expected)) return false;
    expected = num_mul(expected, geom_num_of(g->shape[d]));
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
  Num min = geom_num_const(0);
  for (int i = 0; i < 4; i++) {
    int d = order[i];
    if (sym_is(g->shape[d], 0)) return false;
    Cmp cs = geom_num_cmp(geom_num_of(g->stride[d]), min);
    if (cs != C_GT && cs != C_EQ) return false; /* less, or not provably not */
    if (d == 0 && geom_num_cmp(min, geom_num_of(g->stride[1])) == C_EQ)
      return false;
    Num sz = sym_is(g->shape[d], 1) ? geom_num_const(1)
                                    : geom_num_of(g->shape[d]);
    min = num_mul(geom_num_of(g->stride[d]), sz);
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
  Num expected = geom_num_const(1);
  for (int i = 0; i < g->rank; i++) {
    int d = perm[i];
    if (size_lt2(g->shape[d])) return true;
    if (!num_eq(g->stride[d], expected)) return false;
    expected = num_mul(expected, geom_num_of(g->shape[d]));
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
