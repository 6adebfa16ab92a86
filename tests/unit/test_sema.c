/* test_sema.c — semantic analysis (frontend/sema.c, sema_expr.c,
 * sema_elementwise.c, sema_views.c, sema_values.c): type promotion,
 * elementwise layouts, views, indexing, copies, kernel signatures and
 * diagnostics, through parse_program + sema_program on small programs.
 * Expected dtypes, shapes and strides are the ones PyTorch gives
 * (spec/pytorch-semantics.md §1–§7, worked examples there); error
 * positions are the operator token or the call's name (spec §8.1). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"
#include "ir/geometry.h"
#include "ir/ir.h"

static Arena *A;
static char *ERR; /* all diagnostics of the last compile */
static int NERR;
static IrModule *MOD; /* the last module compiled */

static void setup(void) {
  A = arena_new();
  ERR = NULL;
}

static void teardown(void) { arena_free(A); }

static IrModule *compile(const char *src) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  Diag d;
  diag_init(&d, "t.tdsl", src, f);
  AstProgram *p = parse_program(A, &d, src);
  ck_assert_msg(p != NULL, "parse failed for:\n%s", src);
  IrModule *m = sema_program(A, &d, p, "t.tdsl");
  MOD = m;
  NERR = d.nerrors;
  long n = ftell(f);
  rewind(f);
  ERR = arena_alloc(A, (size_t)n + 1);
  size_t got = fread(ERR, 1, (size_t)n, f);
  ERR[got] = 0;
  fclose(f);
  return m;
}

static IrKernel *ok(const char *src) {
  IrModule *m = compile(src);
  ck_assert_msg(m != NULL, "unexpected errors:\n%s", ERR);
  ck_assert_str_eq(ERR, "");
  ck_assert_int_eq(ir_verify(m, stderr), 0);
  return m->kernels[0];
}

/* The last value bound to `name` by an assignment. */
static const IrValue *named(const IrKernel *k, const char *name) {
  for (int i = k->nvalues - 1; i >= 0; i--)
    if (k->values[i].name && strcmp(k->values[i].name, name) == 0)
      return &k->values[i];
  ck_abort_msg("no value named %s", name);
  return NULL;
}

static void check_geom(const IrValue *v, DType dt, const char *shape,
                       const char *stride) {
  ck_assert_str_eq(dtype_name(v->dtype), dtype_name(dt));
  ck_assert_str_eq(geom_shape_str(A, v->shape, v->rank), shape);
  if (stride) ck_assert_str_eq(geom_stride_str(A, v->stride, v->rank), stride);
}

static int64_t offset_of(const IrValue *v) {
  int64_t o = -1;
  ck_assert(sym_is_const(v->offset, &o));
  return o;
}

/* Must fail with `count` errors, the first at line:col containing
 * `what`. */
static void fails(const char *src, int count, int line, int col,
                  const char *what) {
  ck_assert_ptr_null(compile(src));
  ck_assert_msg(NERR == count, "expected %d errors, got %d:\n%s", count,
                NERR, ERR);
  char want[64];
  snprintf(want, sizeof want, "t.tdsl:%d:%d: error: ", line, col);
  ck_assert_msg(strncmp(ERR, want, strlen(want)) == 0,
                "expected first error at %s, got:\n%s", want, ERR);
  ck_assert_msg(strstr(ERR, what) != NULL, "expected '%s' in:\n%s", what,
                ERR);
}

/* ---- promotion (pytorch-semantics.md §5) ---- */

static const char *PROMO =
    "kernel k(a: i32[4], h: f16[4], bb: bool[4], u: u8[4], c: i8[4],\n"
    "         l: i64[4], d: f64, bf: bf16[4], x: f32[4]) -> i32[4] {\n"
    "  r1 = a + 5\n"
    "  r2 = a + 2.5\n"
    "  r3 = h + 2.5\n"
    "  r4 = bb + 1\n"
    "  r5 = u + 1\n"
    "  r6 = l + d\n"
    "  r7 = h + d\n"
    "  r8 = u + c\n"
    "  r9 = h + bf\n"
    "  r10 = a / 2\n"
    "  r11 = a < 2.5\n"
    "  r12 = a.exp()\n"
    "  r13 = a.abs()\n"
    "  r14 = x * d\n"
    "  r15 = bb & bb\n"
    "  r16 = bb.logical_not()\n"
    "  r17 = 2 ** a\n"
    "  return r1\n"
    "}\n";

