/* row_group.c — pass "row-group": fusion across reductions.  A reduction
 * whose result is broadcast back over the reduced dims (`x -
 * x.mean(-1, keepdim=True)`, a hand-written RMSNorm or softmax, group
 * norm through a view) becomes a row group with the nests that read it
 * row by row, as the built-in softmax and layer_norm are: lowering emits
 * the members' nests consecutively with LfNest.group/shared set, and the
 * backends run them one row at a time, so each row of the input is read
 * again while it is in cache (loops/loops.h "Row groups").
 *
 * The decision (after fuse: which values have a nest of their own is
 * fuse's, IRF_INLINE; before plan-memory, which plans the groups'
 * scratch by their execution order):
 *  - a seed is a reduction (ir_group_reduce) over a trailing block of its
 *    operand's dims [rows, rank) with rows >= 1: the rows are the leading
 *    dims it keeps;
 *  - a later value with a nest of its own (an elementwise/copy value not
 *    inlined, or another such reduction) joins the group when its first
 *    `rows` dims have the rows' extents (a reduction keeps them), it reads
 *    a member (through views, expands, keepdim dims and inlined values:
 *    ir_nest_loads), every such read is row-local (the member's row dims
 *    at the reader's same loop variables, its other dims at none of them:
 *    ir_row_local), and every other nest it reads runs before the group
 *    (a value before the seed, or a member of an earlier group).  Chains
 *    follow: mean then the variance of x - mean then the normalization;
 *    amax then the sum of exp then the division.
 *    A result's value that fuse inlined into the result's copy (which
 *    runs after every nest) joins as a nest of its own instead
 *    (result_only: plan-memory then computes it in the caller's output);
 *  - a group needs two members.  Lowering emits all of them where the
 *    seed is (ir_exec_order): non-members between them run after the
 *    group, and none of them is read by a member; values read by
 *    non-members stay in their buffers as before.
 * Nothing is reordered inside a nest, so each reduction sums in the
 * order it would ungrouped (tests/unit/test_rowfuse.c compares the bits).
 *
 * Each group is one "row group" decision at its seed naming its nests
 * and the values computed inside them; a seed that some reader could
 * not join gets a "not grouped" decision with the reason.
 *
 * Needs: passes.h, ir.h (row_groups.c).  Produces: IrValue.group/rows. */
#include <string.h>

#include "passes.h"

#define PASS "row-group"

/* Whether value r gets a nest lowering could put in a group. */
static bool nest_candidate(const IrValue *v) {
  if ((v->flags & IRF_INLINE) || v->rank > TDSL_MAX_RANK) return false;
  OpKind kd = op_kind(v->op);
  return ir_group_reduce(v->op) || kd == IRK_UNARY || kd == IRK_BINARY ||
         kd == IRK_COMPARE || kd == IRK_TERNARY || v->op == OP_COPY || v->op == OP_CAST;
}

/* Whether inlined value r is computed only by its result's copy, which
 * lowering runs after every nest (loops.h): the value of one contiguous
 * result, read by nothing else, with the result's row-major strides.
 * Such a value joins a group as a nest of its own (IRF_INLINE cleared),
 * which plan-memory then computes in the caller's output. */
static bool result_only(IrModule *m, const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  OpKind kd = op_kind(v->op);
  if (!(v->flags & IRF_INLINE) || v->rank > TDSL_MAX_RANK ||
      !(kd == IRK_UNARY || kd == IRK_BINARY || kd == IRK_COMPARE || kd == IRK_TERNARY ||
        v->op == OP_COPY || v->op == OP_CAST))
    return false;
  int nres = 0;
  for (int i = 0; i < k->nresults; i++) {
    const IrResult *res = &k->results[i];
    if (ir_storage_root(k, res->value) != r) continue;
    if (res->value != r || res->layout != LAYOUT_CONTIGUOUS || res->dtype != v->dtype) return false;
    nres++;
  }
  for (IrRef q = r + 1; q < k->nvalues; q++) {
    const IrValue *w = ir_val(k, q);
    if (op_kind(w->op) == IRK_VIEW) continue;
    for (int j = 0; j < w->nargs; j++)
      if (ir_storage_root(k, w->args[j]) == r) return false;
  }
  const Sym *acc = sym_const(m->st, 1), *acc1 = acc; /* sizes clamped to >= 1, or not */
  for (int d = v->rank - 1; d >= 0 && v->stride; d--) {
    if (!sym_is(v->shape[d], 1) && v->stride[d] != acc && v->stride[d] != acc1) return false;
    acc = sym_mul(m->st, acc, sym_max(m->st, v->shape[d], sym_const(m->st, 1)));
    acc1 = sym_mul(m->st, acc1, v->shape[d]);
  }
  return nres == 1;
}

