/* test_ir.c — the IR's textual form and verifier (ir/print.c, ir/read.c,
 * ir/verify.c).
 *
 * Modules are built by hand with ir_add and Syms, printed, read back and
 * printed again: the two texts must be identical and the Syms read back
 * pointer-equal to the same expressions built in the new SymTab.  Reader
 * errors must name the right line:col and give NULL, and no input may
 * crash it (prefixes and byte mutations of a good text).  The verifier
 * must accept well-formed modules and name each kind of broken one. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static Arena *A;
static IrModule *M;

static void setup(void) {
  A = arena_new();
  M = ir_module_new(A, "t.tdsl");
}

static void teardown(void) { arena_free(A); }

/* ---- building ---- */

static const Sym *K(int64_t v) { return sym_const(M->st, v); }

/* An arena array of n Syms. */
static const Sym **S(int n, ...) {
  const Sym **v = arena_alloc(A, sizeof *v * (size_t)(n ? n : 1));
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) v[i] = va_arg(ap, const Sym *);
  va_end(ap);
  return v;
}

/* Row-major strides of a shape. */
static const Sym **contig(int rank, const Sym **shape) {
  const Sym **st = arena_alloc(A, sizeof *st * (size_t)(rank ? rank : 1));
  const Sym *acc = K(1);
  for (int d = rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc = sym_mul(M->st, acc, shape[d]);
  }
  return st;
}

/* A value with the given geometry and operands (nargs refs follow). */
static IrRef mk(IrKernel *k, Op op, DType dt, int rank, const Sym **shape,
                const Sym **stride, const Sym *offset, int nargs, ...) {
  IrValue v = {0};
  v.op = op;
  v.dtype = dt;
  v.rank = rank;
  v.shape = shape;
  v.stride = stride ? stride : contig(rank, shape);
  v.offset = offset ? offset : K(0);
  v.nargs = nargs;
  v.args = arena_alloc(A, sizeof(IrRef) * (size_t)(nargs ? nargs : 1));
  va_list ap;
  va_start(ap, nargs);
  for (int i = 0; i < nargs; i++) v.args[i] = va_arg(ap, IrRef);
  va_end(ap);
  return ir_add(M, k, &v);
}

static void set_attrs(IrKernel *k, IrRef r, int n, const Sym **attrs) {
  ir_val(k, r)->nattrs = n;
  ir_val(k, r)->attrs = attrs;
}

static IrSymVar symvar(const char *name, SymKind kind, int param, int dim,
                       Loc loc) {
  return (IrSymVar){arena_strdup(A, name), kind, param, dim, loc};
}

static IrParam tparam(const char *name, DType dt, Layout l, int rank,
                      const Sym **shape, Loc loc, IrRef value) {
  return (IrParam){name, dt, true, l, rank, shape, loc, value};
}

/* kernel mlp(x: f32[N, 784], w: f32[128, 784] strided, alpha: f32)
 *     -> f32[N, 128]:  t = x @ w.t() * alpha + 2.5 (by hand). */
static IrKernel *build_mlp(void) {
  IrKernel *k = ir_kernel_new(M, "mlp", (Loc){1, 1, 6});
  IrSymVar ns = symvar("N", SYMK_SIZE, 0, 0, (Loc){1, 17, 1});
  const Sym *N = sym_var(M->st, ir_add_sym(M, k, &ns), ns.name);
  IrSymVar ws = symvar("w.stride(0)", SYMK_STRIDE, 1, 0, (Loc){0, 0, 0});
  const Sym *W0 = sym_var(M->st, ir_add_sym(M, k, &ws), ws.name);
  k->nparams = 3;
  k->params = arena_alloc(A, sizeof *k->params * 3);
  k->params[0] = tparam("x", DT_F32, LAYOUT_CONTIGUOUS, 2, S(2, N, K(784)),
                        (Loc){1, 8, 1}, 0);
  k->params[1] = tparam("w", DT_F32, LAYOUT_STRIDED, 2, S(2, K(128), K(784)),
                        (Loc){1, 28, 1}, 1);
  k->params[2] = (IrParam){"alpha", DT_F32, false, LAYOUT_CONTIGUOUS, 0, NULL,
                           (Loc){1, 50, 5}, 2};
  IrRef x = mk(k, OP_PARAM, DT_F32, 2, k->params[0].shape, NULL, NULL, 0);
  IrRef w = mk(k, OP_PARAM, DT_F32, 2, k->params[1].shape,
               S(2, W0, K(1)), NULL, 0);
  IrRef al = mk(k, OP_PARAM, DT_F32, 0, NULL, NULL, NULL, 0);
  ir_val(k, w)->value.i = 1;
  ir_val(k, al)->value.i = 2;
  ir_val(k, x)->name = "x";
  ir_val(k, x)->loc = (Loc){1, 8, 1};
  IrRef wt = mk(k, OP_PERMUTE, DT_F32, 2, S(2, K(784), K(128)),
                S(2, K(1), W0), NULL, 1, w);
  set_attrs(k, wt, 2, S(2, K(1), K(0)));
  ir_val(k, wt)->name = "wt";
  ir_val(k, wt)->loc = (Loc){2, 9, 3};
  const Sym **out = S(2, N, K(128));
  IrRef mm = mk(k, OP_MATMUL, DT_F32, 2, out, NULL, NULL, 2, x, wt);
  IrRef ae = mk(k, OP_EXPAND, DT_F32, 2, out, S(2, K(0), K(0)), NULL, 1, al);
  set_attrs(k, ae, 2, out);
  ir_val(k, ae)->flags = IRF_IMPLICIT;
  IrRef sc = mk(k, OP_MUL, DT_F32, 2, out, NULL, NULL, 2, mm, ae);
  IrRef c = mk(k, OP_CONST, DT_F32, 0, NULL, NULL, NULL, 0);
  ir_val(k, c)->value.f = 2.5;
  ir_val(k, c)->flags = IRF_WRAPPED;
  ir_val(k, c)->loc = (Loc){3, 15, 0};
  IrRef ce = mk(k, OP_EXPAND, DT_F32, 2, out, S(2, K(0), K(0)), NULL, 1, c);
  set_attrs(k, ce, 2, out);
  ir_val(k, ce)->flags = IRF_IMPLICIT;
  IrRef sum = mk(k, OP_ADD, DT_F32, 2, out, NULL, NULL, 2, sc, ce);
  ir_val(k, sum)->name = "say \"hi\"\n";
  ir_add_check(M, k, &(IrCheck){N, K(4), CHK_LE,
                                "select(): index 4 is out of range for \"x\"",
                                (Loc){3, 9, 6}});
  k->nresults = 1;
  k->results = arena_alloc(A, sizeof *k->results);
  k->results[0] = (IrResult){DT_F32, LAYOUT_CONTIGUOUS, 2, out,
                             (Loc){1, 62, 9}, sum, NULL};
  return k;
}

