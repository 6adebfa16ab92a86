/* fuse.c — pass "fuse": decides which values are computed inside their
 * users (IRF_INLINE: no loop nest, no buffer) instead of materialized.
 * Lowering (loops/lower.c, -O1 and above) inlines exactly the flagged
 * values; without this pass every value gets a nest and a buffer.
 *
 * Rules (the loop form's, loops/loops.h "Fusion"): a value computed by
 * an elementwise, copy/cast or constant op (not RESHAPE) is inlined when
 * every read of its storage (through any view) is by a consumer that
 * takes an expression (elementwise/copy ops, reductions, result copies,
 * cat: each input is read in its own nest at that nest's index)
 * through a view whose index map composes (ir_view_map: offset 0, dims
 * that are expands, permutes or (un)squeezes).  A value read once (and
 * not through a broadcast) is always inlined; one read several times, or
 * through a broadcast (an expand: each element read many times), only
 * while its expression (its inlined operands included) costs at most
 * the budget (the target's fuse_multi_use_budget in the cost table,
 * costs.c: 12 on the CPU, 24 on CUDA) in nodes, transcendental ops and
 * divisions counting 8, and recomputing it loads no more bytes than materializing it: per
 * element, n reads of an expression loading L bytes (operands read
 * through a broadcast count 0: loop-invariant) cost n*L recomputed and
 * L + (n+1)*S stored once (S its element size); a broadcast read needs
 * L <= S.  (Recomputing a compare of two f32 tensors for two readers
 * would load 16 bytes per element where storing the bool costs 3.)
 *
 * Epilogues (loops/loops.h "Epilogues"): a matmul/conv value read once,
 * directly (no view) by an elementwise/copy/cast value E, where E and
 * every value inlined above it up to the nest that computes it are each
 * read once directly by an elementwise value (or returned as they are),
 * and that nest runs no other GEMM's epilogue, is flagged IRF_INLINE
 * too: the GEMM runs inside that nest and the chain (bias adds,
 * activations, scales, casts; other operands are any loads at the
 * output index: broadcast parameters, constants, residual tensors) is
 * applied to each finished output block.  Otherwise the GEMM value is
 * materialized and its readers are a second pass.
 *
 * Prologues (loops/loops.h "Prologues"): a candidate value read once,
 * not through a broadcast, as operand 0 or 1 of a matmul/conv2d (directly
 * or through a view that composes), whose expression costs at most
 * the budget (packing evaluates an element several times: A
 * panels are packed once per column chunk) is flagged IRF_INLINE: the
 * GEMM's packing evaluates it instead of reading it from memory.  A conv
 * input only when the kernel is 1 x 1 (one_tap) or the value only widens
 * a tensor in memory (widens_memory: read narrow, no cost per tap); a
 * conv weight only when it widens: any other prologue makes the conv an
 * implicit GEMM (loops/conv_algo.c), and the weight is small (a flipped
 * weight as a prologue: a 3x3 conv over 64 channels 1.7x slower).
 *
 * Indexing by tensors (INDEX/GATHER, loops/loops.h): a candidate like an
 * elementwise value (read inline, its load of the input carries the
 * index); it reads both operands as expressions: the index's elementwise
 * producers inline into it (`x.index_select(0, (i + 1) % N)` is one
 * nest), and so does its input, whose elements it may read any number of
 * times, so that read counts as one through a broadcast (an INDEX input
 * of flip(x, [0, 1]) inlines: one nest).
 *
 * Every computed value of rank >= 1 gets one decision: "fused",
 * "recomputed", "epilogue" (reported at E), "prologue" or "materialized" with the
 * reason (reductions, normalizations, pools and reshape copies always
 * have a nest of their own), and the bytes the decision saves (the value
 * written and read back) or costs.
 *
 * Needs: passes.h, ir.h (TDSL_MAX_RANK; storage.c's ir_view_map, the
 * index-map rule lowering follows too).  Produces: IRF_INLINE flags on
 * the kernel. */
#include <string.h>

#include "passes.h"

#define PASS "fuse"

/* A value read more often than once is recomputed per read only below
 * this cost (nodes; transcendental and division ops count extra): the
 * target's row of the cost table (costs.c; cpu 12, cuda 24). */
static int budget(const PassCtx *c) { return pass_ctx_costs(c)->fuse_multi_use_budget; }