START_TEST(promotion_table) {
  IrKernel *k = ok(PROMO);
  struct { const char *n; DType dt; } want[] = {
      {"r1", DT_I32},  {"r2", DT_F32},  {"r3", DT_F16},  {"r4", DT_I64},
      {"r5", DT_U8},   {"r6", DT_F64},  {"r7", DT_F16},  {"r8", DT_I16},
      {"r9", DT_F32},  {"r10", DT_F32}, {"r11", DT_BOOL}, {"r12", DT_F32},
      {"r13", DT_I32}, {"r14", DT_F32}, {"r15", DT_BOOL}, {"r16", DT_BOOL},
      {"r17", DT_I32},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const IrValue *v = named(k, want[i].n);
    ck_assert_msg(v->dtype == want[i].dt, "%s: got %s, want %s", want[i].n,
                  dtype_name(v->dtype), dtype_name(want[i].dt));
  }
}
END_TEST

/* Operands are pre-cast to the compute dtype and pre-expanded (ops.h). */
START_TEST(operands_cast_and_expanded) {
  IrKernel *k = ok("kernel k(a: i32[2, 3], b: f32[3]) -> f32[2, 3] {\n"
                   "  y = a < b\n"
                   "  return a + b\n"
                   "}\n");
  const IrValue *y = named(k, "y");
  ck_assert_int_eq(y->op, OP_LT);
  check_geom(y, DT_BOOL, "[2, 3]", "[3, 1]");
  for (int i = 0; i < 2; i++) {
    const IrValue *o = &k->values[y->args[i]];
    ck_assert_str_eq(dtype_name(o->dtype), "f32");
    ck_assert_str_eq(geom_shape_str(A, o->shape, o->rank), "[2, 3]");
  }
  const IrValue *b = &k->values[k->values[y->args[1]].args[0]];
  ck_assert_int_eq(k->values[y->args[1]].op, OP_EXPAND);
  ck_assert(k->values[y->args[1]].flags & IRF_IMPLICIT);
  ck_assert_int_eq(b->op, OP_PARAM);
  const IrValue *a = &k->values[y->args[0]];
  ck_assert_int_eq(a->op, OP_CAST);
  ck_assert(a->flags & IRF_IMPLICIT);
}
END_TEST

/* ---- layouts (§7) ---- */