/* ---- text helpers ---- */

static char *print_module(const IrModule *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ir_print_module(f, m);
  fclose(f);
  char *s = arena_strdup(A, buf);
  free(buf);
  return s;
}

static char diag_buf[8192];

/* Reads text; diagnostics land in diag_buf. */
static IrModule *read_text(const char *text, int *nerrors) {
  FILE *f = fmemopen(diag_buf, sizeof diag_buf - 1, "w");
  memset(diag_buf, 0, sizeof diag_buf);
  Diag d;
  diag_init(&d, "t.ir", text, f);
  IrModule *m = ir_read(A, &d, "t.ir", text);
  fclose(f);
  if (nerrors) *nerrors = d.nerrors;
  return m;
}

static char verify_buf[16384];

static int verify(const IrModule *m) {
  memset(verify_buf, 0, sizeof verify_buf);
  FILE *f = fmemopen(verify_buf, sizeof verify_buf - 1, "w");
  int n = ir_verify(m, f);
  fclose(f);
  return n;
}

/* Reads text that must parse, prints it, and checks the round trip. */
static IrModule *round_trip(const char *text) {
  int nerr;
  IrModule *m = read_text(text, &nerr);
  ck_assert_msg(m != NULL, "read failed: %s\nin:\n%s", diag_buf, text);
  ck_assert_int_eq(nerr, 0);
  ck_assert_str_eq(print_module(m), text);
  return m;
}

/* ---- round trips ---- */

/* The op table (ir/ops.h): names round-trip, every elementwise op but
 * where has a dtype rule and every other op none, comparisons give bool,
 * costs are positive. */
START_TEST(test_op_table) {
  for (int i = 0; i < OP_COUNT; i++) {
    Op op = (Op)i;
    ck_assert_int_eq(op_from_name(op_name(op)), op);
    ck_assert_int_ge(op_cost(op), 1);
    bool ew = op_is_elementwise(op) && op != OP_WHERE;
    ck_assert_msg(ew == (op_dtype_rule(op) != DR_NA), "%s: dtype rule", op_name(op));
    if (op_kind(op) == IRK_COMPARE) ck_assert_int_eq(op_dtype_rule(op), DR_TO_BOOL);
    if (op_kind(op) == IRK_UNARY) ck_assert_int_eq(op_nargs(op), 1);
    if (op_kind(op) == IRK_BINARY || op_kind(op) == IRK_COMPARE) ck_assert_int_eq(op_nargs(op), 2);
  }
}
END_TEST

START_TEST(test_print_mlp) {
  build_mlp();
  ck_assert_int_eq(verify(M), 0);
  char *t = print_module(M);
  ck_assert_ptr_nonnull(strstr(t, "module \"t.tdsl\"\n"));
  ck_assert_ptr_nonnull(strstr(
      t, "kernel mlp(x: f32[N, 784] contiguous %0 @1:8:1, w: f32[128, 784] "
         "strided %1 @1:28:1, alpha: f32 %2 @1:50:5) -> (f32[N, 128] "
         "contiguous @1:62:9) @1:1:6 {\n"));
  ck_assert_ptr_nonnull(strstr(t, "  sym N = size x.0 @1:17:1\n"));
  ck_assert_ptr_nonnull(strstr(t, "  sym w.stride(0) = stride w.0\n"));
  ck_assert_ptr_nonnull(strstr(
      t, "  check N <= 4 \"select(): index 4 is out of range for \\\"x\\\"\" "
         "@3:9:6\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %0 = param 0 : f32[N, 784] (784, 1) +0 "
                                  "@1:8:1 \"x\"\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %2 = param 2 : f32[] () +0\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %3 = permute %1 [1, 0] : f32[784, 128] "
                                  "(1, w.stride(0)) +0 @2:9:3 \"wt\"\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %4 = matmul %0, %3 : f32[N, 128] "
                                  "(128, 1) +0\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %5 = expand %2 [N, 128] implicit : "
                                  "f32[N, 128] (0, 0) +0\n"));
  ck_assert_ptr_nonnull(strstr(t, "  %7 = const 2.5 wrapped : f32[] () +0 "
                                  "@3:15\n"));
  ck_assert_ptr_nonnull(strstr(t, "\"say \\\"hi\\\"\\n\"\n"));
  ck_assert_ptr_nonnull(strstr(t, "  return %9\n}\n"));
}
END_TEST