/* Why a value cannot be inlined (the first reason found wins). */
typedef enum Block {
  BLK_NONE,
  BLK_VIEW,    /* read through a view whose index map does not compose */
  BLK_RESHAPE, /* read by RESHAPE (linear index) */
  BLK_GEMM,    /* an operand of matmul/conv2d: packed anyway */
  BLK_WHOLE    /* read by a normalization or pool nest */
} Block;

typedef struct Uses {
  int n;         /* reads of the root (through any view), results included */
  IrRef first;   /* first reading value, -1: a result copy */
  Block block;
  IrRef via;     /* BLK_*: the reader (or the view) */
  bool bcast;    /* some read is through a broadcast (each element read
                    many times) */
  int load;      /* bytes one element loads when computed inline */
} Uses;

/* Whether a read of value a (any view of its root) composes. */
static bool view_ok(IrModule *m, const IrKernel *k, IrRef a) {
  int map[TDSL_MAX_RANK], pm[TDSL_MAX_RANK];
  const IrValue *v = ir_val(k, a);
  if (v->rank > TDSL_MAX_RANK) return false;
  for (int d = 0; d < v->rank; d++) map[d] = d;
  return ir_view_map(m, k, a, map, pm);
}

static bool candidate(Op op) {
  switch (op) {
  case OP_CONST: case OP_FULL: case OP_SYMVAL: case OP_ARANGE: case OP_COPY: case OP_CAST:
    return true;
  default: break;
  }
  OpKind kd = op_kind(op);
  return kd == IRK_UNARY || kd == IRK_BINARY || kd == IRK_COMPARE || kd == IRK_TERNARY;
}

/* Why consumer op cannot read an operand as an expression (BLK_NONE: it
 * can).  INDEX/GATHER read both operands as expressions (loops.h: the
 * index as the dynamic term, the input at the positions it gives). */
static Block consumer_block(Op op) {
  if (op == OP_RESHAPE) return BLK_RESHAPE;
  if (op_kind(op) == IRK_INDEX) return BLK_NONE;
  /* a cat reads each operand in that operand's own nest; a scan each element
   * once at its own index, as a reduction */
  if (candidate(op) || op_kind(op) == IRK_REDUCE || op_kind(op) == IRK_JOIN ||
      op_kind(op) == IRK_SCAN)
    return BLK_NONE;
  OpKind kd = op_kind(op);
  return kd == IRK_MATMUL || kd == IRK_CONV ? BLK_GEMM : BLK_WHOLE;
}

/* Whether view a reads its root broadcast: a dim of size != 1 with
 * stride 0 (an expand), so each element of the root is read many times. */
static bool broadcasts(const IrKernel *k, IrRef a) {
  const IrValue *v = ir_val(k, a);
  if (a == ir_storage_root(k, a) || !v->stride) return false;
  for (int d = 0; d < v->rank; d++)
    if (sym_is(v->stride[d], 0) && !sym_is(v->shape[d], 1)) return true;
  return false;
}

static void add_use(IrModule *m, const IrKernel *k, Uses *u, IrRef reader, IrRef a, Op op,
                    int j) {
  IrRef root = ir_storage_root(k, a);
  Uses *x = &u[root];
  if (x->n++ == 0) x->first = reader;
  /* INDEX/GATHER read their input at run-time positions, any element
   * any number of times: as through a broadcast */
  x->bcast |= broadcasts(k, a) || (j == 0 && reader >= 0 && op_kind(op) == IRK_INDEX);
  if (x->block != BLK_NONE) return;
  Block b = reader >= 0 ? consumer_block(op) : BLK_NONE;
  if (b == BLK_NONE && !view_ok(m, k, a)) b = BLK_VIEW, reader = a;
  if (b != BLK_NONE) x->block = b, x->via = reader;
}

/* Reads of every storage root. */
static Uses *count_uses(IrModule *m, const IrKernel *k) {
  Uses *u = arena_alloc(m->arena, sizeof *u * (size_t)(k->nvalues + 1));
  memset(u, 0, sizeof *u * (size_t)(k->nvalues + 1));
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    if (op_kind(v->op) == IRK_VIEW) continue;
    for (int j = 0; j < v->nargs; j++) add_use(m, k, u, r, v->args[j], v->op, j);
  }
  for (int i = 0; i < k->nresults; i++) add_use(m, k, u, -1, k->results[i].value, OP_COUNT, 0);
  return u;
}

