/* print.c — the loop form as text (debugging, tests), entry point
 * lf_print.
 * Needs: loops.h, ir.h (op and dtype names), sym.h.  Produces: text on a
 * FILE. */
#include "loops.h"

static void print_access(FILE *f, const LfAccess *a, int n) {
  fprintf(f, "b%d[", a->buf);
  sym_print(f, a->offset);
  if (a->rt_strides) {
    fputs(" + i.rt_strides]", f);
    return;
  }
  if (a->lin_rank) {
    fputs(" | lin", f);
    n = a->lin_rank;
  }
  for (int l = 0; l < n; l++) {
    fprintf(f, " + i%d*", l);
    sym_print(f, a->stride[l]);
  }
  fputc(']', f);
}

static void print_expr(FILE *f, const LfExpr *e, int nloops) {
  switch (e->kind) {
  case LFE_LOAD: print_access(f, &e->acc, nloops); return;
  case LFE_CONST:
    if (e->dtype == DT_F64) fprintf(f, "%g", e->value.f);
    else fprintf(f, "%lld", (long long)e->value.i);
    return;
  case LFE_SYM: sym_print(f, e->sym); return;
  case LFE_ARANGE: fprintf(f, "(%g + i0*%g)", e->start, e->step); return;
  case LFE_INDEX: fprintf(f, "i%d", e->loop); return;
  case LFE_ACC: fputs("acc", f); return;
  case LFE_CAST: fprintf(f, "%s(", dtype_name(e->dtype)); break;
  case LFE_OP: fprintf(f, "%s(", op_name(e->op)); break;
  }
  for (int j = 0; j < e->nargs; j++) {
    if (j) fputs(", ", f);
    print_expr(f, e->args[j], nloops);
  }
  fputc(')', f);
}

/* A reduction loop's own bounds: " in [lo, hi)". */
static void print_red_bounds(FILE *f, const LfNest *n, int d) {
  if (!n->red_lo || !n->red_lo[d]) return;
  fputs(" in [", f);
  print_expr(f, n->red_lo[d], n->rank);
  fputs(", ", f);
  print_expr(f, n->red_hi[d], n->rank);
  fputc(')', f);
}

void lf_print(FILE *f, const LfKernel *lk) {
  static const char *const kinds[] = {"param", "scalar", "const", "scratch",
                                      "output"};
  fprintf(f, "kernel %s\n", lk->k->name);
  for (int b = 0; b < lk->nbufs; b++) {
    fprintf(f, "  b%d = %s %d %s", b, kinds[lk->bufs[b].kind],
            lk->bufs[b].index, dtype_name(lk->bufs[b].dtype));
    if (lk->bufs[b].size) {
      fputs(" size ", f);
      sym_print(f, lk->bufs[b].size);
    }
    fputc('\n', f);
  }
  for (int i = 0; i < lk->nnests; i++) {
    const LfNest *n = &lk->nests[i];
    fputs("  for [", f);
    for (int d = 0; d < n->rank; d++) {
      if (d) fputs(", ", f);
      sym_print(f, n->shape[d]);
    }
    fputs("]", f);
    if (n->reduce != OP_COUNT) {
      fprintf(f, " %s over [", op_name(n->reduce));
      for (int d = 0; d < n->nred; d++) {
        if (d) fputs(", ", f);
        sym_print(f, n->red[d]);
        print_red_bounds(f, n, d);
      }
      fputs("]", f);
    }
    fputs(": ", f);
    print_access(f, &n->store, n->rank);
    fprintf(f, " = %s ", dtype_name(n->dtype));
    print_expr(f, n->value, n->rank + n->nred);
    if (n->post) {
      fputs(" then ", f);
      print_expr(f, n->post, n->rank);
    }
    fputc('\n', f);
  }
}

