/* eliminate_copies.c — the eliminate-copies pass: drop copies nobody
 * needs.
 *
 * A COPY (contiguous(), contiguous(channels_last), clone(), to(format))
 * or a CAST to its operand's own dtype produces the same logical values
 * as its operand, only laid out anew.  When every reader of it reads its
 * operand by logical index through whatever strides it has, the copy
 * buys nothing and costs a full read and write: its readers are
 * redirected to the operand and the copy is removed.  Such readers are
 * elementwise ops, copies and casts, reshape copies, reductions,
 * normalizations, pools, and kernel results (written to the caller's
 * descriptor with its own strides anyway).  A copy stays when a view
 * reads it (the view's geometry was computed from the copy's strides) or
 * when a matmul or convolution does (their inner loops are fastest on
 * the dense operand the copy makes).
 *
 * Decisions: "removed" with the bytes saved (2 x numel x element size,
 * symbolic when the shape is), or "kept" with the reason.  Implicit casts
 * that change the dtype are not copies a user wrote and get no decision.
 *
 * Needs: passes.h, ir.h.  Changes: operands, results, the value list. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

#define PASS "eliminate-copies"

/* A copy of its operand's values with nothing but new strides. */
static bool pure_copy(const IrKernel *k, const IrValue *v) {
  if (v->op == OP_COPY) return true;
  return v->op == OP_CAST && ir_val(k, v->args[0])->dtype == v->dtype;
}

/* Readers that address their operand through any strides. */
static bool reads_any_strides(Op op) {
  OpKind kd = op_kind(op);
  return op_is_elementwise(op) || kd == IRK_COPY || kd == IRK_REDUCE ||
         kd == IRK_NORM || kd == IRK_POOL || kd == IRK_INDEX ||
         kd == IRK_JOIN || kd == IRK_SCAN;
}

/* How the user wrote the copy: "x.contiguous()". */
static const char *copy_text(Arena *a, const IrKernel *k, const IrValue *v) {
  int nviews;
  const char *xn = pass_describe(a, k, v->args[0], &nviews);
  if (v->op == OP_CAST) return arena_printf(a, "%s.to(%s)", xn, dtype_name(v->dtype));
  if (v->flags & IRF_CLONE) return arena_printf(a, "%s.clone()", xn);
  if (v->flags & IRF_CL) return arena_printf(a, "%s.contiguous(channels_last)", xn);
  return arena_printf(a, "%s.contiguous()", xn);
}

static const char *op_article(Op op) {
  const char *n = op_name(op);
  return strchr("aeiou", n[0]) ? "an" : "a";
}

/* "an elementwise add", "a sum", "the kernel's result". */
static const char *reader_text(Arena *a, Op op) {
  const char *kind = op_is_elementwise(op) ? "elementwise " : "";
  const char *art = op_is_elementwise(op) ? "an" : op_article(op);
  return arena_printf(a, "%s %s%s", art, kind, op_name(op));
}

typedef struct Readers {
  Op ops[8];
  int nops;
  bool result;
  IrRef blocker; /* first reader that needs the copy, or -1 */
} Readers;

static void add_reader(Readers *rd, Op op) {
  for (int i = 0; i < rd->nops; i++)
    if (rd->ops[i] == op) return;
  if (rd->nops < 8) rd->ops[rd->nops++] = op;
}

static Readers readers_of(const IrKernel *k, IrRef c) {
  Readers rd = {.blocker = -1};
  for (IrRef r = c + 1; r < k->nvalues; r++) {
    const IrValue *u = ir_val(k, r);
    for (int j = 0; j < u->nargs; j++) {
      if (u->args[j] != c) continue;
      if (!reads_any_strides(u->op) && rd.blocker < 0) rd.blocker = r;
      add_reader(&rd, u->op);
    }
  }
  for (int i = 0; i < k->nresults; i++)
    if (k->results[i].value == c) rd.result = true;
  return rd;
}

static const char *readers_text(Arena *a, const Readers *rd) {
  const char *s = "";
  int n = rd->nops + rd->result;
  for (int i = 0; i < n; i++) {
    const char *one = i < rd->nops ? reader_text(a, rd->ops[i]) : "the kernel's result";
    const char *sep = i == 0 ? "" : i == n - 1 ? " and " : ", ";
    s = arena_printf(a, "%s%s%s", s, sep, one);
  }
  return s;
}

static void keep(PassCtx *c, IrRef r, const Readers *rd) {
  Arena *a = c->m->arena;
  const IrValue *v = ir_val(c->k, r), *u = ir_val(c->k, rd->blocker);
  const char *what = copy_text(a, c->k, v);
  if (op_kind(u->op) == IRK_VIEW) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) ICE("out of memory");
    pass_put_view_op(f, u);
    fclose(f);
    report_decision(c->r, PASS, "kept", v->loc, 0,
                    "%s stays: %s%s at %d:%d is a view of the copy and "
                    "needs its %s strides", what, v->name ? v->name : "the copy",
                    buf, u->loc.line, u->loc.col,
                    v->flags & IRF_CL ? "channels-last" : "row-major");
    free(buf);
  } else {
    report_decision(c->r, PASS, "kept", v->loc, 0,
                    "%s stays: the %s at %d:%d reads it as a packed dense "
                    "operand, which the copy provides", what,
                    op_name(u->op), u->loc.line, u->loc.col);
  }
}

static void remove_copy(PassCtx *c, IrRef r, const Readers *rd) {
  Arena *a = c->m->arena;
  IrKernel *k = c->k;
  const IrValue *v = ir_val(k, r);
  IrRef x = v->args[0];
  if (c->r) {
    const Sym *bytes = sym_mul(c->m->st, ir_numel(c->m, v),
                               sym_const(c->m->st, 2 * dtype_size(v->dtype)));
    const char *saved = report_bytes_str(a, bytes);
    int nviews;
    report_decision_sym(c->r, PASS, "removed", v->loc, bytes,
                        "%s is read only by %s, which read%s the strides of "
                        "%s directly: %s saved", copy_text(a, k, v),
                        readers_text(a, rd), rd->nops + rd->result > 1 ? "" : "s",
                        pass_describe(a, k, x, &nviews), saved);
  }
  for (IrRef u = r + 1; u < k->nvalues; u++) {
    IrValue *uv = ir_val(k, u);
    bool reads = false;
    for (int j = 0; j < uv->nargs; j++) reads |= uv->args[j] == r;
    if (!reads) continue;
    IrRef *args = arena_dup(a, uv->args, sizeof *args * (size_t)uv->nargs);
    for (int j = 0; j < uv->nargs; j++)
      if (args[j] == r) args[j] = x;
    uv->args = args;
  }
  for (int i = 0; i < k->nresults; i++)
    if (k->results[i].value == r) k->results[i].value = x;
}

bool pass_eliminate_copies(PassCtx *c) {
  IrKernel *k = c->k;
  bool *drop = arena_alloc(c->m->arena, (size_t)k->nvalues + 1);
  bool changed = false;
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    if (!pure_copy(k, v)) continue;
    Readers rd = readers_of(k, r);
    if (rd.nops == 0 && !rd.result) continue; /* dead: not our business */
    if (rd.blocker >= 0) {
      if (c->r) keep(c, r, &rd);
      continue;
    }
    remove_copy(c, r, &rd);
    drop[r] = true;
    changed = true;
  }
  if (changed) ir_compact(c->m, k, drop);
  return changed;
}