START_TEST(test_round_trip_mlp) {
  build_mlp();
  char *t1 = print_module(M);
  IrModule *m2 = round_trip(t1);
  ck_assert_int_eq(verify(m2), 0);
  IrKernel *k = m2->kernels[0];
  ck_assert_int_eq(k->nsyms, 2);
  ck_assert_str_eq(k->syms[1].name, "w.stride(0)");
  ck_assert_int_eq(k->syms[1].kind, SYMK_STRIDE);
  ck_assert_int_eq(k->syms[1].param, 1);
  ck_assert_str_eq(ir_val(k, 9)->name, "say \"hi\"\n");
  ck_assert_str_eq(k->checks[0].msg,
                   "select(): index 4 is out of range for \"x\"");
  ck_assert_int_eq(k->checks[0].op, CHK_LE);
  ck_assert_int_eq(ir_val(k, 7)->loc.col, 15);
  ck_assert_int_eq(ir_val(k, 7)->loc.len, 0);
  ck_assert(ir_val(k, 7)->value.f == 2.5);
  ck_assert_int_eq(ir_val(k, 2)->value.i, 2);
  ck_assert_int_eq(k->params[2].is_tensor, false);
  ck_assert_int_eq(k->params[1].layout, LAYOUT_STRIDED);
  ck_assert_int_eq(k->results[0].value, 9);
}
END_TEST

START_TEST(test_syms_pointer_equal) {
  build_mlp();
  IrModule *m2 = round_trip(print_module(M));
  IrKernel *k = m2->kernels[0];
  const Sym *N = sym_var(m2->st, 0, "N");
  const Sym *W0 = sym_var(m2->st, 1, "w.stride(0)");
  ck_assert_ptr_eq(ir_val(k, 0)->shape[0], N);
  ck_assert_ptr_eq(ir_val(k, 9)->shape[0], N);
  ck_assert_ptr_eq(k->params[0].shape[0], N);
  ck_assert_ptr_eq(k->results[0].shape[0], N);
  ck_assert_ptr_eq(k->checks[0].lhs, N);
  ck_assert_ptr_eq(ir_val(k, 3)->stride[1], W0);
  ck_assert_ptr_eq(ir_val(k, 3)->shape[0], sym_const(m2->st, 784));
}
END_TEST

/* Expressions of every kind, in several positions, read back to the same
 * canonical Syms. */
START_TEST(test_expressions) {
  IrKernel *k = ir_kernel_new(M, "e", (Loc){0, 0, 0});
  const char *names[] = {"N", "C", "H", "W"};
  const Sym *v[4];
  k->nparams = 1;
  k->params = arena_alloc(A, sizeof *k->params);
  for (int i = 0; i < 4; i++) {
    IrSymVar s = symvar(names[i], SYMK_SIZE, 0, i, (Loc){0, 0, 0});
    v[i] = sym_var(M->st, ir_add_sym(M, k, &s), s.name);
  }
  const Sym *N = v[0], *C = v[1], *H = v[2], *W = v[3];
  k->params[0] = tparam("x", DT_F16, LAYOUT_CONTIGUOUS, 4, S(4, N, C, H, W),
                        (Loc){0, 0, 0}, 0);
  mk(k, OP_PARAM, DT_F16, 4, k->params[0].shape, NULL, NULL, 0);
  SymTab *st = M->st;
  const Sym *chw = sym_prod(st, S(3, C, H, W), 3);
  const Sym *e1 = sym_add(st, sym_mul(st, K(2), N), K(1));
  const Sym *e2 = sym_floordiv(st, sym_add(st, N, K(1)), K(2));
  const Sym *e3 = sym_min(st, N, K(4));
  const Sym *e4 = sym_sub(st, sym_mod(st, H, K(3)), sym_max(st, W, C));
  const Sym *e5 = sym_mul(st, sym_floordiv(st, N, K(2)), C);
  const Sym *e6 = sym_sub(st, K(-7), N);
  IrRef r = mk(k, OP_AS_STRIDED, DT_F16, 4, S(4, chw, e1, e2, e3),
               S(4, e4, e5, e6, K(INT64_MIN)), sym_add(st, N, K(-3)), 1, 0);
  k->nresults = 1;
  k->results = arena_alloc(A, sizeof *k->results);
  k->results[0] = (IrResult){DT_F16, LAYOUT_STRIDED, 4, S(4, chw, e1, e2, e3),
                             (Loc){0, 0, 0}, r, NULL};
  IrModule *m2 = round_trip(print_module(M));
  IrKernel *k2 = m2->kernels[0];
  SymTab *t2 = m2->st;
  const Sym *n2 = sym_var(t2, 0, "N"), *c2 = sym_var(t2, 1, "C"),
            *h2 = sym_var(t2, 2, "H"), *w2 = sym_var(t2, 3, "W");
  const IrValue *x = ir_val(k2, 1);
  ck_assert_ptr_eq(x->shape[0], sym_mul(t2, sym_mul(t2, w2, h2), c2));
  ck_assert_ptr_eq(x->shape[1], sym_add(t2, sym_const(t2, 1),
                                        sym_mul(t2, n2, sym_const(t2, 2))));
  ck_assert_ptr_eq(x->shape[3], sym_min(t2, sym_const(t2, 4), n2));
  ck_assert_ptr_eq(x->stride[0], sym_sub(t2, sym_mod(t2, h2, sym_const(t2, 3)),
                                         sym_max(t2, c2, w2)));
  int64_t big;
  ck_assert(sym_is_const(x->stride[3], &big));
  ck_assert(big == INT64_MIN);
  ck_assert_ptr_eq(x->offset, sym_sub(t2, n2, sym_const(t2, 3)));
  ck_assert_ptr_eq(k2->results[0].shape[2], x->shape[2]);
}
END_TEST