/* ---- the report ---- */

static const Sym *value_bytes(IrModule *m, const IrValue *v) {
  return sym_mul(m->st, ir_numel(m, v), sym_const(m->st, dtype_size(v->dtype)));
}

/* "the add at 8:5", or "the copy into the result" for r < 0. */
static const char *who(IrModule *m, const IrKernel *k, IrRef r) {
  if (r < 0) return "the copy into the result";
  const IrValue *v = ir_val(k, r);
  return arena_printf(m->arena, "the %s at %d:%d", op_name(v->op), v->loc.line, v->loc.col);
}

static void report_inlined(PassCtx *c, IrRef r, const Uses *u, int cost) {
  IrModule *m = c->m;
  const IrValue *v = ir_val(c->k, r);
  const Sym *b = value_bytes(m, v);
  if (u->n <= 1) {
    report_decision_sym(c->r, PASS, "fused", v->loc, sym_mul(m->st, b, sym_const(m->st, 2)),
                        "%s(...) at %d:%d computed inside %s: one loop nest instead of "
                        "two, %s not written and read back", op_name(v->op), v->loc.line,
                        v->loc.col, who(m, c->k, u->first), report_bytes_str(m->arena, b));
    return;
  }
  report_decision_sym(c->r, PASS, "recomputed", v->loc, b,
                      "%s(...) at %d:%d recomputed inside each of its %d readers (cost %d "
                      "<= %d): %s not written, no loop nest of its own", op_name(v->op),
                      v->loc.line, v->loc.col, u->n, cost, budget(c),
                      report_bytes_str(m->arena, b));
}

static const char *block_reason(PassCtx *c, const Uses *u, int cost) {
  IrModule *m = c->m;
  switch (u->block) {
  case BLK_VIEW: {
    const IrValue *w = ir_val(c->k, u->via);
    return arena_printf(m->arena, "read through the %s view at %d:%d, whose index map "
                        "is not a permutation or broadcast of the value's", op_name(w->op),
                        w->loc.line, w->loc.col);
  }
  case BLK_RESHAPE:
    return arena_printf(m->arena, "read by %s, which reads it by linear index",
                        who(m, c->k, u->via));
  case BLK_GEMM:
    return arena_printf(m->arena, "an operand of %s, which packs its operands from "
                        "memory anyway: no prologue (read %d time%s%s, cost %d, budget %d; "
                        "a conv bias, the input of a conv with more than one tap "
                        "or a conv's weight unless it only widens a tensor, or a "
                        "view that does not compose is never one)",
                        who(m, c->k, u->via), u->n, u->n == 1 ? "" : "s",
                        u->bcast ? ", through a broadcast" : "", cost, budget(c));
  case BLK_WHOLE:
    return arena_printf(m->arena, "read by %s, which reads whole rows or windows",
                        who(m, c->k, u->via));
  case BLK_NONE: break;
  }
  if (cost <= budget(c))
    return arena_printf(m->arena, "read %s%d time%s: recomputing it loads %d bytes per "
                        "element each time, more than it costs to store it once and read "
                        "it back", u->bcast ? "through a broadcast, " : "", u->n,
                        u->n == 1 ? "" : "s", u->load);
  return arena_printf(m->arena, "read %d times and its expression costs %d > %d, "
                      "cheaper to store once than to recompute", u->n, cost,
                      budget(c));
}

static void report_materialized(PassCtx *c, IrRef r, const Uses *u, int cost) {
  const IrValue *v = ir_val(c->k, r);
  const Sym *b = value_bytes(c->m, v);
  report_decision_sym(c->r, PASS, "materialized", v->loc, sym_neg(c->m->st, b),
                      "%s(...) at %d:%d materialized (%s written): %s", op_name(v->op),
                      v->loc.line, v->loc.col, report_bytes_str(c->m->arena, b), block_reason(c, u, cost));
}

/* Matmul/conv outputs that take no epilogue (why: the reason). */
static void report_gemm(PassCtx *c, IrRef r, const Uses *u, const char *why) {
  const IrValue *v = ir_val(c->k, r);
  const Sym *b = value_bytes(c->m, v);
  const char *what = op_kind(v->op) == IRK_CONV ? "conv" : "matmul";
  report_decision_sym(c->r, PASS, "materialized", v->loc, sym_neg(c->m->st, b),
                      "%s at %d:%d materialized: the %s output (%s) is written by the "
                      "GEMM and read by %d reader%s, no epilogue: %s", op_name(v->op),
                      v->loc.line, v->loc.col, what, report_bytes_str(c->m->arena, b), u->n,
                      u->n == 1 ? "" : "s", why);
}

