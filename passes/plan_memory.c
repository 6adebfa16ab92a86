/* plan_memory.c — pass "plan-memory": scratch blocks shared by values
 * whose lifetimes do not overlap.
 *
 * Every value that lowering gives a scratch buffer (computed, not a view,
 * not IRF_INLINE) gets a slot (IrValue.slot, 1-based).  Lifetimes are in
 * the order of the loop nests (ir_exec_order: value order, but a row
 * group's members where its first member is): value r is written by its
 * nest and is dead after its last read, where a read through a view
 * counts as a read of the storage root, and a read by an inlined value u
 * happens wherever u is evaluated (up to u's own last read).  A row
 * group (pass row-group) interleaves its members' nests row by row, so
 * its members are all written from the group's first nest on and all
 * their reads happen up to its last nest: no member takes the block of
 * another member or of a value a member reads (one row's write would
 * clobber what another row still needs).  Results live to the end
 * (their final copies run after every nest).  Slots are assigned
 * greedily in value order: a block whose occupant died strictly before r
 * is written (so no nest reads one and writes the other) is reused when r
 * provably fits (block size - r's size is a constant >= 0, which covers
 * equal symbolic sizes), the tightest such block first; otherwise r opens
 * a new block of its own size.  A block never grows, so its size is that
 * of its first value — lowering sizes it from there too (ir_slot_bytes)
 * and the code generator allocates one block per slot.
 *
 * Sizes are those lowering allocates (ir.h "Storage", storage.c): the
 * value's dense extent (offset + sum (size-1)*stride + 1 elements) times
 * its dtype size.  Normalization statistics and GEMM packing panels are
 * outside the plan.
 *
 * Results in place: a computed value that is a kernel result, with the
 * result's dtype and exactly the dense strides of the result's declared
 * layout (contiguous, or channels_last at rank 4; offset 0; dims of
 * literal size 1 do not count), is computed directly in the caller's
 * output (IrValue.out): it gets no scratch and the result needs no final
 * copy.  So is one whose result is a view of it with those strides that
 * addresses its whole buffer, each element once (`cat(...).view(...)`:
 * the caller's output holds the value's buffer as the view reads it).
 * The entry checks guarantee such an output's strides wherever they
 * matter (loops/lower.c static_output_strides).  A kernel that
 * fails must leave its outputs untouched (§7.2): scratch is allocated at
 * entry, and the only later allocation is a matmul/conv2d's packing
 * memory, taken before that GEMM computes anything; so no value is
 * placed in an output when a GEMM runs in a later nest (an epilogue GEMM
 * runs in its chain's last nest, loops/loops.h "Epilogues"; lowering puts
 * result copies that carry one before the other result copies), in
 * execution order.  Nor when a later INDEX/GATHER checks an index the
 * kernel computes (its check runs at its own nest, loops.h "Indexing by
 * tensors": a failed check must find every output untouched).
 *
 * Needs: passes.h, ir.h (storage.c: ir_owns_scratch, ir_scratch_bytes,
 * ir_planned_scratch_bytes; row_groups.c: ir_exec_order).  Produces: slots and output placements on
 * the kernel, "reuse", "in-place" and "plan" decisions. */
#include <string.h>

#include "passes.h"

#define PASS "plan-memory"

/* Lowering gives r a buffer of its own (at -O1+, honouring IRF_INLINE). */
static bool computed(const IrValue *v) {
  return op_kind(v->op) != IRK_VIEW && v->op != OP_PARAM && v->op != OP_TENSOR &&
         !(v->flags & IRF_INLINE);
}

/* The dense strides of layout l over shape (loops/lower.c
 * static_output_strides): row-major, or N H W C order for channels_last
 * at rank 4, as products of max(size, 1) (clamp) or of the sizes: the two
 * agree whenever the tensor has an element to address.  False for a
 * layout without fixed strides. */