/* Whether r gets a loop nest at all (computed, not inlined). */
static bool has_nest(const IrValue *v) {
  return op_kind(v->op) != IRK_VIEW && v->op != OP_PARAM && v->op != OP_TENSOR;
}

/* A seed's rows: the reduced dims are [rows, rank) of its operand,
 * rows >= 1; 0 when r is no seed. */
static int seed_rows(const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  if (!ir_group_reduce(v->op) || !nest_candidate(v) || v->nattrs == 0) return 0;
  const IrValue *x = ir_val(k, v->args[0]);
  if (x->rank > TDSL_MAX_RANK || x->rank < 2) return 0;
  bool red[TDSL_MAX_RANK];
  ir_reduced_dims(v, x->rank, red);
  int rows = 0;
  while (rows < x->rank && !red[rows]) rows++;
  for (int d = rows; d < x->rank; d++)
    if (!red[d]) return 0;
  return rows < x->rank ? rows : 0;
}

typedef struct Join {
  const IrKernel *k;
  int g, rows;
  IrRef seed;
  bool reads_member;
  const char *why;  /* why it cannot join, or NULL */
  Arena *a;
} Join;

static const char *op_at(Arena *a, const IrValue *v) {
  return arena_printf(a, "%s (%d:%d)", op_name(v->op), v->loc.line, v->loc.col);
}

static bool join_load(void *ctx, IrRef p, const int *pm) {
  Join *j = ctx;
  const IrValue *v = ir_val(j->k, p);
  if (v->group == j->g) {
    j->reads_member = true;
    if (!j->why && !ir_row_local(v, pm, j->rows))
      j->why = arena_printf(j->a, "it reads %s at other rows than its own (not row-local)",
                            op_at(j->a, v));
  } else if (has_nest(v) && (v->flags & IRF_INLINE)) {
    if (!j->why)
      j->why = arena_printf(j->a, "it computes %s inside (a GEMM epilogue, or a view lowering "
                            "cannot follow)", op_at(j->a, v));
  } else if (has_nest(v) && p > j->seed && v->group == 0) {
    if (!j->why)
      j->why = arena_printf(j->a, "it reads %s, which is computed after %s outside the group "
                            "and must run before it", op_at(j->a, v),
                            op_at(j->a, ir_val(j->k, j->seed)));
  }
  return true;
}

/* ---- the report ---- */

typedef struct Reads {
  const IrKernel *k;
  int g;
  int *nreads;     /* per root: members reading it */
  bool *seen;      /* per root: read by the current member */
  bool *inside;    /* per value: an inlined value some member computes */
} Reads;

static bool count_read(void *ctx, IrRef p, const int *pm) {
  (void)pm;
  Reads *r = ctx;
  if (ir_val(r->k, p)->group != r->g && !r->seen[p]) r->seen[p] = true, r->nreads[p]++;
  return true;
}

/* Marks the inlined values c's nest computes. */
static void mark_inside(const IrKernel *k, IrRef c, bool *inside) {
  const IrValue *v = ir_val(k, c);
  for (int j = 0; j < v->nargs; j++) {
    IrRef a = ir_storage_root(k, v->args[j]);
    const IrValue *w = ir_val(k, a);
    if (!has_nest(w) || !(w->flags & IRF_INLINE) || inside[a]) continue;
    inside[a] = true;
    mark_inside(k, a, inside);
  }
}