START_TEST(elementwise_layouts) {
  IrKernel *k = ok(
      "kernel k(x: f32[2, 3, 4, 5], y: f32[2, 3, 4, 5] channels_last,\n"
      "         b: f32[3, 1, 1], t: f32[3, 4]) -> f32[2, 3, 4, 5] {\n"
      "  r1 = x + y\n"
      "  r2 = y + x\n"
      "  r3 = b + y\n"
      "  r4 = t.t().exp()\n"
      "  r5 = y.contiguous()\n"
      "  r6 = x.contiguous(channels_last)\n"
      "  r7 = y.clone()\n"
      "  r8 = y.to(f16)\n"
      "  r9 = x.to(memory_format=channels_last)\n"
      "  return r1\n"
      "}\n");
  check_geom(named(k, "r1"), DT_F32, "[2, 3, 4, 5]", "[60, 20, 5, 1]");
  check_geom(named(k, "r2"), DT_F32, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
  check_geom(named(k, "r3"), DT_F32, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
  check_geom(named(k, "r4"), DT_F32, "[4, 3]", "[1, 4]");
  const IrValue *r5 = named(k, "r5");
  ck_assert_int_eq(r5->op, OP_COPY);
  check_geom(r5, DT_F32, "[2, 3, 4, 5]", "[60, 20, 5, 1]");
  const IrValue *r6 = named(k, "r6");
  ck_assert_int_eq(r6->op, OP_COPY);
  ck_assert(r6->flags & IRF_CL);
  check_geom(r6, DT_F32, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
  const IrValue *r7 = named(k, "r7");
  ck_assert(r7->flags & IRF_CLONE);
  check_geom(r7, DT_F32, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
  const IrValue *r8 = named(k, "r8");
  ck_assert_int_eq(r8->op, OP_CAST);
  ck_assert(!(r8->flags & IRF_IMPLICIT));
  check_geom(r8, DT_F16, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
  check_geom(named(k, "r9"), DT_F32, "[2, 3, 4, 5]", "[60, 1, 15, 3]");
}
END_TEST

/* Copies that PyTorch skips give back the same value. */
START_TEST(copies_elided) {
  IrKernel *k = ok("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n"
                   "  a = x.contiguous()\n"
                   "  b = a.to(f32)\n"
                   "  return b\n"
                   "}\n");
  ck_assert_int_eq(k->nvalues, 1);
  ck_assert_int_eq(k->results[0].value, k->params[0].value);
}
END_TEST

/* ---- views (§1, §2, §4) ---- */

START_TEST(views) {
  IrKernel *k = ok(
      "kernel k(x: f32[2, 3, 4], v: f32[10], m: f32[3, 4]) -> f32[6, 4] {\n"
      "  a = x.view(6, 4)\n"
      "  b = x.view(-1)\n"
      "  c = x.permute(2, 0, 1)\n"
      "  d = x.transpose(1, 2).view(2, 2, 2, 3)\n"
      "  e = x.transpose(1, 2).reshape(24)\n"
      "  f = x.flatten(1)\n"
      "  g = x.unsqueeze(1)\n"
      "  h = x[1]\n"
      "  i = x[:, 1:3]\n"
      "  j = v[2:9:3]\n"
      "  l = m.diagonal(1)\n"
      "  n = v.unfold(0, 3, 2)\n"
      "  o = x[None, ..., -1]\n"
      "  p = m.T\n"
      "  q = m.unflatten(1, [2, 2])\n"
      "  r = x.narrow(2, 1, 2)\n"
      "  w = x.expand(5, 2, 3, 4)\n"
      "  z = v.as_strided([3, 3], [1, 2], 1)\n"
      "  return a\n"
      "}\n");
  check_geom(named(k, "a"), DT_F32, "[6, 4]", "[4, 1]");
  ck_assert_int_eq(named(k, "a")->op, OP_VIEW);
  check_geom(named(k, "b"), DT_F32, "[24]", "[1]");
  check_geom(named(k, "c"), DT_F32, "[4, 2, 3]", "[1, 12, 4]");
  ck_assert_int_eq(named(k, "c")->op, OP_PERMUTE);
  check_geom(named(k, "d"), DT_F32, "[2, 2, 2, 3]", "[12, 2, 1, 4]");
  const IrValue *e = named(k, "e");
  ck_assert_int_eq(e->op, OP_RESHAPE);
  check_geom(e, DT_F32, "[24]", "[1]");
  check_geom(named(k, "f"), DT_F32, "[2, 12]", "[12, 1]");
  check_geom(named(k, "g"), DT_F32, "[2, 1, 3, 4]", "[12, 12, 4, 1]");
  check_geom(named(k, "h"), DT_F32, "[3, 4]", "[4, 1]");
  ck_assert_int_eq(offset_of(named(k, "h")), 12);
  check_geom(named(k, "i"), DT_F32, "[2, 2, 4]", "[12, 4, 1]");
  ck_assert_int_eq(offset_of(named(k, "i")), 4);
  check_geom(named(k, "j"), DT_F32, "[3]", "[3]");
  ck_assert_int_eq(offset_of(named(k, "j")), 2);
  check_geom(named(k, "l"), DT_F32, "[3]", "[5]");
  ck_assert_int_eq(offset_of(named(k, "l")), 1);
  check_geom(named(k, "n"), DT_F32, "[4, 3]", "[2, 1]"); /* (10-3)//2+1 */
  check_geom(named(k, "o"), DT_F32, "[1, 2, 3]", NULL);
  ck_assert_int_eq(offset_of(named(k, "o")), 3);
  check_geom(named(k, "p"), DT_F32, "[4, 3]", "[1, 4]");
  check_geom(named(k, "q"), DT_F32, "[3, 2, 2]", "[4, 2, 1]");
  check_geom(named(k, "r"), DT_F32, "[2, 3, 2]", "[12, 4, 1]");
  ck_assert_int_eq(offset_of(named(k, "r")), 1);
  check_geom(named(k, "w"), DT_F32, "[5, 2, 3, 4]", "[0, 12, 4, 1]");
  check_geom(named(k, "z"), DT_F32, "[3, 3]", "[1, 2]");
  ck_assert_int_eq(offset_of(named(k, "z")), 1);
}
END_TEST

/* Views stack: geometry stays absolute in the storage root. */
START_TEST(view_chain_absolute) {
  IrKernel *k = ok("kernel k(v: f32[10]) -> f32[3] {\n"
                   "  a = v[2:]\n"
                   "  b = a[1::3]\n"
                   "  return b.clone()\n"
                   "}\n");
  const IrValue *b = named(k, "b");
  check_geom(b, DT_F32, "[3]", "[3]");
  ck_assert_int_eq(offset_of(b), 3);
  /* clone() of a non-contiguous 1-D view is dense */
  IrValue *r = &k->values[k->results[0].value];
  ck_assert(r->flags & IRF_CLONE);
  ck_assert_str_eq(geom_stride_str(A, r->stride, r->rank), "[1]");
}
END_TEST

START_TEST(symbolic_view) {
  IrKernel *k = ok(
      "kernel k(x: f32[N, C, H, W], s: f32[N, C, H, W] strided)\n"
      "    -> f32[N, C * H * W] {\n"
      "  y = x.view(N, C * H * W)\n"
      "  z = x[:, :, 0]\n"
      "  return y\n"
      "}\n");
  check_geom(named(k, "y"), DT_F32, "[N, C*H*W]", "[C*H*W, 1]");
  check_geom(named(k, "z"), DT_F32, "[N, C, W]", "[C*H*W, H*W, 1]");
  ck_assert_int_eq(k->nsyms, 8); /* N C H W + 4 strides of s */
  ck_assert_str_eq(k->syms[4].name, "s.stride(0)");
  ck_assert_int_eq(k->syms[4].kind, SYMK_STRIDE);
  ck_assert_int_eq(k->syms[0].param, 0);
  ck_assert_int_eq(k->syms[3].dim, 3);
  /* the second appearance of N reuses the same Sym */
  ck_assert_ptr_eq(k->params[0].shape[0], k->params[1].shape[0]);
}
END_TEST

START_TEST(clamp_where_gelu) {
  IrKernel *k = ok(
      "kernel k(x: f32[4], i: i32[4], c: bool[4]) -> f32[4] {\n"
      "  a = clamp(i, 0.5, 2)\n"
      "  b = where(c, i, 1.5)\n"
      "  g = gelu(x, approximate=\"tanh\")\n"
      "  m = i.clamp(max=3)\n"
      "  return a\n"
      "}\n");
  const IrValue *a = named(k, "a");
  ck_assert_int_eq(a->op, OP_MINIMUM);
  check_geom(a, DT_F32, "[4]", "[1]");
  ck_assert_int_eq(k->values[a->args[0]].op, OP_MAXIMUM);
  const IrValue *b = named(k, "b");
  ck_assert_int_eq(b->op, OP_WHERE);
  check_geom(b, DT_F32, "[4]", "[1]");
  ck_assert(named(k, "g")->flags & IRF_TANH);
  check_geom(named(k, "m"), DT_I32, "[4]", "[1]");
}
END_TEST

/* A number bound beside a 0-dim tensor bound is PyTorch's Number
 * overload (the tensor read as a number); tensor bounds alone are the
 * Tensor overload, where a 0-dim f64 bound promotes an i32 input to f64. */
START_TEST(clamp_zero_dim_bounds) {
  IrKernel *k = ok(
      "kernel k(i: i32[4], h: f16[4], d: f64[], s: f64, n: i64[]) -> f32[4] {\n"
      "  a = clamp(i, 0, d)\n"
      "  b = i.clamp(s, 5)\n"
      "  c = clamp(h, min=0.5, max=d)\n"
      "  e = clamp(i, d, d)\n"
      "  f = clamp(i, min=d)\n"
      "  g = clamp(i, n, 7)\n"
      "  return a\n"
      "}\n");
  check_geom(named(k, "a"), DT_F32, "[4]", "[1]");
  check_geom(named(k, "b"), DT_F32, "[4]", "[1]");
  check_geom(named(k, "c"), DT_F16, "[4]", "[1]");
  check_geom(named(k, "e"), DT_F64, "[4]", "[1]");
  check_geom(named(k, "f"), DT_F64, "[4]", "[1]");
  check_geom(named(k, "g"), DT_I32, "[4]", "[1]");
}
END_TEST

START_TEST(constant_folding) {
  IrKernel *k = ok("kernel k(x: f32[N, 6]) -> f32[N, 2, 3] {\n"
                   "  n = 2 * 3 // 2\n"
                   "  y = x.view(N, 6 // n, n + 1 - 1)\n"
                   "  return y\n"
                   "}\n");
  check_geom(named(k, "y"), DT_F32, "[N, 2, 3]", "[6, 3, 1]");
}
END_TEST

/* ---- diagnostics ---- */

START_TEST(err_view_not_contiguous) {
  fails("kernel k(x: f32[3, 4]) -> f32[12] {\n"
        "    y = x.t().view(12)\n"
        "    return y\n"
        "}\n",
        1, 2, 15, "[4, 3] with strides [1, 4]");
  ck_assert(strstr(ERR, "t.tdsl:1:10: note: x declared here with shape "
                        "[3, 4]") != NULL);
}
END_TEST

START_TEST(err_broadcast) {
  fails("kernel k(x: f32[3], y: f32[4]) -> f32[3] {\n"
        "  return x + y\n"
        "}\n",
        1, 2, 12, "[3] and [4]");
}
END_TEST

START_TEST(err_several_and_no_cascade) {
  /* two independent errors; uses of the failed `y` stay silent */
  fails("kernel k(x: f32[3], b: bool[3]) -> f32[3] {\n"
        "  y = x + zz\n"
        "  w = -b\n"
        "  return y * 2\n"
        "}\n",
        2, 2, 11, "unknown name 'zz'");
  ck_assert(strstr(ERR, "t.tdsl:3:7: error: negation of a bool tensor") !=
            NULL);
}
END_TEST

START_TEST(err_dtype_rules) {
  fails("kernel k(b: bool[3]) -> bool[3] {\n  return b - b\n}\n", 1, 2, 12,
        "two bool tensors");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return x & x\n}\n", 1, 2, 12,
        "f32");
  fails("kernel k(x: i32[3]) -> f32[3] {\n  return x.gelu()\n}\n", 1, 2, 12,
        "floating-point");
  fails("kernel k(x: f32[3]) -> f32[3] {\n"
        "  return gelu(x, approximate=\"fast\")\n}\n",
        1, 2, 30, "\"none\" or \"tanh\"");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return ~x\n}\n", 1, 2, 10,
        "bool or integer");
  fails("kernel k(x: i32[3]) -> i32[3] {\n  return x ** -1\n}\n", 1, 2, 12,
        "negative integer powers");
  fails("kernel k(x: f32[3], c: f32[3]) -> f32[3] {\n"
        "  return where(c, x, 0.0)\n}\n",
        1, 2, 10, "bool condition");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return x.clamp()\n}\n", 1, 2, 12,
        "at least one");
}
END_TEST