/* Sources with values and data, float attributes, flags, several kernels. */
START_TEST(test_values_and_data) {
  IrKernel *k = ir_kernel_new(M, "srcs", (Loc){5, 1, 0});
  IrRef c1 = mk(k, OP_CONST, DT_F64, 0, NULL, NULL, NULL, 0);
  ir_val(k, c1)->value.f = NAN;
  IrRef c2 = mk(k, OP_CONST, DT_F32, 0, NULL, NULL, NULL, 0);
  ir_val(k, c2)->value.f = -INFINITY;
  IrRef c3 = mk(k, OP_CONST, DT_I64, 0, NULL, NULL, NULL, 0);
  ir_val(k, c3)->value.i = INT64_MIN;
  IrRef c4 = mk(k, OP_CONST, DT_F64, 0, NULL, NULL, NULL, 0);
  ir_val(k, c4)->value.f = 0.1;
  IrRef f1 = mk(k, OP_FULL, DT_BOOL, 1, S(1, K(3)), NULL, NULL, 0);
  ir_val(k, f1)->value.i = 1;
  IrRef ar = mk(k, OP_ARANGE, DT_F32, 1, S(1, K(4)), NULL, NULL, 0);
  ir_val(k, ar)->fattr[0] = -1.5;
  ir_val(k, ar)->fattr[1] = 0.25;
  IrRef t1 = mk(k, OP_TENSOR, DT_I32, 2, S(2, K(2), K(2)), NULL, NULL, 0);
  int32_t *d1 = arena_alloc(A, 4 * sizeof *d1);
  d1[0] = -1, d1[1] = 2, d1[2] = INT32_MAX, d1[3] = 0;
  ir_val(k, t1)->data = d1;
  IrRef t2 = mk(k, OP_TENSOR, DT_F16, 1, S(1, K(2)), NULL, NULL, 0);
  uint16_t *d2 = arena_alloc(A, 2 * sizeof *d2);
  d2[0] = f32_to_f16(0.333f), d2[1] = f32_to_f16(-65504.0f);
  ir_val(k, t2)->data = d2;
  IrRef x = mk(k, OP_CAST, DT_F32, 1, S(1, K(2)), NULL, NULL, 1, t2);
  IrRef ln = mk(k, OP_LAYER_NORM, DT_F32, 1, S(1, K(2)), NULL, NULL, 3, x, x,
                x);
  set_attrs(k, ln, 1, S(1, K(1)));
  ir_val(k, ln)->fattr[0] = 1e-5;
  ir_val(k, ln)->flags = IRF_WEIGHT | IRF_BIAS;
  IrRef s = mk(k, OP_SUM, DT_I64, 2, S(2, K(1), K(2)), NULL, NULL, 1,
               mk(k, OP_CAST, DT_I64, 2, S(2, K(2), K(2)), NULL, NULL, 1, t1));
  set_attrs(k, s, 1, S(1, K(0)));
  ir_val(k, s)->flags = IRF_KEEPDIM;
  IrRef g = mk(k, OP_GELU, DT_F32, 1, S(1, K(4)), NULL, NULL, 1, ar);
  ir_val(k, g)->flags = IRF_TANH;
  ir_val(k, g)->name = "";
  k->nresults = 2;
  k->results = arena_alloc(A, 2 * sizeof *k->results);
  k->results[0] = (IrResult){DT_F32, LAYOUT_CONTIGUOUS, 1, S(1, K(2)),
                             (Loc){0, 0, 0}, ln, NULL};
  k->results[1] = (IrResult){DT_I64, LAYOUT_CONTIGUOUS, 2, S(2, K(1), K(2)),
                             (Loc){0, 0, 0}, s, NULL};
  IrKernel *k2 = ir_kernel_new(M, "empty", (Loc){0, 0, 0});
  (void)k2;
  ck_assert_int_eq(verify(M), 0);
  char *t = print_module(M);
  ck_assert_ptr_nonnull(strstr(t, "%0 = const nan : f64[]"));
  ck_assert_ptr_nonnull(strstr(t, "%1 = const -inf : f32[]"));
  ck_assert_ptr_nonnull(strstr(t, "%2 = const -9223372036854775808 : i64[]"));
  ck_assert_ptr_nonnull(strstr(t, "%3 = const 0.1 : f64[]"));
  ck_assert_ptr_nonnull(strstr(t, "%4 = full 1 : bool[3] (1) +0"));
  ck_assert_ptr_nonnull(strstr(t, "%5 = arange {start=-1.5, step=0.25} :"));
  ck_assert_ptr_nonnull(strstr(t, "%6 = tensor data [-1, 2, 2147483647, 0] :"));
  ck_assert_ptr_nonnull(strstr(t, "%9 = layer_norm %8, %8, %8 [1] "
                                  "{eps=1e-05} weight bias :"));
  ck_assert_ptr_nonnull(strstr(t, "%11 = sum %10 [0] keepdim : i64[1, 2]"));
  ck_assert_ptr_nonnull(strstr(t, "%12 = gelu %5 tanh : f32[4] (1) +0 \"\"\n"));
  ck_assert_ptr_nonnull(strstr(t, "kernel empty() -> () {\n  return\n}\n"));
  IrModule *m2 = round_trip(t);
  ck_assert_int_eq(m2->nkernels, 2);
  IrKernel *r = m2->kernels[0];
  ck_assert(isnan(ir_val(r, 0)->value.f));
  ck_assert(ir_val(r, 1)->value.f == -INFINITY);
  ck_assert(ir_val(r, 2)->value.i == INT64_MIN);
  ck_assert(ir_val(r, 3)->value.f == 0.1);
  ck_assert(ir_val(r, 9)->fattr[0] == 1e-5);
  const int32_t *rd = ir_val(r, 6)->data;
  ck_assert_int_eq(rd[2], INT32_MAX);
  ck_assert_int_eq(rd[0], -1);
  const uint16_t *rh = ir_val(r, 7)->data;
  ck_assert_int_eq(rh[0], d2[0]);
  ck_assert_int_eq(rh[1], d2[1]);
  ck_assert_str_eq(ir_val(r, 12)->name, "");
  ck_assert_ptr_null(ir_val(r, 11)->name);
  ck_assert_int_eq(verify(m2), 0);
}
END_TEST