/* ---- epilogues: an elementwise chain run on the GEMM's finished blocks ---- */

/* Whether value w reads r as an argument itself (not through a view). */
static bool reads_directly(const IrValue *w, IrRef r) {
  for (int j = 0; j < w->nargs; j++)
    if (w->args[j] == r) return true;
  return false;
}

/* Whether the expression of value r (through its inlined operands) reads
 * a GEMM value other than g that is already an epilogue. */
static bool other_gemm(const IrKernel *k, IrRef r, IrRef g, bool *seen) {
  if (seen[r]) return false;
  seen[r] = true;
  const IrValue *v = ir_val(k, r);
  for (int j = 0; j < v->nargs; j++) {
    IrRef a = ir_storage_root(k, v->args[j]);
    const IrValue *w = ir_val(k, a);
    if (a == g || !(w->flags & IRF_INLINE)) continue;
    OpKind kd = op_kind(w->op);
    if (kd == IRK_MATMUL || kd == IRK_CONV || other_gemm(k, a, g, seen)) return true;
  }
  return false;
}

/* Follows GEMM g's single reader up the chain of values inlined into
 * their single direct reader, to the nest that would run the epilogue:
 * *end is that materialized value, or -1 for a result copy.  Returns
 * NULL when g can take the epilogue, else why not. */
static const char *epilogue_end(PassCtx *c, const Uses *u, IrRef g, IrRef *end) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  if (u[g].n != 1)
    return arena_printf(m->arena, "read by %d reader%s", u[g].n, u[g].n == 1 ? "" : "s");
  IrRef cur = u[g].first;
  if (cur < 0) return "returned as it is: the GEMM writes the result itself";
  const IrValue *e = ir_val(k, cur);
  if (!candidate(e->op) || op_kind(e->op) == IRK_VIEW)
    return arena_printf(m->arena, "read by %s, which is not elementwise", who(m, k, cur));
  if (!reads_directly(e, g))
    return arena_printf(m->arena, "read by %s through a view, not at the output index",
                        who(m, k, cur));
  while (ir_val(k, cur)->flags & IRF_INLINE) {
    IrRef next = u[cur].first;
    if (u[cur].n != 1)
      return arena_printf(m->arena, "%s is recomputed in %d readers", who(m, k, cur), u[cur].n);
    if (next < 0) {
      for (int i = 0; i < k->nresults; i++)
        if (ir_storage_root(k, k->results[i].value) == cur && k->results[i].value != cur)
          return arena_printf(m->arena, "%s is returned through a view", who(m, k, cur));
      break;
    }
    const IrValue *w = ir_val(k, next);
    if (!candidate(w->op) || !reads_directly(w, cur))
      return arena_printf(m->arena, "%s is read by %s, not elementwise at the output index",
                          who(m, k, cur), who(m, k, next));
    cur = next;
  }
  *end = ir_val(k, cur)->flags & IRF_INLINE ? -1 : cur;
  bool *seen = arena_alloc(m->arena, sizeof *seen * (size_t)(k->nvalues + 1));
  memset(seen, 0, sizeof *seen * (size_t)(k->nvalues + 1));
  if (other_gemm(k, cur, g, seen))
    return "its reader already runs another GEMM's epilogue";
  return NULL;
}

static void report_epilogue(PassCtx *c, IrRef g, IrRef end, const Uses *u) {
  IrModule *m = c->m;
  const IrValue *v = ir_val(c->k, g), *e = ir_val(c->k, u[g].first);
  const Sym *b = value_bytes(m, v);
  report_decision_sym(c->r, PASS, "epilogue", e->loc, sym_mul(m->st, b, sym_const(m->st, 2)),
                      "%s(...) at %d:%d runs in the epilogue of the %s at %d:%d, on each "
                      "finished output block while it is in cache, up to %s: the %s output "
                      "(%s) is not written and read back", op_name(e->op), e->loc.line,
                      e->loc.col, op_name(v->op), v->loc.line, v->loc.col,
                      end < 0 ? "the copy into the result" : who(m, c->k, end),
                      op_kind(v->op) == IRK_CONV ? "conv" : "matmul", report_bytes_str(m->arena, b));
}

