/* describe.c — IR values in the user's terms, for report sentences.
 *
 * pass_describe spells a value as the chain of views that made it from
 * its storage root, in PyTorch's syntax ("x[0].t()", "v[2:10][1:8:3]");
 * the root (or any non-view value) is its source name, or %N when it has
 * none.  Strings live in the arena.
 *
 * Needs: passes.h, ir.h. */
#include <stdlib.h>

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

/* `%3` or the source name of r. */
static void put_name(FILE *f, const IrKernel *k, IrRef r) {
  const char *n = ir_val(k, r)->name;
  if (n) fputs(n, f);
  else fprintf(f, "%%%d", r);
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
static void put_chain(FILE *f, const IrKernel *k, IrRef r, int *n) {
  if (!is_view(k, r)) {
    put_name(f, k, r);
    return;
  }
  put_chain(f, k, ir_val(k, r)->args[0], n);
  pass_put_view_op(f, ir_val(k, r));
  (*n)++;
}

char *pass_describe(Arena *a, const IrKernel *k, IrRef r, int *n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) ICE("out of memory");
  *n = 0;
  put_chain(f, k, r, n);
  fclose(f);
  char *s = arena_strdup(a, buf);
  free(buf);
  return s;
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