/* Several kernels in one module, each with its own symbol table.  (They
 * share the module's SymTab, where a variable is known by its id, so the
 * kernels here use the same names for the same ids.) */
START_TEST(test_two_kernels) {
  IrRef x;
  for (int i = 0; i < 2; i++) {
    IrKernel *k = ir_kernel_new(M, i ? "second" : "first", (Loc){i + 1, 1, 0});
    IrSymVar s = symvar("N", SYMK_SIZE, 0, 0, (Loc){0, 0, 0});
    const Sym *N = sym_var(M->st, ir_add_sym(M, k, &s), s.name);
    k->nparams = 1;
    k->params = arena_alloc(A, sizeof *k->params);
    k->params[0] = tparam("x", DT_BF16, LAYOUT_CONTIGUOUS, 1, S(1, N),
                          (Loc){0, 0, 0}, 0);
    x = mk(k, OP_PARAM, DT_BF16, 1, k->params[0].shape, NULL, NULL, 0);
    IrRef e = mk(k, OP_EXP, DT_BF16, 1, S(1, N), NULL, NULL, 1, x);
    k->nresults = 1;
    k->results = arena_alloc(A, sizeof *k->results);
    k->results[0] = (IrResult){DT_BF16, LAYOUT_CONTIGUOUS, 1, S(1, N),
                               (Loc){0, 0, 0}, i ? e : x, NULL};
  }
  ck_assert_int_eq(verify(M), 0);
  IrModule *m2 = round_trip(print_module(M));
  ck_assert_int_eq(m2->nkernels, 2);
  ck_assert_str_eq(m2->kernels[1]->name, "second");
  ck_assert_int_eq(m2->kernels[1]->results[0].value, 1);
  ck_assert_int_eq(m2->kernels[0]->results[0].value, 0);
  ck_assert_int_eq(verify(m2), 0);
}
END_TEST

/* Hand-written text (free spacing, comments) reads as printed form. */
START_TEST(test_read_handwritten) {
  const char *text =
      "# a comment\n"
      "kernel k(x: i64[N] contiguous %0) -> (i64[N] contiguous) {\n"
      "  sym N = size x.0   # bound here\n"
      "  %0 = param 0 : i64[N] (1) +0\n"
      "  %1 = neg %0 : i64[N] (1) + 0 @2:3\n"
      "  return %1\n"
      "}\n";
  int nerr;
  IrModule *m = read_text(text, &nerr);
  ck_assert_msg(m != NULL, "%s", diag_buf);
  ck_assert_str_eq(m->file, "t.ir");
  ck_assert_int_eq(verify(m), 0);
  char *p = print_module(m);
  ck_assert_ptr_nonnull(strstr(p, "  %1 = neg %0 : i64[N] (1) +0 @2:3\n"));
}
END_TEST

/* ---- reader errors ---- */