START_TEST(err_indexing) {
  fails("kernel k(x: f32[3, 4]) -> f32[4] {\n  return x[1, 2, 3]\n}\n", 1,
        2, 11, "too many indices");
  fails("kernel k(x: f32[3, 4]) -> f32[3, 4] {\n  return x[::-1]\n}\n", 1,
        2, 14, "slice step must be positive");
  fails("kernel k(x: f32[3, 4]) -> f32[3, 4] {\n  return x[..., ...]\n}\n",
        1, 2, 17, "single ellipsis");
  fails("kernel k(x: f32[3, 4]) -> f32[4] {\n  return x[3]\n}\n", 1, 2, 12,
        "out of range");
}
END_TEST

START_TEST(err_views) {
  fails("kernel k(x: f32[2, 3, 4]) -> f32[4, 3, 2] {\n  return x.t()\n}\n",
        1, 2, 12, "at most 2 dims");
  fails("kernel k(x: f32[2, 3]) -> f32[7] {\n  return x.view(7)\n}\n", 1,
        2, 12, "[7]");
  fails("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n  return x.permute(0, 0)\n}\n",
        1, 2, 12, "permutation");
  fails("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n  return x.foo()\n}\n", 1,
        2, 12, "unknown method 'foo' of a tensor");
  fails("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n  return x.vew(6)\n}\n", 1,
        2, 12, "did you mean 'view'");
  fails("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n  return fooo(x)\n}\n", 1,
        2, 10, "unknown function 'fooo'");
  fails("kernel k(x: f32[2, 3]) -> f32[2, 3] {\n  return x.T.view(6)\n}\n",
        1, 2, 14, "reshape");
}
END_TEST

