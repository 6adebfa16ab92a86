/* print.c — the textual form of the IR, read back by ir_read() (read.c).
 *
 * Needs: ir.h, sym_print() for expressions.  Produces text that carries
 * every field of an IrModule, so read(print(m)) prints identically.  (Not
 * carried, being unused: `value` of ops other than PARAM/CONST/FULL, flag
 * bits above IRF_INLINE, a scalar parameter's layout; a NULL check message
 * prints as "".)
 *
 *   module "mlp.tdsl"
 *
 *   kernel mlp(x: f32[N, 784] contiguous %0 @1:12:1, w: f32[128, 784]
 *       strided %1 @1:31:1, s: f32 %2 @1:58:1) -> (f32[N, 128] contiguous
 *       @1:68:3) @1:8:3 {
 *     sym N = size x.0 @1:19:1
 *     sym w.stride(0) = stride w.0
 *     check N <= 4 "select(): index 4 is out of range" @3:9:6
 *     %0 = param 0 : f32[N, 784] (784, 1) +0 @1:12:1 "x"
 *     %1 = param 1 : f32[128, 784] (w.stride(0), 1) +0 @1:31:1 "w"
 *     %2 = param 2 : f32[] () +0 @1:58:1 "s"
 *     %3 = permute %1 [1, 0] : f32[784, 128] (1, w.stride(0)) +0 @2:9:1 "wt"
 *     %4 = matmul %0, %3 : f32[N, 128] (128, 1) +0 @2:15:1
 *     %5 = const 2.5 wrapped : f32[] () +0 @3:15:3
 *     %6 = expand %5 [N, 128] implicit : f32[N, 128] (0, 0) +0 @3:13:1
 *     %7 = layer_norm %4 [1] {eps=1e-05} : f32[N, 128] (128, 1) +0 @4:7:10
 *     %8 = tensor data [1, 2, 3] : i64[3] (1) +0 @5:7:6
 *     return %7
 *   }
 *
 * (The kernel line is one line; it is wrapped here only for width.)  A
 * `strided` result also carries the strides its shape query writes
 * (IrResult.qstride): `-> (f32[6, N] strided (1, 6) @1:40:3)`.
 *
 * Grammar, one construct per line:
 *   module   := ('module' STRING)? kernel*
 *   kernel   := 'kernel' NAME '(' param,* ')' '->' '(' result,* ')' loc?
 *               '{' sym* check* value* 'return' ref,* '}'
 *   param    := NAME ':' DTYPE ('[' expr,* ']' LAYOUT)? ('%'N)? loc?
 *               (brackets make a tensor; no %N: value -1)
 *   result   := DTYPE '[' expr,* ']' LAYOUT loc?   (value: in `return`)
 *   sym      := 'sym' SYMNAME '=' ('size'|'stride') PARAM '.' DIM loc?
 *   check    := 'check' expr ('=='|'<='|'<') expr STRING loc?
 *   value    := '%'N '=' OP ref,* ('[' expr,* ']')? ('{' key=FLOAT,* '}')?
 *               NUMBER? ('data' '[' NUMBER,* ']')? FLAG*
 *               ':' DTYPE '[' expr,* ']' '(' expr,* ')' '+' expr loc? STRING?
 *   ref      := '%'N | 'none' (-1)
 *   loc      := '@' LINE ':' COL (':' LEN)?   (omitted when all zero)
 *
 * NUMBER is the value of PARAM (parameter index), CONST and FULL: an
 * integer, or for float dtypes the shortest of %.15g..%.17g that reads
 * back to the same double ('nan', 'inf', '-inf' spelled out; a NaN's sign
 * and payload are not kept).  Float attributes are `start`, `step`
 * (ARANGE), `eps` (LAYER_NORM), or `f0`, `f1` on other ops when nonzero.
 * FLAGs are wrapped implicit keepdim tanh cl clone weight bias.
 * Expressions are sym_print()'s: integers, symbol names of the kernel
 * (`x.stride(1)` included), + - * // % min() max() and parentheses.
 * Strings escape `"`, `\` and non-printing bytes (\n, \t, \xHH).  `#`
 * starts a comment.  Newlines matter in one place: a '%' that starts a
 * line begins a value, never a modulo continuing the previous line. */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "ir.h"

static const char *const flag_names[] = {"wrapped", "implicit", "keepdim",
                                         "tanh",    "cl",       "clone",
                                         "weight",  "bias",     "inline",
                                         "wrap",    "inbounds"};