static void expect_error(const char *text, const char *where,
                         const char *msg) {
  int nerr;
  IrModule *m = read_text(text, &nerr);
  ck_assert_msg(m == NULL, "accepted:\n%s", text);
  ck_assert_int_ge(nerr, 1);
  char want[256];
  snprintf(want, sizeof want, "t.ir:%s: error: ", where);
  ck_assert_msg(strstr(diag_buf, want) == diag_buf, "want %s, got %s", want,
                diag_buf);
  ck_assert_msg(strstr(diag_buf, msg) != NULL, "want '%s' in %s", msg,
                diag_buf);
}

#define HDR "kernel k(x: f32[N] contiguous %0) -> (f32[N] contiguous) {\n" \
            "  sym N = size x.0\n"                                         \
            "  %0 = param 0 : f32[N] (1) +0\n"

START_TEST(test_read_errors) {
  expect_error(HDR "  %1 = frobnicate %0 : f32[N] (1) +0\n  return %1\n}\n",
               "4:8", "unknown op 'frobnicate'");
  expect_error(HDR "  %1 = neg %0 : f32[M] (1) +0\n  return %1\n}\n", "4:21",
               "unknown symbol 'M'");
  expect_error(HDR "  %1 = neg %0 : f32[N] (1) +0 @4:x\n  return %1\n}\n",
               "4:34", "expected a column number but found 'x'");
  expect_error(HDR "  %1 = const 2.5 : i64[] () +0\n  return %1\n}\n", "4:14",
               "expected an integer");
  expect_error(HDR "  %1 = neg %0 : f32[99999999999999999999] (1) +0\n",
               "4:21", "out of range");
  expect_error(HDR "  %1 = neg %0 : f32[N] (1) +0\n  return %1\n", "6:1",
               "expected '}' but found end of input");
  expect_error(HDR "  %1 = neg %0 : f32[N] (1", "4:26",
               "expected ')' but found end of input");
  expect_error(HDR "  %1 = neg %2 : f32[N] (1) +0\n  return %1\n}\n", "4:12",
               "operand %2 of %1 is not an earlier value");
  expect_error(HDR "  %2 = neg %0 : f32[N] (1) +0\n  return %2\n}\n", "4:4",
               "expected value number 1 but found '2'");
  expect_error(HDR "  %1 = neg %0 : f32[N] (1, 1) +0\n  return %1\n}\n", "4:24",
               "2 strides given for rank 1");
  expect_error(HDR "  return %0, %0\n}\n", "4:3",
               "'return' gives 2 values but the kernel declares 1");
  expect_error(HDR "  return %5\n}\n", "4:10", "returned value %5 is not");
  expect_error(HDR "  %1 = neg %0 wobbly : f32[N] (1) +0\n", "4:15",
               "expected ':' but found 'wobbly'");
  expect_error(HDR "  check N < 3 \"oops\n", "4:15", "unterminated string");
  expect_error(HDR "  %1 = tensor data [1, 2] : f32[3] (1) +0\n", "4:15",
               "tensor data has 2 elements");
  expect_error("kernel k(x: f32[Q] contiguous) -> () {\n  return\n}\n", "1:17",
               "unknown symbol 'Q'");
  expect_error("kernel k() -> () {\n  sym N = size y.0\n", "2:16",
               "unknown parameter 'y'");
  expect_error("kernel k(x: f33) -> () {\n", "1:13",
               "expected a dtype but found 'f33'");
  expect_error("kernel k() -> () {\n  return\n}\n$", "4:1",
               "unexpected character '$'");
}
END_TEST

/* Deep nesting is an error, not a stack overflow. */
START_TEST(test_read_deep_nesting) {
  size_t n = 100000;
  char *text = arena_alloc(A, n * 2 + 200);
  strcpy(text, "kernel k() -> (f32[");
  char *p = text + strlen(text);
  for (size_t i = 0; i < n; i++) *p++ = '(';
  for (size_t i = 0; i < n; i++) *p++ = '-';
  strcpy(p, "1] contiguous) {\n  return\n}\n");
  int nerr;
  ck_assert_ptr_null(read_text(text, &nerr));
  ck_assert_ptr_nonnull(strstr(diag_buf, "nested too deeply"));
}
END_TEST

/* Every prefix and many byte mutations of a good text either read (and
 * then verify and print without crashing) or give a diagnostic. */
START_TEST(test_read_never_crashes) {
  build_mlp();
  const char *good = print_module(M);
  size_t len = strlen(good);
  char *buf = arena_alloc(A, len + 1);
  for (size_t cut = 0; cut < len; cut++) {
    memcpy(buf, good, cut);
    buf[cut] = '\0';
    int nerr;
    IrModule *m = read_text(buf, &nerr);
    ck_assert((m == NULL) == (nerr > 0));
  }
  static const char alphabet[] = "%[](){},:=<+-*/@.\"\\#\n 09azN";
  unsigned seed = 12345;
  for (int iter = 0; iter < 4000; iter++) {
    memcpy(buf, good, len + 1);
    for (int j = 0; j < 3; j++) {
      seed = seed * 1103515245u + 12345u;
      size_t at = (seed >> 8) % len;
      seed = seed * 1103515245u + 12345u;
      buf[at] = alphabet[(seed >> 8) % (sizeof alphabet - 1)];
    }
    int nerr;
    IrModule *m = read_text(buf, &nerr);
    ck_assert((m == NULL) == (nerr > 0));
    if (m) {
      verify(m);
      print_module(m);
    }
  }
}
END_TEST