/* Matmul/conv values whose elementwise reader can run on the GEMM's
 * output blocks: flagged IRF_INLINE (loops/loops.h "Epilogues").  Returns
 * whether a flag changed. */
static bool decide_epilogues(PassCtx *c, const Uses *u, const bool *was) {
  bool changed = false;
  for (IrRef g = 0; g < c->k->nvalues; g++) {
    IrValue *v = ir_val(c->k, g);
    OpKind kd = op_kind(v->op);
    if (kd != IRK_MATMUL && kd != IRK_CONV) continue;
    IrRef end = -1;
    const char *why = v->rank <= TDSL_MAX_RANK ? epilogue_end(c, u, g, &end)
                                                  : "of too high a rank";
    if (!why) v->flags |= IRF_INLINE;
    changed |= !why != was[g];
    if (!c->r) continue;
    if (why) report_gemm(c, g, &u[g], why);
    else report_epilogue(c, g, end, u);
  }
  return changed;
}

/* Values that are never candidates (reductions, scans, normalizations, pools,
 * reshape copies, too high a rank) still get their one decision. */
static void report_own_nest(PassCtx *c, IrRef r) {
  const IrValue *v = ir_val(c->k, r);
  OpKind kd = op_kind(v->op);
  if (v->rank == 0 || kd == IRK_VIEW || v->op == OP_PARAM || v->op == OP_TENSOR) return;
  const char *why = kd == IRK_REDUCE ? "a reduction runs its own loop nest over the "
                                       "reduced dims and stores each result once"
                    : kd == IRK_SCAN ? "a scan runs its own loop nest, carrying the "
                                       "running value along the scanned dim and "
                                       "storing every step"
                    : kd == IRK_NORM ? "a normalization needs whole rows for its "
                                       "statistics, so it runs its own loop nests"
                    : kd == IRK_POOL ? "a pooling window runs its own loop nest"
                    : kd == IRK_INDEX ? "indexing by a tensor runs its own loop nest, "
                                        "loading its input at the index's positions"
                    : kd == IRK_JOIN ? "a cat runs one loop nest per input, each "
                                       "storing its slice (an elementwise input is "
                                       "computed inside its input's nest)"
                    : v->op == OP_RESHAPE ? "a reshape copy reads its operand by linear "
                                            "index in its own loop nest"
                                          : "its rank is above the loop form's limit";
  const Sym *b = value_bytes(c->m, v);
  report_decision_sym(c->r, PASS, "materialized", v->loc, sym_neg(c->m->st, b),
                      "%s(...) at %d:%d materialized (%s written): %s", op_name(v->op),
                      v->loc.line, v->loc.col, report_bytes_str(c->m->arena, b), why);
}

/* Bytes one element of r loads when r is computed inline: each operand's
 * element size, or the loads of an inlined operand, nothing for an
 * operand read through a broadcast (loop-invariant: kept in registers or
 * cache) */
static int inline_load(const IrKernel *k, const Uses *u, IrRef r) {
  const IrValue *v = ir_val(k, r);
  int b = 0;
  for (int j = 0; j < v->nargs; j++) {
    IrRef root = ir_storage_root(k, v->args[j]);
    if (broadcasts(k, v->args[j])) continue;
    b += ir_val(k, root)->flags & IRF_INLINE ? u[root].load : dtype_size(ir_val(k, root)->dtype);
  }
  return b;
}

/* Recomputing r in each of its n reads loads n * load bytes per element;
 * materializing it loads `load` once, writes its element and reads it
 * back n times.  A broadcast read counts as arbitrarily many reads. */
static bool recompute_pays(const Uses *u, int elem) {
  if (u->bcast) return u->load <= elem;
  return (int64_t)(u->n - 1) * u->load <= (int64_t)(u->n + 1) * elem;
}

/* ---- prologues: an elementwise operand evaluated by the GEMM's packing ---- */

/* Whether conv2d g has a 1 x 1 kernel: im2col then packs each input
 * element once; with KH x KW taps it packs it once per tap, and
 * recomputing a prologue that often (in a scalar packer instead of the
 * vector one) measured about 2x slower than materializing it. */
static bool one_tap(const IrKernel *k, const IrValue *g) {
  const IrValue *w = ir_val(k, g->args[1]);
  return w->rank == 4 && sym_is(w->shape[2], 1) && sym_is(w->shape[3], 1);
}