static bool layout_strides(IrModule *m, Layout l, const Sym *const *shape, int rank,
                           bool clamp, const Sym **st) {
  bool cl = l == LAYOUT_CHANNELS_LAST && rank == 4;
  if (l != LAYOUT_CONTIGUOUS && !cl) return false;
  const Sym *one = sym_const(m->st, 1), *acc = one;
  for (int j = rank - 1; j >= 0; j--) {
    int d = cl ? (int[]){0, 2, 3, 1}[j] : j;
    st[d] = acc;
    acc = sym_mul(m->st, acc, clamp ? sym_max(m->st, shape[d], one) : shape[d]);
  }
  return true;
}

/* The nest (in value order; nvalues: a result copy) in which GEMM value q
 * runs: its own, or for an epilogue (pass fuse, IRF_INLINE) that of the
 * chain's last value, each link read once. */
static IrRef gemm_nest(const IrKernel *k, IrRef q) {
  IrRef at = q;
  while (ir_val(k, at)->flags & IRF_INLINE) {
    IrRef next = -1;
    for (IrRef u = at + 1; u < k->nvalues && next < 0; u++)
      for (int j = 0; j < ir_val(k, u)->nargs; j++)
        if (ir_val(k, u)->args[j] == at) next = u;
    if (next < 0) return k->nvalues;
    at = next;
  }
  return at;
}

/* Whether q is INDEX/GATHER whose index check runs at q's own nest (an
 * index computed in the kernel, loops.h "Indexing by tensors"): no
 * output may be written before it. */
static bool checked_late(const IrKernel *k, IrRef q) {
  const IrValue *v = ir_val(k, q);
  if (op_kind(v->op) != IRK_INDEX || (v->flags & IRF_INBOUNDS)) return false;
  Op root = ir_val(k, ir_storage_root(k, v->args[1]))->op;
  return root != OP_PARAM && root != OP_TENSOR;
}

/* When nests run (ir_exec_order): pos[r] the place of r's nest (of
 * nvalues: after every nest), order[] its inverse; a row group's members
 * write from its first place on and read up to its last. */
typedef struct Times {
  int *pos, *first, *last;
  IrRef *order;
} Times;

static Times exec_times(IrModule *m, const IrKernel *k) {
  int n = k->nvalues;
  Times t;
  t.pos = arena_alloc(m->arena, sizeof *t.pos * (size_t)(n + 1));
  t.first = arena_alloc(m->arena, sizeof *t.first * (size_t)(n + 1));
  t.last = arena_alloc(m->arena, sizeof *t.last * (size_t)(n + 1));
  t.order = arena_alloc(m->arena, sizeof *t.order * (size_t)(n + 1));
  ir_exec_order(k, t.order, t.pos);
  for (IrRef r = 0; r < n; r++) t.first[r] = t.last[r] = t.pos[r];
  for (IrRef r = 0; r < n; r++) {
    int g = ir_val(k, r)->group;
    for (IrRef q = 0; q < n && g > 0; q++) {
      if (ir_val(k, q)->group != g) continue;
      if (t.pos[q] < t.first[r]) t.first[r] = t.pos[q];
      if (t.pos[q] > t.last[r]) t.last[r] = t.pos[q];
    }
  }
  return t;
}

/* Whether view u of v addresses exactly v's buffer (offset 0, as many
 * elements as v's dense extent): v's buffer is u's elements, each once. */
static bool covers(IrModule *m, const IrValue *v, const IrValue *u) {
  const Sym *ext = ir_dense_extent(m, v), *n = ir_numel(m, u);
  return (!u->offset || sym_is(u->offset, 0)) &&
         (ext == n || ext == sym_max(m->st, n, sym_const(m->st, 1)));
}