/* ---- verifier ---- */

START_TEST(test_verify_operand_order) {
  IrKernel *k = build_mlp();
  ir_val(k, 4)->args[1] = 6; /* matmul %0, %6: a later value */
  ck_assert_int_ge(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(
      verify_buf, "kernel mlp: %4 (matmul): operand 1 (%6) is not an earlier "
                  "value\n"));
  ir_val(k, 4)->args[1] = -1;
  ck_assert_int_ge(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "operand 1 (%-1)"));
}
END_TEST

/* A small kernel: x: f32[4, 3] contiguous, for the broken cases below. */
static IrKernel *small_kernel(IrRef *x) {
  IrKernel *k = ir_kernel_new(M, "k", (Loc){0, 0, 0});
  k->nparams = 1;
  k->params = arena_alloc(A, sizeof *k->params);
  k->params[0] = tparam("x", DT_F32, LAYOUT_CONTIGUOUS, 2, S(2, K(4), K(3)),
                        (Loc){0, 0, 0}, 0);
  *x = mk(k, OP_PARAM, DT_F32, 2, k->params[0].shape, NULL, NULL, 0);
  return k;
}

START_TEST(test_verify_add_shape) {
  IrRef x;
  IrKernel *k = small_kernel(&x);
  IrRef b = mk(k, OP_TENSOR, DT_F32, 1, S(1, K(3)), NULL, NULL, 0);
  ir_val(k, b)->data = arena_alloc(A, 3 * sizeof(float));
  mk(k, OP_ADD, DT_F32, 2, S(2, K(4), K(3)), NULL, NULL, 2, x, b);
  ck_assert_int_eq(verify(M), 1);
  ck_assert_str_eq(verify_buf, "kernel k: %2 (add): operand 1 (%1) shape "
                               "differs from the result's\n");
  /* With the broadcast made explicit it is fine. */
  IrRef e = mk(k, OP_EXPAND, DT_F32, 2, S(2, K(4), K(3)), S(2, K(0), K(1)),
               NULL, 1, b);
  set_attrs(k, e, 2, S(2, K(4), K(3)));
  ir_val(k, 2)->args[1] = e;
  ck_assert_int_ge(verify(M), 1); /* now %2 uses a later value */
  mk(k, OP_ADD, DT_F32, 2, S(2, K(4), K(3)), NULL, NULL, 2, x, e);
  ir_val(k, 2)->args[1] = x;
  ck_assert_int_eq(verify(M), 0);
}
END_TEST

START_TEST(test_verify_dtypes) {
  IrRef x;
  IrKernel *k = small_kernel(&x);
  const Sym **sh = S(2, K(4), K(3));
  mk(k, OP_LT, DT_F32, 2, sh, NULL, NULL, 2, x, x);
  IrRef i = mk(k, OP_CAST, DT_I32, 2, sh, NULL, NULL, 1, x);
  mk(k, OP_MUL, DT_F32, 2, sh, NULL, NULL, 2, x, i);
  mk(k, OP_WHERE, DT_F32, 2, sh, NULL, NULL, 3, x, x, x);
  IrRef s = mk(k, OP_SUM, DT_I32, 0, NULL, NULL, NULL, 1, i);
  set_attrs(k, s, 2, S(2, K(0), K(1)));
  ck_assert_int_eq(verify(M), 4);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%1 (lt): result is f32, "
                                           "expected bool\n"));
  ck_assert_ptr_nonnull(strstr(verify_buf, "%3 (mul): operand 1 (%2) is i32, "
                                           "expected f32\n"));
  ck_assert_ptr_nonnull(strstr(verify_buf, "%4 (where): operand 0 (%0) is "
                                           "f32, expected bool\n"));
  ck_assert_ptr_nonnull(strstr(verify_buf, "%5 (sum): integer operand is i32, "
                                           "expected i64\n"));
}
END_TEST

START_TEST(test_verify_reduction_dims) {
  IrRef x;
  IrKernel *k = small_kernel(&x);
  IrRef s = mk(k, OP_SUM, DT_F32, 1, S(1, K(4)), NULL, NULL, 1, x);
  set_attrs(k, s, 1, S(1, K(1)));
  ck_assert_int_eq(verify(M), 0);
  set_attrs(k, s, 1, S(1, K(2))); /* dim 2 of a rank-2 operand */
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%1 (sum): attribute 0 is 2, "
                                           "expected a constant in [0, 2)"));
  IrRef t = mk(k, OP_AMAX, DT_F32, 0, NULL, NULL, NULL, 1, x);
  set_attrs(k, t, 2, S(2, K(1), K(0))); /* unsorted */
  set_attrs(k, s, 1, S(1, K(1)));
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%2 (amax): attribute 1 is 0"));
  set_attrs(k, t, 2, S(2, K(0), K(1)));
  ck_assert_int_eq(verify(M), 0);
  /* keepdim: reduced dims stay as 1; the others keep the operand's. */
  IrRef kd = mk(k, OP_MEAN, DT_F32, 2, S(2, K(4), K(3)), NULL, NULL, 1, x);
  set_attrs(k, kd, 1, S(1, K(1)));
  ir_val(k, kd)->flags = IRF_KEEPDIM;
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "kept reduced dim 1 is 3"));
}
END_TEST