/* Shortest of %.15g..%.17g that reads back to the same double. */
static void print_double(FILE *f, double v) {
  if (isnan(v)) {
    fputs("nan", f);
    return;
  }
  if (isinf(v)) {
    fputs(v < 0 ? "-inf" : "inf", f);
    return;
  }
  char buf[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  fputs(buf, f);
}

static void print_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", f);
    else if (*p == '\t') fputs("\\t", f);
    else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
    else fputc(*p, f);
  }
  fputc('"', f);
}

static void print_sym(FILE *f, const Sym *s) {
  if (s) sym_print(f, s);
  else fputs("?", f);
}

/* Separated list of n expressions between open and close. */
static void print_syms(FILE *f, char open, const Sym *const *v, int n,
                       char close) {
  fputc(open, f);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", f);
    print_sym(f, v ? v[i] : NULL);
  }
  fputc(close, f);
}

static void print_loc(FILE *f, Loc l) {
  if (l.line == 0 && l.col == 0 && l.len == 0) return;
  fprintf(f, " @%d:%d", l.line, l.col);
  if (l.len) fprintf(f, ":%d", l.len);
}

static void print_ref(FILE *f, IrRef r) {
  if (r < 0) fputs("none", f);
  else fprintf(f, "%%%d", r);
}

static const char *dtype_str(DType t) {
  return t >= 0 && t < DT_COUNT ? dtype_name(t) : "?";
}

static const char *layout_str(Layout l) {
  return l >= LAYOUT_CONTIGUOUS && l <= LAYOUT_STRIDED ? layout_name(l) : "?";
}

/* A scalar of dtype t held in v (.f for floats, .i otherwise). */
static void print_scalar(FILE *f, DType t, Scalar v) {
  if (t >= 0 && t < DT_COUNT && dtype_is_float(t)) print_double(f, v.f);
  else fprintf(f, "%" PRId64, v.i);
}

static void print_fattrs(FILE *f, const IrValue *v) {
  const char *k0 = "f0", *k1 = "f1";
  bool show0 = v->fattr[0] != 0, show1 = v->fattr[1] != 0, show2 = v->fattr[2] != 0;
  if (v->op == OP_ARANGE) {
    k0 = "start", k1 = "step";
    show0 = show1 = true;
  } else if (v->op == OP_LAYER_NORM) {
    k0 = "eps";
    show0 = true;
  }
  if (!show0 && !show1 && !show2) return;
  fputs(" {", f);
  if (show0) {
    fprintf(f, "%s=", k0);
    print_double(f, v->fattr[0]);
  }
  if (show1) {
    fprintf(f, "%s%s=", show0 ? ", " : "", k1);
    print_double(f, v->fattr[1]);
  }
  if (show2) {
    fprintf(f, "%sf2=", show0 || show1 ? ", " : "");
    print_double(f, v->fattr[2]);
  }
  fputc('}', f);
}

/* TENSOR data, printed only when the shape is constant (its length). */
static void print_data(FILE *f, const IrValue *v) {
  if (v->op != OP_TENSOR || !v->data || v->dtype < 0 || v->dtype >= DT_COUNT)
    return;
  int64_t n = 1, d;
  for (int i = 0; i < v->rank; i++) {
    if (!v->shape || !v->shape[i] || !sym_is_const(v->shape[i], &d) || d < 0)
      return;
    n *= d;
  }
  fputs(" data [", f);
  const char *p = v->data;
  for (int64_t i = 0; i < n; i++, p += dtype_size(v->dtype)) {
    if (i) fputs(", ", f);
    print_scalar(f, v->dtype, scalar_load(v->dtype, p));
  }
  fputc(']', f);
}