/* Whether r only widens a tensor held in memory (`x.to(i32)` of an i8
 * input, ir/dtype.h dtype_widens): the conv kernels then read the narrow
 * input itself (loops.h lf_pro_widened), at no cost per tap. */
static bool widens_memory(const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  if (v->op != OP_CAST) return false;
  const IrValue *src = ir_val(k, ir_storage_root(k, v->args[0]));
  return !(src->flags & IRF_INLINE) && src->rank > 0 &&
         dtype_widens(ir_val(k, v->args[0])->dtype, v->dtype);
}

/* Whether candidate r, blocked only by its one reader being a GEMM
 * (u->via), can be that GEMM's prologue (see the header). */
static bool prologue_ok(PassCtx *c, IrRef r, const Uses *u, int cost) {
  if (u->block != BLK_GEMM || u->n != 1 || u->bcast || cost > budget(c) ||
      u->via < 0 || ir_val(c->k, r)->rank > TDSL_MAX_RANK)
    return false;
  const IrValue *g = ir_val(c->k, u->via);
  OpKind kd = op_kind(g->op);
  if (kd != IRK_MATMUL && kd != IRK_CONV) return false;
  int found = -1;
  for (int j = 0; j < g->nargs; j++)
    if (ir_storage_root(c->k, g->args[j]) == r) found = j;
  if (kd == IRK_CONV && found == 0 && !one_tap(c->k, g) && !widens_memory(c->k, r)) return false;
  if (kd == IRK_CONV && found == 1 && !widens_memory(c->k, r)) return false;
  return found >= 0 && found < 2 && view_ok(c->m, c->k, g->args[found]);
}

static void report_prologue(PassCtx *c, IrRef r, const Uses *u) {
  IrModule *m = c->m;
  const IrValue *v = ir_val(c->k, r);
  const Sym *b = value_bytes(m, v);
  report_decision_sym(c->r, PASS, "prologue", v->loc, sym_mul(m->st, b, sym_const(m->st, 2)),
                      "%s(...) at %d:%d computed while %s packs its operand: %s not written "
                      "and read back", op_name(v->op), v->loc.line, v->loc.col,
                      who(m, c->k, u->via), report_bytes_str(m->arena, b));
}

/* ---- the pass ---- */

bool pass_fuse(PassCtx *c) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  Uses *u = count_uses(m, k);
  int *cost = arena_alloc(m->arena, sizeof *cost * (size_t)(k->nvalues + 1));
  bool *was_inl = arena_alloc(m->arena, sizeof *was_inl * (size_t)(k->nvalues + 1));
  bool changed = false;
  for (IrRef r = 0; r < k->nvalues; r++) {
    IrValue *v = ir_val(k, r);
    bool was = was_inl[r] = v->flags & IRF_INLINE;
    v->flags &= ~IRF_INLINE;
    cost[r] = 0;
    OpKind kd = op_kind(v->op);
    if (kd == IRK_MATMUL || kd == IRK_CONV) continue; /* decide_epilogues */
    if (!(candidate(v->op) || kd == IRK_INDEX) || v->rank > TDSL_MAX_RANK) {
      changed |= was;
      if (c->r) report_own_nest(c, r);
      continue;
    }
    int cs = op_cost(v->op);
    for (int j = 0; j < v->nargs; j++) {
      IrRef root = ir_storage_root(k, v->args[j]);
      cs += ir_val(k, root)->flags & IRF_INLINE ? cost[root] : 1;
    }
    cost[r] = cs;
    u[r].load = inline_load(k, u, r);
    bool inl = u[r].block == BLK_NONE && recompute_pays(&u[r], dtype_size(v->dtype)) &&
               ((u[r].n <= 1 && !u[r].bcast) || cs <= budget(c));
    bool pro = !inl && prologue_ok(c, r, &u[r], cs);
    if (inl || pro) v->flags |= IRF_INLINE;
    changed |= (inl || pro) != was;
    if (!c->r || v->rank == 0) continue; /* scalars: not worth a line */
    if (pro) report_prologue(c, r, &u[r]);
    else if (inl) report_inlined(c, r, &u[r], cs);
    else report_materialized(c, r, &u[r], cs);
  }
  return decide_epilogues(c, u, was_inl) || changed;
}