/* x[:, 0:3:2] of a 4-element tensor with constant geometry. */
START_TEST(test_verify_slice_bounds) {
  IrRef x;
  IrKernel *k = small_kernel(&x);
  IrRef t = mk(k, OP_TENSOR, DT_F32, 1, S(1, K(4)), NULL, NULL, 0);
  ir_val(k, t)->data = arena_alloc(A, 4 * sizeof(float));
  IrRef ok = mk(k, OP_SLICE, DT_F32, 1, S(1, K(2)), S(1, K(2)), K(1), 1, t);
  set_attrs(k, ok, 4, S(4, K(0), K(1), K(4), K(2)));
  ck_assert_int_eq(verify(M), 0);
  /* three elements at stride 2 from 0 reach element 4 */
  IrRef bad = mk(k, OP_SLICE, DT_F32, 1, S(1, K(3)), S(1, K(2)), K(0), 1, t);
  set_attrs(k, bad, 4, S(4, K(0), K(0), K(6), K(2)));
  ck_assert_int_eq(verify(M), 1);
  ck_assert_str_eq(verify_buf, "kernel k: %3 (slice): addresses elements "
                               "0..4 of storage %1, which holds 4\n");
  /* a view of a view is checked against the root */
  IrRef sel = mk(k, OP_SELECT, DT_F32, 0, NULL, NULL, K(-1), 1, ok);
  set_attrs(k, sel, 2, S(2, K(0), K(0)));
  ck_assert_int_eq(verify(M), 2);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%4 (select): negative storage "
                                           "offset -1\n"));
  /* views of the 4x3 parameter, within its 12 elements */
  ir_val(k, sel)->offset = K(3);
  IrRef tr = mk(k, OP_PERMUTE, DT_F32, 2, S(2, K(3), K(4)), S(2, K(1), K(3)),
                NULL, 1, x);
  set_attrs(k, tr, 2, S(2, K(1), K(0)));
  ck_assert_int_eq(verify(M), 1);
  ir_val(k, tr)->stride[1] = K(4); /* (3-1)*1 + (4-1)*4 = 14 > 11 */
  ck_assert_int_eq(verify(M), 2);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%5 (permute): addresses elements "
                                           "0..14 of storage %0"));
}
END_TEST

START_TEST(test_verify_structure) {
  IrRef x;
  IrKernel *k = small_kernel(&x);
  IrRef m = mk(k, OP_MATMUL, DT_F32, 2, S(2, K(4), K(3)), NULL, NULL, 2, x, x);
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%1 (matmul): K of operand 0 is 3 "
                                           "but operand 1's is 4\n"));
  ir_val(k, m)->nargs = 1;
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%1 (matmul): 1 operands, "
                                           "expected 2\n"));
  ir_val(k, m)->op = OP_NEG;
  ir_val(k, m)->rank = 3;
  ir_val(k, m)->shape = NULL;
  ck_assert_int_eq(verify(M), 1);
  ck_assert_ptr_nonnull(strstr(verify_buf, "%1 (neg): rank 3 geometry is "
                                           "missing"));
  /* results and parameters */
  ir_val(k, m)->op = OP_NEG;
  ir_val(k, m)->rank = 2;
  ir_val(k, m)->shape = S(2, K(4), K(3));
  ir_val(k, m)->stride = S(2, K(3), K(1));
  k->nresults = 1;
  k->results = arena_alloc(A, sizeof *k->results);
  k->results[0] = (IrResult){DT_F16, LAYOUT_CONTIGUOUS, 2, S(2, K(4), K(3)),
                             (Loc){0, 0, 0}, m, NULL};
  k->params[0].value = m;
  ck_assert_int_eq(verify(M), 2);
  ck_assert_ptr_nonnull(strstr(verify_buf, "kernel k: result 0: returns f32, "
                                           "declared f16\n"));
  ck_assert_ptr_nonnull(strstr(verify_buf, "kernel k: param 0 (x): value %1 "
                                           "is not 'param 0'\n"));
}
END_TEST

static Suite *ir_suite(void) {
  Suite *s = suite_create("ir");
  TCase *tc = tcase_create("text");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_op_table);
  tcase_add_test(tc, test_print_mlp);
  tcase_add_test(tc, test_round_trip_mlp);
  tcase_add_test(tc, test_syms_pointer_equal);
  tcase_add_test(tc, test_expressions);
  tcase_add_test(tc, test_values_and_data);
  tcase_add_test(tc, test_two_kernels);
  tcase_add_test(tc, test_read_handwritten);
  tcase_add_test(tc, test_read_errors);
  tcase_add_test(tc, test_read_deep_nesting);
  tcase_add_test(tc, test_read_never_crashes);
  suite_add_tcase(s, tc);
  TCase *tv = tcase_create("verify");
  tcase_add_checked_fixture(tv, setup, teardown);
  tcase_add_test(tv, test_verify_operand_order);
  tcase_add_test(tv, test_verify_add_shape);
  tcase_add_test(tv, test_verify_dtypes);
  tcase_add_test(tv, test_verify_reduction_dims);
  tcase_add_test(tv, test_verify_slice_bounds);
  tcase_add_test(tv, test_verify_structure);
  suite_add_tcase(s, tv);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(ir_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