static void report_group(PassCtx *c, int g, IrRef seed, int rows) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  Arena *a = m->arena;
  int n = k->nvalues;
  Reads rd = {.k = k, .g = g};
  rd.nreads = arena_alloc(a, sizeof *rd.nreads * (size_t)(n + 1));
  rd.seen = arena_alloc(a, sizeof *rd.seen * (size_t)(n + 1));
  rd.inside = arena_alloc(a, sizeof *rd.inside * (size_t)(n + 1));
  memset(rd.nreads, 0, sizeof *rd.nreads * (size_t)(n + 1));
  memset(rd.inside, 0, sizeof *rd.inside * (size_t)(n + 1));
  char *members = "", *inside = "";
  int nm = 0, ni = 0;
  for (IrRef r = 0; r < n; r++) {
    if (ir_val(k, r)->group != g) continue;
    members = arena_printf(a, "%s%s%s", members, nm++ ? ", " : "", op_at(a, ir_val(k, r)));
    memset(rd.seen, 0, sizeof *rd.seen * (size_t)(n + 1));
    ir_nest_loads(m, k, r, count_read, &rd);
    mark_inside(k, r, rd.inside);
  }
  for (IrRef r = 0; r < n; r++)
    if (rd.inside[r] && ir_val(k, r)->rank > 0)
      inside = arena_printf(a, "%s%s%s", inside, ni++ ? ", " : "", op_at(a, ir_val(k, r)));
  IrRef big = -1; /* the input the most members read (the largest on a tie) */
  for (IrRef r = 0; r < n; r++) {
    if (rd.nreads[r] < 2) continue;
    if (big < 0 || rd.nreads[r] > rd.nreads[big] ||
        (rd.nreads[r] == rd.nreads[big] && ir_val(k, r)->rank > ir_val(k, big)->rank))
      big = r;
  }
  const IrValue *s = ir_val(k, seed);
  const char *dims = "";
  for (int d = 0; d < rows; d++)
    dims = arena_printf(a, "%s%s%s", dims, d ? ", " : "", sym_str(a, s->shape[d]));
  const char *within = ni ? arena_printf(a, ", computing %s inside them", inside) : "";
  if (big < 0) {
    report_decision(c->r, PASS, "row group", s->loc, 0,
                    "%s run one row at a time over [%s] (the %d leading dim%s)%s: each "
                    "row's statistics are used while the row is in cache", members, dims,
                    rows, rows == 1 ? "" : "s", within);
    return;
  }
  const IrValue *x = ir_val(k, big);
  const Sym *once = sym_mul(m->st, ir_numel(m, x), sym_const(m->st, dtype_size(x->dtype)));
  const Sym *bytes = sym_mul(m->st, once, sym_const(m->st, rd.nreads[big] - 1));
  report_decision_sym(c->r, PASS, "row group", s->loc, bytes,
                      "%s run one row at a time over [%s] (the %d leading dim%s)%s: they "
                      "read each row of %s once while it is in cache, %s not read again "
                      "from memory", members, dims, rows, rows == 1 ? "" : "s", within,
                      pass_describe(a, k, big, &(int){0}), report_bytes_str(a, bytes));
}

/* ---- the pass ---- */

bool pass_row_group(PassCtx *c) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  int n = k->nvalues, ng = 0;
  int *was = arena_alloc(m->arena, sizeof *was * (size_t)(n + 1));
  bool changed = false;
  for (IrRef r = 0; r < n; r++) {
    was[r] = ir_val(k, r)->group;
    ir_val(k, r)->group = ir_val(k, r)->rows = 0;
  }
  for (IrRef seed = 0; seed < n; seed++) {
    IrValue *s = ir_val(k, seed);
    int rows = seed_rows(k, seed);
    if (s->group || rows < 1) continue;
    int g = ng + 1, count = 1;
    const Sym *const *ext = s->shape;
    const char *why = NULL;
    IrRef why_at = -1;
    s->group = g;
    for (IrRef r = seed + 1; r < n; r++) {
      IrValue *v = ir_val(k, r);
      bool uninline = result_only(m, k, r);
      if (v->group || !(nest_candidate(v) || uninline) || !ir_group_shape_ok(k, r, rows, ext))
        continue;
      Join j = {.k = k, .g = g, .rows = rows, .seed = seed, .a = m->arena};
      ir_nest_loads(m, k, r, join_load, &j);
      if (!j.reads_member) continue;
      if (j.why) {
        if (!why) why = j.why, why_at = r;
        continue;
      }
      v->group = g;
      v->flags &= ~IRF_INLINE; /* a result's value: its own nest (result_only) */
      changed |= uninline;
      count++;
    }
    if (count < 2) {
      s->group = 0;
      if (c->r && why)
        report_decision(c->r, PASS, "not grouped", s->loc, 0,
                        "no row group for %s: its reader %s reads it row by row, but %s",
                        op_at(m->arena, s), op_at(m->arena, ir_val(k, why_at)), why);
      continue;
    }
    ng++;
    for (IrRef r = seed; r < n; r++)
      if (ir_val(k, r)->group == g) ir_val(k, r)->rows = rows;
    if (c->r) report_group(c, g, seed, rows);
  }
  for (IrRef r = 0; r < n; r++) changed |= ir_val(k, r)->group != was[r];
  return changed;
}