/* The first result whose output value r can be computed in, or -1. */
static int output_for(IrModule *m, const IrKernel *k, const Times *t, IrRef r) {
  const IrValue *v = ir_val(k, r);
  if (!computed(v) || (v->offset && !sym_is(v->offset, 0))) return -1;
  for (IrRef q = 0; q < k->nvalues; q++) {
    OpKind kd = op_kind(ir_val(k, q)->op);
    if ((kd == IRK_MATMUL || kd == IRK_CONV) && t->pos[gemm_nest(k, q)] > t->first[r]) return -1;
    if (t->pos[q] > t->first[r] && checked_late(k, q)) return -1;
  }
  size_t n = sizeof(const Sym *) * (size_t)(v->rank + 1);
  const Sym **have = arena_alloc(m->arena, n);
  layout_strides(m, LAYOUT_CONTIGUOUS, v->shape, v->rank, true, have);
  if (v->stride) memcpy(have, v->stride, n - sizeof *have);
  for (int i = 0; i < k->nresults; i++) {
    const IrResult *res = &k->results[i];
    const IrValue *u = ir_val(k, res->value); /* r, or a view of r covering its buffer */
    if (res->value != r && (ir_storage_root(k, res->value) != r || !covers(m, v, u))) continue;
    size_t nu = sizeof(const Sym *) * (size_t)(u->rank + 1);
    const Sym **uw = arena_alloc(m->arena, nu), **uw1 = arena_alloc(m->arena, nu);
    const Sym **uh = res->value == r ? have : u->stride;
    if (res->dtype != v->dtype || !uh ||
        !layout_strides(m, res->layout, u->shape, u->rank, true, uw))
      continue;
    layout_strides(m, res->layout, u->shape, u->rank, false, uw1);
    bool same = true;
    for (int d = 0; d < u->rank; d++)
      same &= sym_is(u->shape[d], 1) || uw[d] == uh[d] || uw1[d] == uh[d];
    if (same) return i;
  }
  return -1;
}

/* end[r]: the place (Times) of the last nest that reads r's storage
 * (nvalues: a result). */
static int *last_reads(IrModule *m, const IrKernel *k, const Times *tm) {
  int n = k->nvalues;
  int *end = arena_alloc(m->arena, sizeof *end * (size_t)(n + 1));
  for (IrRef r = 0; r < n; r++) end[r] = -1;
  for (int i = 0; i < k->nresults; i++) end[k->results[i].value] = n;
  for (IrRef r = n - 1; r >= 0; r--) {
    const IrValue *v = ir_val(k, r);
    bool through = op_kind(v->op) == IRK_VIEW || (v->flags & IRF_INLINE);
    /* when r's reads happen: its readers' (views, inlined values), else
     * its nest's (a group's: up to its last nest) */
    int t = through ? (end[r] >= 0 ? end[r] : tm->pos[r]) : tm->last[r];
    for (int j = 0; j < v->nargs; j++)
      if (end[v->args[j]] < t) end[v->args[j]] = t;
  }
  for (IrRef r = 0; r < n; r++)
    if (end[r] < tm->last[r]) end[r] = tm->last[r]; /* dead after its own nest at the earliest */
  return end;
}

/* Block size minus need as a constant, or -1 when not provably >= 0. */
static int64_t slack(IrModule *m, const Sym *block, const Sym *need) {
  int64_t d;
  if (block == need) return 0;
  if (!sym_is_const(sym_sub(m->st, block, need), &d) || d < 0) return -1;
  return d;
}

typedef struct Block {
  const Sym *bytes;
  IrRef holder; /* the value in it now */
  int busy;     /* its holder's last read */
} Block;

/* "y" or "mul at 4:7". */
static const char *name_of(IrModule *m, const IrValue *v) {
  if (v->name) return arena_printf(m->arena, "%s", v->name);
  return arena_printf(m->arena, "%s at %d:%d", op_name(v->op), v->loc.line, v->loc.col);
}

static void report_reuse(PassCtx *c, const Times *t, IrRef r, const Block *b, const Sym *need) {
  IrModule *m = c->m;
  const IrValue *v = ir_val(c->k, r), *old = ir_val(c->k, b->holder);
  const IrValue *last = ir_val(c->k, t->order[b->busy]);
  report_decision_sym(c->r, PASS, "reuse", v->loc, need,
                      "the buffer of %s reuses the buffer of %s (dead after %d:%d): %s",
                      name_of(m, v), name_of(m, old), last->loc.line, last->loc.col,
                      report_bytes_str(m->arena, need));
}

