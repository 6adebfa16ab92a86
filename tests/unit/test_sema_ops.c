/* test_sema_ops.c — semantic analysis of reductions, softmax, layer_norm,
 * matmul, conv2d, pooling and factories (frontend/sema_reduce.c,
 * sema_matmul.c, sema_conv.c, sema_factory.c), through
 * parse_program + sema_program on small programs.  Expected dtypes,
 * shapes, strides and errors follow PyTorch's rules (spec §4.4–§4.6, §5,
 * pytorch-semantics.md §7); error positions are those of the function or
 * method name (or the `@` token). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"
#include "ir/geometry.h"
#include "ir/ir.h"
#include "ir/sym.h"

static Arena *A;
static IrModule *M;
static char *ERR; /* all diagnostics of the last compile */
static const char *SRC;

static void setup(void) {
  A = arena_new();
  M = NULL;
  ERR = NULL;
}

static void teardown(void) { arena_free(A); }

/* Parses and checks src; diagnostics land in ERR. */
static IrModule *compile(const char *src) {
  SRC = src;
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  Diag d;
  diag_init(&d, "t.tdsl", src, f);
  AstProgram *p = parse_program(A, &d, src);
  ck_assert_msg(p != NULL, "parse failed for:\n%s", src);
  M = sema_program(A, &d, p, "t.tdsl");
  long n = ftell(f);
  rewind(f);
  ERR = arena_alloc(A, (size_t)n + 1);
  size_t got = fread(ERR, 1, (size_t)n, f);
  ERR[got] = 0;
  fclose(f);
  return M;
}

/* Compiles a program that must be accepted. */
static IrKernel *ok(const char *src) {
  IrModule *m = compile(src);
  ck_assert_msg(m != NULL, "unexpected errors:\n%s", ERR);
  ck_assert_str_eq(ERR, "");
  return m->kernels[0];
}

/* Compiles a program that must fail with an error at the first
 * occurrence of `at` in the source whose message contains `what`. */
static void fails(const char *src, const char *at, const char *what) {
  ck_assert_ptr_null(compile(src));
  const char *p = strstr(src, at);
  ck_assert_msg(p != NULL, "marker %s not in source", at);
  int line = 1, col = 1;
  for (const char *q = src; q < p; q++) {
    if (*q == '\n') line++, col = 1;
    else col++;
  }
  char want[64];
  snprintf(want, sizeof want, "t.tdsl:%d:%d: error: ", line, col);
  const char *e = strstr(ERR, want);
  ck_assert_msg(e != NULL, "no error at %s; got:\n%s", want, ERR);
  ck_assert_msg(strstr(e, what) != NULL, "error lacks \"%s\":\n%s", what,
                ERR);
}

static IrValue *result(IrKernel *k, int i) {
  return ir_val(k, k->results[i].value);
}

static const char *shape_of(const IrValue *v) {
  return geom_shape_str(A, v->shape, v->rank);
}

/* "(a, b)"; written here so the test does not depend on the printer */
static const char *strides_of(const IrValue *v) {
  char *s = arena_strdup(A, "(");
  for (int i = 0; i < v->rank; i++)
    s = arena_printf(A, "%s%s%s", s, i ? ", " : "", sym_str(A, v->stride[i]));
  return arena_printf(A, "%s)", s);
}

static int count_op(const IrKernel *k, Op op) {
  int n = 0;
  for (int i = 0; i < k->nvalues; i++) n += k->values[i].op == op;
  return n;
}

static const IrValue *find_op(const IrKernel *k, Op op) {
  for (int i = 0; i < k->nvalues; i++)
    if (k->values[i].op == op) return &k->values[i];
  ck_abort_msg("no %s op", op_name(op));
  return NULL;
}

static int64_t attr(const IrValue *v, int i) {
  int64_t x;
  ck_assert_int_gt(v->nattrs, i);
  ck_assert(sym_is_const(v->attrs[i], &x));
  return x;
}

#define ck_geom(v, shape, strides)                                        \
  do {                                                                    \
    ck_assert_str_eq(shape_of(v), (shape));                               \
    ck_assert_str_eq(strides_of(v), (strides));                           \
  } while (0)

/* ---- reductions ---- */