START_TEST(err_kernel_structure) {
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return x\n}\n"
        "kernel k(x: f32[3]) -> f32[3] {\n  return x\n}\n",
        1, 4, 8, "defined twice");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  y = x\n}\n", 1, 1, 8,
        "no return");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return x\n  y = x\n}\n", 1, 3,
        3, "after return");
  fails("kernel k(x: f32[3]) -> i32[3] {\n  return x\n}\n", 1, 2, 10,
        "dtype f32");
  fails("kernel k(x: f32[3]) -> f32[4] {\n  return x\n}\n", 1, 2, 10,
        "shape [3]");
  fails("kernel k(x: f32[N]) -> f32[M] {\n  return x\n}\n", 1, 1, 28,
        "symbol 'M' is used in a result but bound by no parameter");
  fails("kernel k(x: f32[3] channels_last) -> f32[3] {\n  return x\n}\n", 1,
        1, 13, "rank-4");
  fails("kernel k(x: f32[3], x: f32[3]) -> f32[3] {\n  return x\n}\n", 1, 1,
        21, "duplicate parameter");
  fails("kernel k(x: f32[3]) -> (f32[3], f32[3]) {\n  return x\n}\n", 1, 2,
        3, "returns 1 value but declares 2");
  fails("kernel k(x: f32[3]) -> f32[3] {\n  return 1\n}\n", 1, 2, 10,
        "not a tensor");
}
END_TEST