static void report_in_place(PassCtx *c, IrRef r) {
  IrModule *m = c->m;
  const IrValue *v = ir_val(c->k, r);
  const Sym *bytes = sym_mul(m->st, ir_numel(m, v), sym_const(m->st, 2 * dtype_size(v->dtype)));
  report_decision_sym(c->r, PASS, "in-place", v->loc, bytes,
                      "%s is computed directly in the caller's output out%d, whose "
                      "%s layout it already has%s: no scratch buffer and no final copy, "
                      "%s saved", name_of(m, v), v->out - 1,
                      layout_name(c->k->results[v->out - 1].layout),
                      v->op == OP_CAT ? arena_printf(m->arena, " (each of the cat's %d "
                                                     "inputs writes its slice)", v->nargs)
                                      : "",
                      report_bytes_str(m->arena, bytes));
}

/* The totals: what sharing saved, or that it saved nothing and why. */
static void report_plan(PassCtx *c, int nbufs, int nb, const Sym *unshared) {
  IrModule *m = c->m;
  const Sym *planned = ir_planned_scratch_bytes(m, c->k);
  const Sym *saved = sym_sub(m->st, unshared, planned);
  const char *total = report_bytes_str(m->arena, planned);
  if (nbufs == 1)
    report_decision_sym(c->r, PASS, "plan", c->k->loc, saved,
                        "1 scratch buffer: %s of scratch", total);
  else if (sym_is(saved, 0))
    report_decision_sym(c->r, PASS, "plan", c->k->loc, saved,
                        "%d scratch buffers in %d blocks: %s of scratch; no buffer could "
                        "take over the block of a dead one (none was dead yet, or it "
                        "was too small)", nbufs, nb, total);
  else
    report_decision_sym(c->r, PASS, "plan", c->k->loc, saved,
                        "%d scratch buffers in %d block%s: %s of scratch instead of %s, "
                        "%s saved", nbufs, nb, nb == 1 ? "" : "s", total,
                        report_bytes_str(m->arena, unshared), report_bytes_str(m->arena, saved));
}

/* The tightest block r fits that is free when r is first written
 * (place `from`), or -1. */
static int free_block(IrModule *m, const Block *bl, int nb, int from, const Sym *need) {
  int best = -1;
  int64_t best_slack = 0;
  for (int i = 0; i < nb; i++) {
    if (bl[i].busy >= from) continue;
    int64_t s = slack(m, bl[i].bytes, need);
    if (s < 0 || (best >= 0 && s >= best_slack)) continue;
    best = i;
    best_slack = s;
  }
  return best;
}

bool pass_plan_memory(PassCtx *c) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  Times t = exec_times(m, k);
  int *end = last_reads(m, k, &t);
  Block *bl = arena_alloc(m->arena, sizeof *bl * (size_t)(k->nvalues + 1));
  int nb = 0, nbufs = 0;
  bool changed = false;
  const Sym *unshared = sym_const(m->st, 0);
  for (IrRef r = 0; r < k->nvalues; r++) {
    IrValue *v = ir_val(k, r);
    int was = v->slot, was_out = v->out;
    v->slot = 0;
    v->out = output_for(m, k, &t, r) + 1;
    if (v->out > 0 && c->r) report_in_place(c, r);
    if (ir_owns_scratch(v)) {
      const Sym *need = ir_scratch_bytes(m, v);
      unshared = sym_add(m->st, unshared, need);
      nbufs++;
      int b = free_block(m, bl, nb, t.first[r], need);
      if (b >= 0 && c->r) report_reuse(c, &t, r, &bl[b], need);
      if (b < 0) bl[b = nb++] = (Block){.bytes = need};
      bl[b].holder = r;
      bl[b].busy = end[r];
      v->slot = b + 1;
    }
    changed |= v->slot != was || v->out != was_out;
  }
  if (c->r && nbufs > 0) report_plan(c, nbufs, nb, unshared);
  return changed;
}