START_TEST(test_sum_keepdim_positional) {
  IrKernel *k = ok("kernel f(x: f32[2, 3, 4]) -> f32[2, 1, 4] {\n"
                   "  return x.sum(1, keepdim=true)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_SUM);
  ck_assert_int_eq(r->dtype, DT_F32);
  ck_geom(r, "[2, 1, 4]", "(4, 4, 1)");
  ck_assert_int_eq(r->nattrs, 1);
  ck_assert_int_eq(attr(r, 0), 1);
  ck_assert(r->flags & IRF_KEEPDIM);
}
END_TEST

START_TEST(test_sum_dims_sorted_and_wrapped) {
  IrKernel *k = ok("kernel f(x: f32[2, 3, 4]) -> f32[3] {\n"
                   "  return sum(x, dim=[-1, 0])\n}\n");
  IrValue *r = result(k, 0);
  ck_geom(r, "[3]", "(1)");
  ck_assert_int_eq(r->nattrs, 2);
  ck_assert_int_eq(attr(r, 0), 0);
  ck_assert_int_eq(attr(r, 1), 2);
  ck_assert(!(r->flags & IRF_KEEPDIM));
}
END_TEST

START_TEST(test_sum_all_default) {
  IrKernel *k = ok("kernel f(x: f64[2, 3]) -> f64[] {\n"
                   "  return x.sum()\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->rank, 0);
  ck_assert_int_eq(r->dtype, DT_F64);
  ck_assert_int_eq(r->nattrs, 2);
}
END_TEST

START_TEST(test_sum_of_ints_is_i64) {
  IrKernel *k = ok("kernel f(x: i32[3, 4], b: bool[5]) -> (i64[3], i64[]) {\n"
                   "  return x.sum(-1), b.prod()\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->dtype, DT_I64);
  /* the operand is cast to i64 before reducing (ops.h) */
  ck_assert_int_eq(ir_val(k, r->args[0])->op, OP_CAST);
  ck_assert_int_eq(ir_val(k, r->args[0])->dtype, DT_I64);
  ck_assert_int_eq(result(k, 1)->op, OP_PROD);
  ck_assert_int_eq(result(k, 1)->dtype, DT_I64);
}
END_TEST

START_TEST(test_amax_keeps_int_dtype) {
  IrKernel *k = ok("kernel f(x: i32[3, 4]) -> i32[4] {\n"
                   "  return x.amax(0)\n}\n");
  ck_assert_int_eq(result(k, 0)->dtype, DT_I32);
  ck_assert_int_eq(result(k, 0)->op, OP_AMAX);
}
END_TEST

START_TEST(test_mean_of_int_fails) {
  fails("kernel f(x: i64[3, 4]) -> f32[3] {\n"
        "  return x.mean(1)\n}\n", "mean", "floating-point");
}
END_TEST

START_TEST(test_duplicate_dims_fail) {
  fails("kernel f(x: f32[2, 3, 4]) -> f32[2] {\n"
        "  return x.sum([1, -2])\n}\n", "sum",
        "dim 1 appears multiple times");
}
END_TEST

START_TEST(test_dim_out_of_range_fails) {
  fails("kernel f(x: f32[2, 3]) -> f32[2] {\n"
        "  return x.amin(2)\n}\n", "amin", "amin");
}
END_TEST

START_TEST(test_amax_empty_dim_fails) {
  fails("kernel f(x: f32[0, 3]) -> f32[3] {\n"
        "  return x.amax(0)\n}\n", "amax", "size 0");
  /* sum of an empty dim is fine (0) */
  ok("kernel f(x: f32[0, 3]) -> f32[3] {\n  return x.sum(0)\n}\n");
}
END_TEST

START_TEST(test_argmax) {
  IrKernel *k = ok("kernel f(x: f32[3, 4]) -> (i64[], i64[3, 1]) {\n"
                   "  return x.argmax(), argmin(x, dim=1, keepdim=true)\n}\n");
  IrValue *a = result(k, 0), *b = result(k, 1);
  ck_assert_int_eq(a->op, OP_ARGMAX);
  ck_assert_int_eq(a->dtype, DT_I64);
  ck_assert_int_eq(a->rank, 0);
  ck_assert_int_eq(a->nattrs, 0); /* flattened */
  ck_assert_int_eq(b->op, OP_ARGMIN);
  ck_geom(b, "[3, 1]", "(1, 1)");
  ck_assert_int_eq(attr(b, 0), 1);
}
END_TEST

START_TEST(test_argmax_dim_list_fails) {
  fails("kernel f(x: f32[3, 4]) -> i64[3] {\n"
        "  return x.argmax([0, 1])\n}\n", "argmax", "single int");
}
END_TEST

/* ---- softmax, layer_norm ---- */

START_TEST(test_softmax_contiguous) {
  /* PyTorch's softmax output is contiguous even for a transposed input */
  IrKernel *k = ok("kernel f(x: f32[3, 4]) -> f32[4, 3] {\n"
                   "  return x.t().softmax(dim=0)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_SOFTMAX);
  ck_geom(r, "[4, 3]", "(3, 1)");
  ck_assert_int_eq(attr(r, 0), 0);
  k = ok("kernel f(x: f16[3, 4]) -> f16[3, 4] {\n"
         "  return log_softmax(x, -1)\n}\n");
  ck_assert_int_eq(result(k, 0)->op, OP_LOG_SOFTMAX);
  ck_assert_int_eq(result(k, 0)->dtype, DT_F16);
  ck_assert_int_eq(attr(result(k, 0), 0), 1);
}
END_TEST

START_TEST(test_softmax_int_fails) {
  fails("kernel f(x: i64[3, 4]) -> f32[3, 4] {\n"
        "  return softmax(x, 1)\n}\n", "softmax", "i64");
  fails("kernel f(x: f32[3, 4]) -> f32[3, 4] {\n"
        "  return softmax(x)\n}\n", "softmax", "dim");
}
END_TEST

START_TEST(test_layer_norm) {
  IrKernel *k = ok("kernel f(x: f32[2, 3, 4], w: f32[3, 4], b: f32[3, 4])"
                   " -> f32[2, 3, 4] {\n"
                   "  return layer_norm(x, [3, 4], w, b, eps=1e-3)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_LAYER_NORM);
  ck_geom(r, "[2, 3, 4]", "(12, 4, 1)");
  ck_assert_int_eq(attr(r, 0), 2);
  ck_assert(r->fattr[0] == 1e-3);
  ck_assert_int_eq(r->flags & (IRF_WEIGHT | IRF_BIAS), IRF_WEIGHT | IRF_BIAS);
  ck_assert_int_eq(r->nargs, 3);
  k = ok("kernel f(x: f32[2, D]) -> f32[2, D] {\n"
         "  return layer_norm(x, D, bias=None)\n}\n");
  r = result(k, 0);
  ck_assert_int_eq(r->nargs, 1);
  ck_assert(r->fattr[0] == 1e-5);
  ck_assert_int_eq(r->flags & (IRF_WEIGHT | IRF_BIAS), 0);
}
END_TEST

START_TEST(test_layer_norm_errors) {
  fails("kernel f(x: f32[2, 3]) -> f32[2, 3] {\n"
        "  return layer_norm(x, [4])\n}\n", "layer_norm", "[2, 3]");
  fails("kernel f(x: f32[2, 4], w: f32[3]) -> f32[2, 4] {\n"
        "  return layer_norm(x, [4], w)\n}\n", "layer_norm", "weight");
  fails("kernel f(x: i32[2, 4]) -> f32[2, 4] {\n"
        "  return layer_norm(x, 4)\n}\n", "layer_norm", "i32");
}
END_TEST

/* ---- matmul ---- */

START_TEST(test_matmul_2d) {
  IrKernel *k = ok("kernel f(a: f32[4, 3], b: f32[3, 5]) -> f32[4, 5] {\n"
                   "  return a @ b\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_MATMUL);
  ck_geom(r, "[4, 5]", "(5, 1)");
}
END_TEST

START_TEST(test_matmul_vec_batched) {
  /* [3] @ [2, 3, 5]: [1, 3] expanded to [2, 1, 3], result [2, 1, 5]
   * squeezed to [2, 5] */
  IrKernel *k = ok("kernel f(a: f32[3], b: f32[2, 3, 5]) -> f32[2, 5] {\n"
                   "  return matmul(a, b)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_SQUEEZE);
  ck_geom(r, "[2, 5]", "(5, 1)");
  const IrValue *mm = find_op(k, OP_MATMUL);
  ck_assert_str_eq(shape_of(mm), "[2, 1, 5]");
  ck_assert_str_eq(shape_of(ir_val(k, mm->args[0])), "[2, 1, 3]");
  ck_assert_str_eq(shape_of(ir_val(k, mm->args[1])), "[2, 3, 5]");
  ck_assert_int_eq(count_op(k, OP_UNSQUEEZE), 1);
  ck_assert_int_eq(attr(r, 0), 1);
}
END_TEST

START_TEST(test_matmul_dot_and_mv) {
  IrKernel *k = ok("kernel f(a: f64[3], b: f64[3], m: f64[4, 3])"
                   " -> (f64[], f64[4]) {\n"
                   "  return a @ b, m @ a\n}\n");
  IrValue *d = result(k, 0), *mv = result(k, 1);
  ck_assert_int_eq(d->rank, 0);
  ck_assert_int_eq(d->op, OP_SQUEEZE);
  ck_assert_int_eq(d->nattrs, 2);
  ck_geom(mv, "[4]", "(1)");
  ck_assert_int_eq(attr(mv, 0), 1);
}
END_TEST

START_TEST(test_matmul_broadcast_batch) {
  IrKernel *k = ok("kernel f(a: f32[2, 1, 4, 3], b: f32[5, 3, 6])"
                   " -> f32[2, 5, 4, 6] {\n  return a @ b\n}\n");
  IrValue *r = result(k, 0);
  ck_geom(r, "[2, 5, 4, 6]", "(120, 24, 6, 1)");
  ck_assert_int_eq(count_op(k, OP_EXPAND), 2);
}
END_TEST

START_TEST(test_matmul_symbolic) {
  IrKernel *k = ok("kernel f(a: f32[M, K], b: f32[K, N]) -> f32[M, N] {\n"
                   "  return a @ b\n}\n");
  ck_assert_str_eq(shape_of(result(k, 0)), "[M, N]");
}
END_TEST

START_TEST(test_matmul_errors) {
  fails("kernel f(a: f32[4, 3], b: f32[4, 5]) -> f32[4, 5] {\n"
        "  return a @ b\n}\n", "@", "[4, 3] and [4, 5]");
  fails("kernel f(a: f32[4, 3], b: f64[3, 5]) -> f32[4, 5] {\n"
        "  return a @ b\n}\n", "@", "same dtype");
  fails("kernel f(a: f32[], b: f32[3, 5]) -> f32[5] {\n"
        "  return matmul(a, b)\n}\n", "matmul", "0-D and 2-D");
  fails("kernel f(a: bool[2, 2], b: bool[2, 2]) -> bool[2, 2] {\n"
        "  return a @ b\n}\n", "@", "bool");
  fails("kernel f(a: f32[2, 4, 3], b: f32[3, 3, 5]) -> f32[2, 4, 5] {\n"
        "  return a @ b\n}\n", "@", "batch");
}
END_TEST

/* ---- conv2d ---- */

START_TEST(test_conv2d_shape_attrs) {
  IrKernel *k = ok("kernel f(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3],"
                   " b: f32[4]) -> f32[1, 4, 4, 4] {\n"
                   "  return conv2d(x, w, b, stride=2, padding=1)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_CONV2D);
  ck_geom(r, "[1, 4, 4, 4]", "(64, 16, 4, 1)");
  int64_t want[7] = {2, 2, 1, 1, 1, 1, 1};
  ck_assert_int_eq(r->nattrs, 7);
  for (int i = 0; i < 7; i++) ck_assert_int_eq(attr(r, i), want[i]);
  ck_assert(r->flags & IRF_BIAS);
  ck_assert_int_eq(r->nargs, 3);
}
END_TEST

START_TEST(test_conv2d_layouts) {
  IrKernel *k = ok("kernel f(x: f32[2, 3, 8, 8] channels_last,"
                   " w: f32[4, 3, 3, 3]) -> f32[2, 4, 6, 6] channels_last {\n"
                   "  return conv2d(x, w)\n}\n");
  ck_geom(result(k, 0), "[2, 4, 6, 6]", "(144, 1, 24, 4)");
  /* a channels-last weight alone also decides */
  k = ok("kernel f(x: f32[2, 3, 8, 8], w: f32[4, 3, 3, 3] channels_last)"
         " -> f32[2, 4, 6, 6] channels_last {\n  return conv2d(x, w)\n}\n");
  ck_geom(result(k, 0), "[2, 4, 6, 6]", "(144, 1, 24, 4)");
  /* f64 stays contiguous */
  k = ok("kernel f(x: f64[2, 3, 8, 8] channels_last, w: f64[4, 3, 3, 3])"
         " -> f64[2, 4, 6, 6] {\n  return conv2d(x, w)\n}\n");
  ck_geom(result(k, 0), "[2, 4, 6, 6]", "(144, 36, 6, 1)");
}
END_TEST

START_TEST(test_conv2d_groups_dilation_unbatched) {
  IrKernel *k = ok("kernel f(x: f32[4, 9, 9], w: f32[6, 2, 3, 3])"
                   " -> f32[6, 5, 5] {\n"
                   "  return conv2d(x, w, dilation=[2, 2], groups=2)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_SQUEEZE);
  ck_geom(r, "[6, 5, 5]", "(25, 5, 1)");
  const IrValue *cv = find_op(k, OP_CONV2D);
  ck_assert_str_eq(shape_of(cv), "[1, 6, 5, 5]");
  ck_assert_int_eq(attr(cv, 6), 2);
  ck_assert_int_eq(attr(cv, 4), 2);
}
END_TEST

START_TEST(test_conv2d_symbolic) {
  IrKernel *k = ok("kernel f(x: f32[N, 3, H, W], w: f32[8, 3, 3, 3])"
                   " -> f32[N, 8, H - 2, W - 2] {\n"
                   "  return conv2d(x, w)\n}\n");
  ck_assert_str_eq(shape_of(result(k, 0)), "[N, 8, H - 2, W - 2]");
  ck_assert_int_ge(k->nchecks, 2); /* output >= 1 at run time */
}
END_TEST

/* True when kernel k's checks whose message contains `what` all hold
 * for the size symbols named in `names` taking `vals` (others 1). */
static bool checks_hold(const IrKernel *k, const char *what,
                        const char *const *names, const int64_t *vals,
                        int n) {
  int64_t env[16];
  ck_assert_int_le(k->nsyms, 16);
  for (int i = 0; i < k->nsyms; i++) {
    env[i] = 1;
    for (int j = 0; j < n; j++)
      if (strcmp(k->syms[i].name, names[j]) == 0) env[i] = vals[j];
  }
  int seen = 0;
  for (int i = 0; i < k->nchecks; i++) {
    const IrCheck *ck = &k->checks[i];
    if (!strstr(ck->msg, what)) continue;
    seen++;
    int64_t l, r;
    ck_assert(sym_eval(ck->lhs, env, &l) && sym_eval(ck->rhs, env, &r));
    ck_assert_int_eq(ck->op, CHK_LE);
    if (l > r) return false;
  }
  ck_assert_msg(seen > 0, "no check mentions \"%s\"", what);
  return true;
}

/* PyTorch rejects an empty spatial dim unless the batch or the channel
 * dim is 0; with symbols that is decided at kernel entry. */
START_TEST(test_conv2d_empty_spatial) {
  fails("kernel f(x: f32[2, 3, 0, 5], w: f32[4, 3, 1, 1]) -> "
        "f32[2, 4, 2, 7] {\n  return conv2d(x, w, padding=1)\n}\n",
        "conv2d", "empty spatial dim");
  ok("kernel f(x: f32[2, 0, 0, 5], w: f32[4, 0, 1, 1]) -> "
     "f32[2, 4, 2, 7] {\n  return conv2d(x, w, padding=1)\n}\n");
  IrKernel *k = ok("kernel f(x: f32[N, 3, H, W], w: f32[4, 3, 3, 3]) -> "
                   "f32[N, 4, H, W] {\n  return conv2d(x, w, padding=1)"
                   "\n}\n");
  const char *nm[3] = {"N", "H", "W"};
  const char *what = "empty spatial dim";
  ck_assert(checks_hold(k, what, nm, (int64_t[]){2, 5, 7}, 3));
  ck_assert(!checks_hold(k, what, nm, (int64_t[]){2, 0, 7}, 3));
  ck_assert(!checks_hold(k, what, nm, (int64_t[]){1, 4, 0}, 3));
  ck_assert(checks_hold(k, what, nm, (int64_t[]){0, 0, 7}, 3));
  /* without padding the kernel-size check already needs H, W >= 3 */
  k = ok("kernel f(x: f32[N, 3, H, W], w: f32[4, 3, 3, 3]) -> "
         "f32[N, 4, H - 2, W - 2] {\n  return conv2d(x, w)\n}\n");
  for (int i = 0; i < k->nchecks; i++)
    ck_assert(!strstr(k->checks[i].msg, what));
}
END_TEST

START_TEST(test_conv2d_errors) {
  fails("kernel f(x: f32[1, 4, 8, 8], w: f32[2, 3, 3, 3]) -> f32[1, 2, 6, 6]"
        " {\n  return conv2d(x, w)\n}\n", "conv2d", "3 channels");
  fails("kernel f(x: f32[1, 3, 5, 5], w: f32[2, 3, 7, 7]) -> f32[1, 2, 1, 1]"
        " {\n  return conv2d(x, w)\n}\n", "conv2d", "smaller than the kernel");
  fails("kernel f(x: bool[1, 3, 5, 5], w: bool[2, 3, 3, 3]) -> bool[1, 2, 3, 3]"
        " {\n  return conv2d(x, w)\n}\n", "conv2d", "bool");
  /* integer convolution is fine on PyTorch's CPU */
  ok("kernel f(x: i64[1, 3, 5, 5], w: i64[2, 3, 3, 3]) -> i64[1, 2, 3, 3]"
     " {\n  return conv2d(x, w)\n}\n");
  fails("kernel f(x: f32[1, 3, 5, 5], w: f64[2, 3, 3, 3]) -> f32[1, 2, 3, 3]"
        " {\n  return conv2d(x, w)\n}\n", "conv2d", "f64");
  fails("kernel f(x: f32[1, 3, 5, 5], w: f32[2, 3, 3, 3], b: f32[3])"
        " -> f32[1, 2, 3, 3] {\n  return conv2d(x, w, b)\n}\n", "conv2d",
        "bias");
  fails("kernel f(x: f32[1, 3, 5, 5], w: f32[2, 3, 3, 3]) -> f32[1, 2, 3, 3]"
        " {\n  return conv2d(x, w, stride=0)\n}\n", "conv2d", "stride");
  fails("kernel f(x: f32[3, 5], w: f32[2, 3, 3, 3]) -> f32[1, 2, 3, 3]"
        " {\n  return conv2d(x, w)\n}\n", "conv2d", "[3, 5]");
}
END_TEST

/* ---- pooling ---- */

START_TEST(test_max_pool) {
  IrKernel *k = ok("kernel f(x: f32[1, 3, 8, 8]) -> f32[1, 3, 4, 4] {\n"
                   "  return max_pool2d(x, 2)\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_int_eq(r->op, OP_MAX_POOL2D);
  ck_geom(r, "[1, 3, 4, 4]", "(48, 16, 4, 1)");
  int64_t want[6] = {2, 2, 2, 2, 0, 0};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(attr(r, i), want[i]);
  /* (7 + 2 - 3) // 2 + 1 = 4; integers are fine for max pooling */
  k = ok("kernel f(x: i32[2, 3, 7, 7] channels_last) -> i32[2, 3, 4, 4]"
         " channels_last {\n"
         "  return max_pool2d(x, 3, stride=2, padding=1)\n}\n");
  ck_geom(result(k, 0), "[2, 3, 4, 4]", "(48, 1, 12, 3)");
}
END_TEST

START_TEST(test_avg_pool_unbatched_and_adaptive) {
  IrKernel *k = ok("kernel f(x: f32[3, 8, 6]) -> f32[3, 4, 3] {\n"
                   "  return avg_pool2d(x, [2, 2])\n}\n");
  IrValue *r = result(k, 0);
  ck_geom(r, "[3, 4, 3]", "(12, 3, 1)");
  ck_assert_int_eq(find_op(k, OP_AVG_POOL2D)->rank, 4);
  k = ok("kernel f(x: f32[2, 3, 8, 8] channels_last) -> f32[2, 3, 1, 1] {\n"
         "  return adaptive_avg_pool2d(x, 1)\n}\n");
  r = result(k, 0);
  ck_assert_int_eq(r->op, OP_ADAPTIVE_AVG_POOL2D);
  ck_geom(r, "[2, 3, 1, 1]", "(3, 1, 3, 3)");
}
END_TEST

START_TEST(test_pool_errors) {
  fails("kernel f(x: f32[1, 3, 8, 8]) -> f32[1, 3, 5, 5] {\n"
        "  return max_pool2d(x, 2, padding=2)\n}\n", "max_pool2d",
        "half of the kernel");
  fails("kernel f(x: i32[1, 3, 8, 8]) -> i32[1, 3, 4, 4] {\n"
        "  return avg_pool2d(x, 2)\n}\n", "avg_pool2d", "i32");
  fails("kernel f(x: f32[1, 3, 2, 2]) -> f32[1, 3, 1, 1] {\n"
        "  return max_pool2d(x, 3)\n}\n", "max_pool2d", "smaller");
  fails("kernel f(x: bool[1, 3, 2, 2]) -> bool[1, 3, 1, 1] {\n"
        "  return max_pool2d(x, 2)\n}\n", "max_pool2d", "bool");
}
END_TEST

/* ---- factories ---- */

START_TEST(test_tensor_literal) {
  IrKernel *k = ok("kernel f() -> (i64[2, 2], f32[3], bool[2], f16[2]) {\n"
                   "  return tensor([[1, 2], [3, -4]]), tensor([1, 2.5, 3]),"
                   " tensor([true, false]), tensor([1, 2], f16)\n}\n");
  IrValue *a = result(k, 0), *b = result(k, 1), *c = result(k, 2);
  ck_assert_int_eq(a->op, OP_TENSOR);
  ck_assert_int_eq(a->dtype, DT_I64);
  ck_geom(a, "[2, 2]", "(2, 1)");
  const int64_t *ai = a->data;
  ck_assert_int_eq(ai[0], 1);
  ck_assert_int_eq(ai[3], -4);
  ck_assert_int_eq(b->dtype, DT_F32);
  ck_assert(((const float *)b->data)[1] == 2.5f);
  ck_assert_int_eq(c->dtype, DT_BOOL);
  ck_assert_int_eq(((const uint8_t *)c->data)[0], 1);
  ck_assert_int_eq(((const uint8_t *)c->data)[1], 0);
  ck_assert_int_eq(result(k, 3)->dtype, DT_F16);
}
END_TEST

START_TEST(test_tensor_ragged_fails) {
  fails("kernel f() -> i64[2, 2] {\n"
        "  return tensor([[1, 2], [3, 4, 5]])\n}\n", "tensor",
        "expected sequence of length 2 at dim 1 (got 3)");
}
END_TEST

START_TEST(test_fills) {
  IrKernel *k = ok("kernel f(x: f32[N]) -> (f32[N, 3], f16[2], f32[2],"
                   " i64[2, 2], bool[1]) {\n"
                   "  return zeros(N, 3), ones([2], dtype=f16),"
                   " full([2], 1.5), full([2, 2], 7), full([1], true)\n}\n");
  IrValue *z = result(k, 0);
  ck_assert_int_eq(z->op, OP_FULL);
  ck_assert_str_eq(shape_of(z), "[N, 3]");
  ck_assert(z->value.f == 0.0);
  ck_assert_int_eq(result(k, 1)->dtype, DT_F16);
  ck_assert(result(k, 1)->value.f == 1.0);
  ck_assert_int_eq(result(k, 2)->dtype, DT_F32);
  ck_assert(result(k, 2)->value.f == 1.5);
  ck_assert_int_eq(result(k, 3)->dtype, DT_I64);
  ck_assert_int_eq(result(k, 3)->value.i, 7);
  ck_assert_int_eq(result(k, 4)->dtype, DT_BOOL);
  fails("kernel f() -> f32[2] {\n  return zeros(2, -1)\n}\n", "zeros",
        "negative");
}
END_TEST

START_TEST(test_arange) {
  IrKernel *k = ok("kernel f(x: f32[N]) -> (i64[5], f32[4], i64[3], i64[N],"
                   " i64[3]) {\n"
                   "  return arange(5), arange(0, 1, 0.25), arange(1, 10, 3),"
                   " arange(N), arange(5, 2, -1)\n}\n");
  IrValue *a = result(k, 0), *b = result(k, 1), *c = result(k, 2);
  ck_assert_int_eq(a->op, OP_ARANGE);
  ck_assert_int_eq(a->dtype, DT_I64);
  ck_assert(a->fattr[0] == 0 && a->fattr[1] == 1);
  ck_assert_int_eq(b->dtype, DT_F32);
  ck_assert(b->fattr[1] == 0.25);
  ck_assert(c->fattr[0] == 1 && c->fattr[1] == 3);
  ck_assert_str_eq(shape_of(result(k, 3)), "[N]");
  ck_assert(result(k, 4)->fattr[1] == -1);
  fails("kernel f() -> i64[1] {\n  return arange(0, 5, 0)\n}\n", "arange",
        "step");
  fails("kernel f() -> i64[1] {\n  return arange(5, 0)\n}\n", "arange",
        "sign");
}
END_TEST


START_TEST(test_reduce_zero_dim_input) {
  /* a 0-dim tensor accepts dim 0 and -1 */
  IrKernel *k = ok("kernel f(x: f32[]) -> (f32[], i64[], f32[]) {\n"
                   "  return x.sum(0), x.argmax(), x.softmax(-1)\n}\n");
  for (int i = 0; i < 3; i++) ck_assert_int_eq(result(k, i)->rank, 0);
  ck_assert_int_eq(result(k, 0)->nattrs, 0);
  fails("kernel f(x: f32[]) -> f32[] {\n  return x.sum(1)\n}\n", "sum",
        "out of range");
}
END_TEST

START_TEST(test_amax_symbolic_dim_checked) {
  /* a symbolic reduced dim may be 0 at run time: PyTorch fails then */
  IrKernel *k = ok("kernel f(x: f32[N, 5]) -> f32[5] {\n"
                   "  return x.amax(0)\n}\n");
  ck_assert_int_ge(k->nchecks, 1);
  ck_assert(sym_is(k->checks[k->nchecks - 1].lhs, 1));
}
END_TEST

START_TEST(test_matmul_symbolic_mismatch_fails) {
  fails("kernel f(a: f32[M, K], b: f32[J, N]) -> f32[M, N] {\n"
        "  return a @ b\n}\n", "@", "same expression");
}
END_TEST

START_TEST(test_conv2d_padding_same) {
  IrKernel *k = ok("kernel f(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 5])"
                   " -> f32[1, 4, 8, 8] {\n"
                   "  return conv2d(x, w, padding=\"same\")\n}\n");
  IrValue *r = result(k, 0);
  ck_assert_str_eq(shape_of(r), "[1, 4, 8, 8]");
  ck_assert_int_eq(attr(r, 2), 1);
  ck_assert_int_eq(attr(r, 3), 2);
  fails("kernel f(x: f32[1, 3, 8, 8], w: f32[4, 3, 3, 3]) -> f32[1, 4, 4, 4]"
        " {\n  return conv2d(x, w, stride=2, padding=\"same\")\n}\n",
        "conv2d", "stride 1");
}
END_TEST

START_TEST(test_pool_symbolic) {
  /* (H - 2) // 2 + 1 is written H//2, so it matches a declared H // 2 */
  IrKernel *k = ok("kernel f(x: f32[N, 3, H, W]) -> f32[N, 3, H // 2, W // 2]"
                   " {\n  return avg_pool2d(x, 2)\n}\n");
  ck_assert_str_eq(shape_of(result(k, 0)), "[N, 3, H//2, W//2]");
  k = ok("kernel f(x: f32[2, 3, H, 8]) -> f32[2, 3, 1, 4] {\n"
         "  return adaptive_avg_pool2d(x, [1, 4])\n}\n");
  ck_assert_str_eq(shape_of(result(k, 0)), "[2, 3, 1, 4]");
  k = ok("kernel f(x: f32[2, 3, H, 8]) -> f32[2, 3, H, 4] {\n"
         "  return adaptive_avg_pool2d(x, [None, 4])\n}\n");
  ck_assert_str_eq(shape_of(result(k, 0)), "[2, 3, H, 4]");
}
END_TEST

START_TEST(test_tensor_scalar_and_empty) {
  IrKernel *k = ok("kernel f() -> (f32[], f32[0], f32[2, 0]) {\n"
                   "  return tensor(2.5), tensor([]), tensor([[], []])\n}\n");
  ck_assert_int_eq(result(k, 0)->rank, 0);
  ck_assert(*(const float *)result(k, 0)->data == 2.5f);
  ck_assert_int_eq(result(k, 1)->dtype, DT_F32);
  ck_assert_str_eq(shape_of(result(k, 2)), "[2, 0]");
}
END_TEST

START_TEST(test_factory_arg_errors) {
  fails("kernel f() -> f32[2] {\n  return zeros(2, f16, dtype=f32)\n}\n",
        "zeros", "twice");
  fails("kernel f() -> f32[2] {\n  return arange(0, 2, 1, 7)\n}\n",
        "7)", "positional");
  fails("kernel f(x: f32[N]) -> f32[N] {\n  return full([N], N)\n}\n",
        "full", "fill_value");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("sema_ops");
  TCase *t = tcase_create("reduce");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_sum_keepdim_positional);
  tcase_add_test(t, test_sum_dims_sorted_and_wrapped);
  tcase_add_test(t, test_sum_all_default);
  tcase_add_test(t, test_sum_of_ints_is_i64);
  tcase_add_test(t, test_amax_keeps_int_dtype);
  tcase_add_test(t, test_mean_of_int_fails);
  tcase_add_test(t, test_duplicate_dims_fail);
  tcase_add_test(t, test_dim_out_of_range_fails);
  tcase_add_test(t, test_amax_empty_dim_fails);
  tcase_add_test(t, test_argmax);
  tcase_add_test(t, test_argmax_dim_list_fails);
  tcase_add_test(t, test_reduce_zero_dim_input);
  tcase_add_test(t, test_amax_symbolic_dim_checked);
  suite_add_tcase(s, t);
  t = tcase_create("norm");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_softmax_contiguous);
  tcase_add_test(t, test_softmax_int_fails);
  tcase_add_test(t, test_layer_norm);
  tcase_add_test(t, test_layer_norm_errors);
  suite_add_tcase(s, t);
  t = tcase_create("matmul");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_matmul_2d);
  tcase_add_test(t, test_matmul_vec_batched);
  tcase_add_test(t, test_matmul_dot_and_mv);
  tcase_add_test(t, test_matmul_broadcast_batch);
  tcase_add_test(t, test_matmul_symbolic);
  tcase_add_test(t, test_matmul_errors);
  tcase_add_test(t, test_matmul_symbolic_mismatch_fails);
  suite_add_tcase(s, t);
  t = tcase_create("conv_pool");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_conv2d_shape_attrs);
  tcase_add_test(t, test_conv2d_layouts);
  tcase_add_test(t, test_conv2d_groups_dilation_unbatched);
  tcase_add_test(t, test_conv2d_symbolic);
  tcase_add_test(t, test_conv2d_empty_spatial);
  tcase_add_test(t, test_conv2d_errors);
  tcase_add_test(t, test_max_pool);
  tcase_add_test(t, test_avg_pool_unbatched_and_adaptive);
  tcase_add_test(t, test_pool_errors);
  tcase_add_test(t, test_conv2d_padding_same);
  tcase_add_test(t, test_pool_symbolic);
  suite_add_tcase(s, t);
  t = tcase_create("factory");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, test_tensor_literal);
  tcase_add_test(t, test_tensor_ragged_fails);
  tcase_add_test(t, test_fills);
  tcase_add_test(t, test_arange);
  tcase_add_test(t, test_tensor_scalar_and_empty);
  tcase_add_test(t, test_factory_arg_errors);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