/* Results may use expressions of bound symbols. */
START_TEST(result_expressions) {
  IrKernel *k = ok("kernel k(x: f32[N, M]) -> f32[N * M] {\n"
                   "  return x.flatten()\n"
                   "}\n");
  ck_assert_ptr_eq(k->results[0].shape[0],
                   sym_mul(MOD->st, k->params[0].shape[0],
                           k->params[0].shape[1]));
}
END_TEST

static Suite *sema_suite(void) {
  Suite *s = suite_create("sema");
  TCase *t = tcase_create("core");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, promotion_table);
  tcase_add_test(t, operands_cast_and_expanded);
  tcase_add_test(t, elementwise_layouts);
  tcase_add_test(t, copies_elided);
  tcase_add_test(t, views);
  tcase_add_test(t, view_chain_absolute);
  tcase_add_test(t, symbolic_view);
  tcase_add_test(t, clamp_where_gelu);
  tcase_add_test(t, clamp_zero_dim_bounds);
  tcase_add_test(t, constant_folding);
  tcase_add_test(t, err_view_not_contiguous);
  tcase_add_test(t, err_broadcast);
  tcase_add_test(t, err_several_and_no_cascade);
  tcase_add_test(t, err_dtype_rules);
  tcase_add_test(t, err_indexing);
  tcase_add_test(t, err_views);
  tcase_add_test(t, err_kernel_structure);
  tcase_add_test(t, result_expressions);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(sema_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
