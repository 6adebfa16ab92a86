/* describe.c — IR values in the user's terms, for report sentences.
 *
 * pass_describe spells a value as the chain of views that made it from
 * its storage root, in PyTorch's syntax ("x[0].t()", "v[2:10][1:8:3]");
 * the root (or any non-view value) is its source name, or when it has
 * none a scalar literal as written or `op(operands)` ("add(y, 1.0)");
 * pass_describe_at adds where an unnamed root is ("at 3:12").  Strings
 * live in the arena.
 *
 * Needs: passes.h, ir.h. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static bool is_view(const IrKernel *k, IrRef r) {
  return op_kind(ir_val(k, r)->op) == IRK_VIEW;
}

static void put_syms(FILE *f, const Sym *const *s, int n) {
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", f);
    sym_print(f, s[i]);
  }
}

static void put_list(FILE *f, const Sym *const *s, int n) {
  fputc('[', f);
  put_syms(f, s, n);
  fputc(']', f);
}

/* A scalar constant as the source would write it, in the fewest digits
 * that give the same value in its dtype: 2.5, 1.0, 3, true. */
static void put_const(FILE *f, const IrValue *v) {
  if (v->dtype == DT_BOOL) {
    fputs(v->value.i ? "true" : "false", f);
    return;
  }
  if (!dtype_is_float(v->dtype)) {
    fprintf(f, "%lld", (long long)v->value.i);
    return;
  }
  unsigned char want[8], got[8];
  char b[40];
  scalar_store(v->dtype, want, v->value);
  for (int p = 1; p <= 17; p++) {
    snprintf(b, sizeof b, "%.*g", p, v->value.f);
    scalar_store(v->dtype, got, (Scalar){.f = strtod(b, NULL)});
    if (!memcmp(want, got, (size_t)dtype_size(v->dtype))) break;
  }
  fputs(b, f);
  if (!strpbrk(b, ".einf")) fputs(".0", f);
}

/* The literal r is, or NULL: a 0-dim constant, possibly cast to the
 * dtype of the tensor it meets (`x * 2.0` with x f32 casts 2.0). */
static const IrValue *literal(const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  if (v->op == OP_CAST && v->rank == 0) v = ir_val(k, v->args[0]);
  return v->op == OP_CONST && v->rank == 0 ? v : NULL;
}

static void put_chain(FILE *f, const IrKernel *k, IrRef r, int *n, int depth);

/* The source name of r; unnamed: a scalar literal as written, other values
 * as `op(operands)` with operands spelled one level deep ("add(y, 1.0)",
 * "mul(..., 2.0)"); never the IR's %N. */
static void put_name(FILE *f, const IrKernel *k, IrRef r, int depth) {
  const IrValue *v = ir_val(k, r);
  if (v->name) fputs(v->name, f);
  else if (literal(k, r)) put_const(f, literal(k, r));
  else if (depth > 0) fputs("...", f);
  else {
    int n = 0;
    fprintf(f, "%s(", op_name(v->op));
    for (int i = 0; i < v->nargs; i++) {
      if (i) fputs(", ", f);
      put_chain(f, k, v->args[i], &n, depth + 1);
    }
    fputs(v->nattrs && !op_is_elementwise(v->op) ? ", ...)" : ")", f);
  }
}

/* Indexing of one dim: "[:, :, a:b]" with `d` leading full dims. */
static void put_index(FILE *f, int d, const Sym *const *parts, int n) {
  fputc('[', f);
  for (int i = 0; i < d; i++) fputs(":, ", f);
  for (int i = 0; i < n; i++) {
    if (i) fputc(':', f);
    sym_print(f, parts[i]);
  }
  fputc(']', f);
}

/* One view op in PyTorch's spelling, as applied to its operand. */
void pass_put_view_op(FILE *f, const IrValue *v) {
  const Sym *const *a = v->attrs;
  int64_t d = 0;
  if (v->nattrs) sym_is_const(a[0], &d);
  switch (v->op) {
  case OP_VIEW: fputs(".view(", f); put_syms(f, a, v->nattrs); fputc(')', f); break;
  case OP_PERMUTE:
    if (v->rank == 2 && sym_is(a[0], 1)) fputs(".t()", f);
    else fputs(".permute(", f), put_syms(f, a, v->nattrs), fputc(')', f);
    break;
  case OP_EXPAND:
    fputs(v->flags & IRF_IMPLICIT ? " broadcast to " : ".expand(", f);
    if (v->flags & IRF_IMPLICIT) put_list(f, v->shape, v->rank);
    else put_syms(f, a, v->nattrs), fputc(')', f);
    break;
  case OP_UNSQUEEZE: fputs(".unsqueeze(", f); put_syms(f, a, 1); fputc(')', f); break;
  case OP_SQUEEZE: fputs(".squeeze(", f); put_syms(f, a, v->nattrs); fputc(')', f); break;
  case OP_SLICE: {
    const Sym *parts[3] = {a[1], a[2], a[3]};
    put_index(f, (int)d, parts, sym_is(a[3], 1) ? 2 : 3);
    break;
  }
  case OP_SELECT: put_index(f, (int)d, &a[1], 1); break;
  case OP_DIAGONAL: fputs(".diagonal(", f); put_syms(f, a, 3); fputc(')', f); break;
  case OP_UNFOLD: fputs(".unfold(", f); put_syms(f, a, 3); fputc(')', f); break;
  default:
    fputs(".as_strided(", f);
    put_list(f, v->shape, v->rank);
    fputs(", ", f);
    put_list(f, v->stride, v->rank);
    fputc(')', f);
    break;
  }
}

/* The chain from the root to r, e.g. "x.t()[2:]"; *n = views in it. */
static void put_chain(FILE *f, const IrKernel *k, IrRef r, int *n, int depth) {
  if (!is_view(k, r)) {
    put_name(f, k, r, depth);
    return;
  }
  put_chain(f, k, ir_val(k, r)->args[0], n, depth);
  /* an operand's implicit broadcast is not in the source: "add(y, 1.0)" */
  if (depth > 0 && (ir_val(k, r)->flags & IRF_IMPLICIT)) return;
  pass_put_view_op(f, ir_val(k, r));
  (*n)++;
}

char *pass_describe(Arena *a, const IrKernel *k, IrRef r, int *n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("out of memory");
  *n = 0;
  put_chain(f, k, r, n, 0);
  fclose(f);
  char *s = arena_strdup(a, buf);
  free(buf);
  return s;
}

char *pass_describe_at(Arena *a, const IrKernel *k, IrRef r) {
  int n;
  char *s = pass_describe(a, k, r, &n);
  IrRef rr = ir_storage_root(k, r);
  const IrValue *root = ir_val(k, rr), *lit = literal(k, rr);
  if (root->name) return s;
  Loc at = lit ? lit->loc : root->loc; /* a literal's own position */
  return arena_printf(a, "%s%s at %d:%d", lit && !n ? "the scalar " : "", s, at.line,
                      at.col);
}

char *pass_geom_text(Arena *a, const IrValue *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("out of memory");
  fputs("shape ", f);
  put_list(f, v->shape, v->rank);
  fputs(" strides ", f);
  put_list(f, v->stride, v->rank);
  fputs(" offset ", f);
  sym_print(f, v->offset);
  fclose(f);
  char *s = arena_strdup(a, buf);
  free(buf);
  return s;
}

char *pass_shape_text(Arena *a, const IrValue *v) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("out of memory");
  put_list(f, v->shape, v->rank);
  fclose(f);
  char *s = arena_strdup(a, buf);
  free(buf);
  return s;
}

