/* print.c — the loop form as text (tdslc --emit=loops, the HTML report's
 * loop form), entry point lf_print.  The format is for people and for
 * golden tests (tests/golden/loops/): stable (nothing depends on
 * addresses or timing), one section per kernel, e.g.
 *
 *   kernel linear -O2: 4 buffers, 1 nest, scratch 0 bytes; schedules for cpu
 *     b0 param b: f32
 *     b1 output out0: f32
 *     b2 param x: f32
 *     b3 param w: f32
 *     nest 0: result copy to out0
 *       for i0 < N, i1 < 128
 *       gemm matmul %4: f32 -> b1[i0*128 + i1]
 *         a over [N, 64]: b2[d0*64 + d1]
 *         b over [64, 128]: b3[d0 + d1*64]
 *       store b1[i0*128 + i1]: f32
 *       epilogue: gelu(add(acc, b0[i1]))
 *
 *   kernel norms -O2: 4 buffers, 3 nests, scratch 8*max(M, 1) bytes; schedules for cpu
 *     ...
 *     b1 scratch stats of %1: f32[max(M, 1)], 4*max(M, 1) bytes
 *     ...
 *     row group of 3 nests sharing i0 < M
 *       nest 0: %1 = log_softmax @2:10
 *         for i0 < M
 *         amax over i1 < K
 *         store b1[i0]: f32 = b0[i0*K + i1]
 *       ...
 *
 * The heading gives the kernel, the level it was lowered at, the
 * scratch one call allocates (lf_scratch_total) and the row of the
 * schedule's parameter table the schedules are for (LfTarget.name:
 * `cpu`, `cuda`).  Buffers bN, in the
 * order lowering made them: `param NAME`, `scalar NAME`, `output outI`,
 * `const %R` and `scratch %R` (the IR value held; `stats of %R` for a
 * normalization's statistics) with dtype[elements], a scratch buffer
 * with its bytes or its plan-memory block (`block S of B bytes` where
 * the block is allocated, `in block S (bJ's)` for the buffers sharing
 * it).  Then the nests in execution order, those of a row group (loops.h
 * LfNest.group) indented under `row group of G nests sharing i0 < ...`.
 * A nest: its heading (the IR value it computes, `%R = op @line:col
 * "name"` as --emit=ir numbers it, or `result copy to outI`); its outer
 * loops (`for i0 < N, ...`, `once` without any; `in memory order ...`
 * when they do not nest as numbered); its reduction loops (`sum over i2
 * < K`, numbered after the outer ones; a pool window's own bounds `in
 * [lo, hi)`); its schedule for the target (`schedule: (i0 i1) (i2) |
 * (i3), tile i1 by 32, parallel over 1`: print_schedule); `store ACCESS: DTYPE = EXPR` (with `post: EXPR` after a
 * reduction, `acc` the reduced value).  A matmul/conv2d nest instead has
 * `gemm OP %R: DTYPE -> ACCESS` (where the GEMM writes its value), for
 * a conv2d on the CPU `algorithm: implicit GEMM | depthwise | direct`
 * (conv_algo.c: the kernel the backend runs), on CUDA `kernel: tensor
 * cores ... | CUDA cores` (lf_gemm_mma), its
 * operands over their own dims d0, d1, ... (a buffer access, or
 * `prologue EXPR` evaluated while packing), and with an epilogue the
 * `store` and `epilogue: EXPR` (`acc`: the GEMM's value).
 * An access `bB[offset + i0*stride + ...]` counts elements, zero strides
 * left out; `outI.stride(d)` is an output descriptor's run-time stride;
 * a reshape's linear read is `bB[c0*s0 + ... with c = (i0, ...) split
 * over [A, B, ...]]`.  Expressions are `op(args)` with the IR's op
 * names (`gelu[tanh]` for approximate="tanh"), `f32(x)` a conversion,
 * float constants with a point (`1.0`).
 *
 * Needs: loops.h, ir.h (op, dtype and value names), sym.h (sizes).
 * Produces: text on a FILE. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "loops.h"

typedef struct Printer {
  FILE *f;
  IrModule *m;
  const LfKernel *lk;
  const LfTarget *t;
  int opt;
} Printer;

/* Shortest of %.15g..%.17g that reads back to the same double. */
static void print_double(FILE *f, double v) {
  char buf[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  fputs(buf, f);
  if (!strpbrk(buf, ".eEn")) fputs(".0", f); /* 1.0: a float, not an integer */
}

/* A size as a factor of a product: bracketed when it is negative or has
 * a sum, floor division or modulo outside parentheses. */
static void print_factor(Printer *p, const Sym *s) {
  char *t = sym_str(p->m->arena, s);
  bool paren = t[0] == '-';
  for (int i = 0, depth = 0; t[i] && !paren; i++) {
    depth += (t[i] == '(') - (t[i] == ')');
    paren = depth == 0 && (t[i] == ' ' || t[i] == '/' || t[i] == '%');
  }
  fprintf(p->f, paren ? "(%s)" : "%s", t);
}

/* " + " between the terms of an index sum. */
static void term_sep(Printer *p, bool *first) {
  if (!*first) fputs(" + ", p->f);
  *first = false;
}

/* var*stride, or var alone for stride 1; nothing for stride 0. */
static void print_term(Printer *p, bool *first, const char *var, int l, const Sym *stride) {
  if (sym_is(stride, 0)) return;
  term_sep(p, first);
  fprintf(p->f, "%s%d", var, l);
  if (sym_is(stride, 1)) return;
  fputc('*', p->f);
  print_factor(p, stride);
}

/* a over n loop variables named var0, var1, ... */
static void print_expr(Printer *p, const LfExpr *e, int nloops, const char *var);

static void print_access(Printer *p, const LfAccess *a, int n, const char *var) {
  FILE *f = p->f;
  bool first = true;
  fprintf(f, "b%d[", a->buf);
  if (a->offset && !sym_is(a->offset, 0)) {
    term_sep(p, &first);
    sym_print(f, a->offset);
  }
  if (a->rt_strides) {
    int out = p->lk->bufs[a->buf].index;
    for (int l = 0; l < n; l++) {
      term_sep(p, &first);
      fprintf(f, "%s%d*out%d.stride(%d)", var, l, out, l);
    }
  } else if (a->lin_rank) {
    for (int l = 0; l < a->lin_rank; l++) print_term(p, &first, "c", l, a->stride[l]);
    if (first) fputc('0', f);
    fputs(" with c = (", f);
    for (int l = 0; l < n; l++) fprintf(f, "%s%s%d", l ? ", " : "", var, l);
    fputs(") split over [", f);
    for (int l = 0; l < a->lin_rank; l++) {
      if (l) fputs(", ", f);
      sym_print(f, a->lin_shape[l]);
    }
    fputc(']', f);
    first = false;
  } else {
    for (int l = 0; l < n; l++) print_term(p, &first, var, l, a->stride[l]);
  }
  for (int t = 0; t < a->ndyn; t++) { /* indexing by tensors: + (index)*stride */
    term_sep(p, &first);
    fputc('(', f);
    print_expr(p, a->dyn[t], n, var);
    fputc(')', f);
    if (!sym_is(a->dyn_stride[t], 1)) {
      fputc('*', f);
      sym_print(f, a->dyn_stride[t]);
    }
  }
  if (first) fputc('0', f);
  fputc(']', f);
}

static void print_expr(Printer *p, const LfExpr *e, int nloops, const char *var) {
  FILE *f = p->f;
  switch (e->kind) {
  case LFE_LOAD: print_access(p, &e->acc, nloops, var); return;
  case LFE_CONST:
    if (e->dtype == DT_F64) print_double(f, e->value.f);
    else fprintf(f, "%" PRId64, e->value.i);
    return;
  case LFE_SYM: sym_print(f, e->sym); return;
  case LFE_ARANGE:
    fputc('(', f);
    print_double(f, e->start);
    fprintf(f, " + %s%d*", var, e->loop);
    print_double(f, e->step);
    fputc(')', f);
    return;
  case LFE_INDEX: fprintf(f, "%s%d", var, e->loop); return;
  case LFE_ACC: fputs("acc", f); return;
  case LFE_CAST: fprintf(f, "%s(", dtype_name(e->dtype)); break;
  case LFE_OP:
    fprintf(f, "%s%s(", op_name(e->op), e->op == OP_GELU && (e->flags & IRF_TANH) ? "[tanh]" : "");
    break;
  }
  for (int j = 0; j < e->nargs; j++) {
    if (j) fputs(", ", f);
    print_expr(p, e->args[j], nloops, var);
  }
  fputc(')', f);
}

/* ---- buffers ---- */

static void print_scratch_block(Printer *p, int b) {
  const LfBuf *x = &p->lk->bufs[b];
  if (x->kind != LFB_SCRATCH) return;
  if (x->slot <= 0) {
    fputs(", ", p->f);
    sym_print(p->f, lf_scratch_bytes(p->m->st, x));
    fputs(" bytes", p->f);
    return;
  }
  int holder = lf_slot_shared(p->lk, b);
  if (holder) {
    fprintf(p->f, ", in block %d (b%d's)", x->slot, holder - 1);
    return;
  }
  fprintf(p->f, ", block %d of ", x->slot);
  sym_print(p->f, x->slot_bytes);
  fputs(" bytes", p->f);
}

static void print_buf(Printer *p, int b) {
  FILE *f = p->f;
  const LfBuf *x = &p->lk->bufs[b];
  const IrKernel *k = p->lk->k;
  fprintf(f, "  b%d ", b);
  switch (x->kind) {
  case LFB_PARAM: fprintf(f, "param %s: %s", k->params[x->index].name, dtype_name(x->dtype)); break;
  case LFB_SCALAR: fprintf(f, "scalar %s: %s", k->params[x->index].name, dtype_name(x->dtype)); break;
  case LFB_OUTPUT: fprintf(f, "output out%d: %s", x->index, dtype_name(x->dtype)); break;
  case LFB_CONST:
  case LFB_SCRATCH:
    fprintf(f, "%s %s%%%d: %s[", x->kind == LFB_CONST ? "const" : "scratch",
            x->stats ? "stats of " : "", x->index, dtype_name(x->dtype));
    sym_print(f, x->size);
    fputc(']', f);
    print_scratch_block(p, b);
    break;
  }
  fputc('\n', f);
}

/* ---- nests ---- */

static void indent(Printer *p, int depth) {
  for (int i = 0; i < depth; i++) fputs("  ", p->f);
}

/* "%7 = add @2:9 "h"", or "result copy". */
static void print_heading(Printer *p, int i, int depth) {
  const LfNest *n = &p->lk->nests[i];
  indent(p, depth);
  fprintf(p->f, "nest %d: ", i);
  if (n->check) fputs("index check of ", p->f);
  if (n->src < 0) { /* its store is the output's buffer */
    fprintf(p->f, "result copy to out%d\n", p->lk->bufs[n->store.buf].index);
    return;
  }
  const IrValue *v = ir_val(p->lk->k, n->src);
  fprintf(p->f, "%%%d = %s @%d:%d", n->src, op_name(v->op), v->loc.line, v->loc.col);
  if (v->name) fprintf(p->f, " \"%s\"", v->name);
  fputc('\n', p->f);
}

static void print_loops(Printer *p, const LfNest *n, int depth) {
  FILE *f = p->f;
  indent(p, depth);
  fputs(n->rank ? "for " : "once", f);
  for (int l = 0; l < n->rank; l++) {
    fprintf(f, "%si%d < ", l ? ", " : "", l);
    sym_print(f, n->shape[l]);
  }
  if (n->order) {
    fputs(", in memory order", f);
    for (int l = 0; l < n->rank; l++) fprintf(f, " i%d", n->order[l]);
  }
  fputc('\n', f);
  if (n->reduce == OP_COUNT || n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) return;
  indent(p, depth);
  if (lf_is_scan(n)) { /* "cumsum along i1 < N from f64(0), storing each step" */
    fprintf(f, "%s along i%d < ", op_name(n->reduce), n->rank);
    sym_print(f, n->red[0]);
    fputs(" from ", f);
    print_expr(p, n->scan_init, n->rank, "i");
    fputs(", storing each step\n", f);
    return;
  }
  fprintf(f, "%s over", op_name(n->reduce));
  for (int l = 0; l < n->nred; l++) {
    fprintf(f, "%s i%d < ", l ? "," : "", n->rank + l);
    sym_print(f, n->red[l]);
    if (!n->red_lo || !n->red_lo[l]) continue;
    fputs(" in [", f);
    print_expr(p, n->red_lo[l], n->rank, "i");
    fputs(", ", f);
    print_expr(p, n->red_hi[l], n->rank, "i");
    fputc(')', f);
  }
  if (!n->nred) fputs(" nothing", f);
  fputc('\n', f);
}

static void print_store(Printer *p, const LfNest *n, const LfExpr *value, int nloops,
                        int depth) {
  indent(p, depth);
  fputs("store ", p->f);
  print_access(p, &n->store, n->rank + lf_is_scan(n), "i");
  fprintf(p->f, ": %s", dtype_name(n->dtype));
  if (value) {
    fputs(" = ", p->f);
    print_expr(p, value, nloops, "i");
  }
  fputc('\n', p->f);
}

/* A matmul/conv2d nest: the GEMM, its operands, its epilogue. */
static void print_gemm(Printer *p, const LfNest *n, int depth) {
  static const char *const mm[] = {"a", "b", "?"}, *const conv[] = {"x", "w", "bias"};
  FILE *f = p->f;
  const IrValue *g = ir_val(p->lk->k, n->gemm);
  indent(p, depth);
  fprintf(f, "gemm %s %%%d: %s -> ", op_name(n->reduce), n->gemm, dtype_name(n->cdtype));
  print_access(p, &n->cstore, g->rank, "i");
  fputc('\n', f);
  if (n->reduce == OP_CONV2D && !strcmp(p->t->name, "cpu")) { /* conv_algo.c */
    indent(p, depth + 1);
    fprintf(f, "algorithm: %s\n", lf_conv_algo_name(lf_conv_algo(p->lk->k, n, p->t)));
  }
  if (!strcmp(p->t->name, "cuda")) { /* cuda/gemm.c */
    indent(p, depth + 1);
    fputs(lf_gemm_mma(p->lk->k, n, p->opt) ? "kernel: tensor cores (mma.m16n8k16, f32 accumulation) at sm_80+\n"
                                           : "kernel: CUDA cores\n", f);
  }
  for (int j = 0; j < n->nopnd; j++) {
    const IrValue *x = ir_val(p->lk->k, g->args[j]);
    indent(p, depth + 1);
    fprintf(f, "%s over [", (n->reduce == OP_CONV2D ? conv : mm)[j]);
    for (int d = 0; d < x->rank; d++) {
      if (d) fputs(", ", f);
      sym_print(f, x->shape[d]);
    }
    fputs("]: ", f);
    if (j < 2 && n->pro[j]) {
      fputs("prologue ", f);
      print_expr(p, n->pro[j], x->rank, "d");
    } else {
      print_access(p, &n->opnd[j], x->rank, "d");
    }
    fputc('\n', f);
  }
  if (!n->post) return;
  print_store(p, n, NULL, n->rank, depth);
  indent(p, depth);
  fputs("epilogue: ", f);
  print_expr(p, n->post, n->rank, "i");
  fputc('\n', f);
}

/* "schedule: (i0 i1 i2) (i3), tile i2 by 32, parallel over 1": the
 * nest's schedule for the target (loops/schedule.c), its virtual loops in
 * the order they run, each listing the loops it collapses (the last one,
 * innermost, is the unit-stride loop a backend vectorizes); a transposing
 * nest's tile loop (`one tile` when its extent fits one); the leading
 * outer virtual loops that form the parallel index (all of them on
 * CUDA, LfTarget.par_all). */
static void print_schedule(Printer *p, const LfNest *n, int depth) {
  LfSchedule s = lf_schedule(p->m->st, n, p->t);
  FILE *f = p->f;
  indent(p, depth);
  fputs("schedule:", f);
  for (int k = 0; k < s.n; k++) {
    fputs(k == s.nouter ? " | (" : " (", f);
    for (int j = 0; j < s.count[k]; j++) fprintf(f, "%si%d", j ? " " : "", s.order[s.first[k] + j]);
    fputc(')', f);
  }
  if (s.tile_var >= 0)
    fprintf(f, ", tile i%d by %d%s", s.tile_var, s.tile, s.blocked ? "" : " (one tile)");
  if (s.nouter) fprintf(f, ", parallel over %d", s.par);
  fputc('\n', f);
}

static void print_nest(Printer *p, int i, int depth) {
  const LfNest *n = &p->lk->nests[i];
  print_heading(p, i, depth);
  print_loops(p, n, depth + 1);
  if (n->reduce == OP_MATMUL || n->reduce == OP_CONV2D) {
    print_gemm(p, n, depth + 1);
    return;
  }
  print_schedule(p, n, depth + 1);
  if (n->check) { /* "check 0 <= b1[i0] < N" */
    indent(p, depth + 1);
    fprintf(p->f, "check %s <= ", n->check->wrap ? "-bound" : "0");
    print_expr(p, n->value, n->rank, "i");
    fputs(" < bound = ", p->f);
    sym_print(p->f, n->check->bound);
    fputs(", else TDSL_E_INDEX\n", p->f);
    return;
  }
  print_store(p, n, n->value, n->rank + n->nred, depth + 1);
  if (!n->post) return;
  indent(p, depth + 1);
  fputs("post: ", p->f);
  print_expr(p, n->post, n->rank, "i");
  fputc('\n', p->f);
}

/* "row group of 3 nests sharing i0 < N" */
static void print_group(Printer *p, const LfNest *n) {
  fprintf(p->f, "  row group of %d nests sharing", n->group);
  for (int l = 0; l < n->shared; l++) {
    fprintf(p->f, "%s i%d < ", l ? "," : "", l);
    sym_print(p->f, n->shape[l]);
  }
  fputc('\n', p->f);
}

void lf_print(FILE *f, IrModule *m, const LfKernel *lk, int opt_level, const LfTarget *t) {
  Printer p = {.f = f, .m = m, .lk = lk, .t = t, .opt = opt_level};
  const Sym *scratch = lf_scratch_total(m->st, lk);
  fprintf(f, "kernel %s -O%d: %d buffer%s, %d nest%s, scratch ", lk->k->name, opt_level,
          lk->nbufs, lk->nbufs == 1 ? "" : "s", lk->nnests, lk->nnests == 1 ? "" : "s");
  sym_print(f, scratch);
  fprintf(f, " bytes; schedules for %s\n", t->name);
  for (int b = 0; b < lk->nbufs; b++) print_buf(&p, b);
  for (int i = 0, end = 0; i < lk->nnests; i++) {
    if (lk->nests[i].group > 1) {
      print_group(&p, &lk->nests[i]);
      end = i + lk->nests[i].group;
    }
    print_nest(&p, i, i < end ? 2 : 1);
  }
}