static void print_value(FILE *f, const IrKernel *k, IrRef r) {
  const IrValue *v = ir_val(k, r);
  bool known = v->op >= 0 && v->op < OP_COUNT;
  fprintf(f, "  %%%d = %s", r, known ? op_name(v->op) : "?");
  for (int i = 0; i < v->nargs; i++) {
    fputs(i ? ", " : " ", f);
    print_ref(f, v->args ? v->args[i] : -1);
  }
  if (v->nattrs > 0) {
    fputc(' ', f);
    print_syms(f, '[', v->attrs, v->nattrs, ']');
  }
  print_fattrs(f, v);
  if (v->op == OP_PARAM) fprintf(f, " %" PRId64, v->value.i);
  if (v->op == OP_CONST || v->op == OP_FULL) {
    fputc(' ', f);
    print_scalar(f, v->dtype, v->value);
  }
  print_data(f, v);
  for (int i = 0; i < 11; i++)
    if (v->flags & (1 << i)) fprintf(f, " %s", flag_names[i]);
  if (v->slot > 0) fprintf(f, " slot %d", v->slot);
  if (v->out > 0) fprintf(f, " out %d", v->out - 1);
  if (v->group > 0) fprintf(f, " group %d rows %d", v->group, v->rows);
  fprintf(f, " : %s", dtype_str(v->dtype));
  print_syms(f, '[', v->shape, v->rank, ']');
  fputc(' ', f);
  print_syms(f, '(', v->stride, v->rank, ')');
  fputs(" +", f);
  print_sym(f, v->offset);
  print_loc(f, v->loc);
  if (v->name) {
    fputc(' ', f);
    print_string(f, v->name);
  }
  fputc('\n', f);
}

static void print_param(FILE *f, const IrParam *p) {
  fprintf(f, "%s: %s", p->name ? p->name : "?", dtype_str(p->dtype));
  if (p->is_tensor) {
    print_syms(f, '[', p->shape, p->rank, ']');
    fprintf(f, " %s", layout_str(p->layout));
  }
  if (p->value >= 0) fprintf(f, " %%%d", p->value);
  print_loc(f, p->loc);
}

static void print_header(FILE *f, const IrKernel *k) {
  fprintf(f, "kernel %s(", k->name);
  for (int i = 0; i < k->nparams; i++) {
    if (i) fputs(", ", f);
    print_param(f, &k->params[i]);
  }
  fputs(") -> (", f);
  for (int i = 0; i < k->nresults; i++) {
    const IrResult *res = &k->results[i];
    if (i) fputs(", ", f);
    fputs(dtype_str(res->dtype), f);
    print_syms(f, '[', res->shape, res->rank, ']');
    fprintf(f, " %s", layout_str(res->layout));
    if (res->qstride) {
      fputc(' ', f);
      print_syms(f, '(', res->qstride, res->rank, ')');
    }
    print_loc(f, res->loc);
  }
  fputc(')', f);
  print_loc(f, k->loc);
  fputs(" {\n", f);
}

static void print_symvar(FILE *f, const IrKernel *k, const IrSymVar *s) {
  fprintf(f, "  sym %s = %s ", s->name ? s->name : "?",
          s->kind == SYMK_STRIDE ? "stride" : "size");
  if (s->param >= 0 && s->param < k->nparams && k->params[s->param].name)
    fputs(k->params[s->param].name, f);
  else fprintf(f, "%d", s->param);
  fprintf(f, ".%d", s->dim);
  print_loc(f, s->loc);
  fputc('\n', f);
}

static void print_check(FILE *f, const IrCheck *c) {
  static const char *const ops[] = {"==", "<=", "<"};
  fputs("  check ", f);
  print_sym(f, c->lhs);
  fprintf(f, " %s ", c->op >= CHK_EQ && c->op <= CHK_LT ? ops[c->op] : "?");
  print_sym(f, c->rhs);
  fputc(' ', f);
  print_string(f, c->msg ? c->msg : "");
  print_loc(f, c->loc);
  fputc('\n', f);
}

void ir_print_kernel(FILE *f, const IrModule *m, const IrKernel *k) {
  (void)m;
  print_header(f, k);
  for (int i = 0; i < k->nsyms; i++) print_symvar(f, k, &k->syms[i]);
  for (int i = 0; i < k->nchecks; i++) print_check(f, &k->checks[i]);
  for (int i = 0; i < k->nvalues; i++) print_value(f, k, i);
  fputs("  return", f);
  for (int i = 0; i < k->nresults; i++) {
    fputs(i ? ", " : " ", f);
    print_ref(f, k->results[i].value);
  }
  fputs("\n}\n", f);
}

void ir_print_module(FILE *f, const IrModule *m) {
  fputs("module ", f);
  print_string(f, m->file ? m->file : "");
  fputc('\n', f);
  for (int i = 0; i < m->nkernels; i++) {
    fputc('\n', f);
    ir_print_kernel(f, m, m->kernels[i]);
  }
}
