/* test_interp.c — the reference interpreter on hand-built IR: every op,
 * every dtype through CAST and ADD, integer wrap, saturating casts, half
 * rounding, Python // and % signs, views sharing storage, strided and
 * non-contiguous arguments, symbol binding and its errors, run-time
 * checks, reductions, normalizations, matmul, conv2d and pooling against
 * direct formulas.  Expected values come from hand calculation or from a
 * plain C formula of PyTorch's definition written here, never from the
 * interpreter's own output.  Needs: ir/interp.c, ir/interp_scalar.c,
 * ir/sym.c, ir/dtype.c. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"

static Arena *A;
static IrModule *M;
static IrKernel *K;
static HostTensor OUT[4];
static char ERR[512];
static HostTensor *ARGS_OWNED[32];
static int NOWNED;

static void setup(void) {
  A = arena_new();
  M = ir_module_new(A, "test");
  K = ir_kernel_new(M, "f", (Loc){0, 0, 0});
  K->params = arena_alloc(A, 8 * sizeof *K->params);
  K->results = arena_alloc(A, 8 * sizeof *K->results);
  memset(OUT, 0, sizeof OUT);
  ERR[0] = '\0';
  NOWNED = 0;
}

static void teardown(void) {
  for (int i = 0; i < 4; i++) host_tensor_free(&OUT[i]);
  for (int i = 0; i < NOWNED; i++) {
    host_tensor_free(ARGS_OWNED[i]);
    free(ARGS_OWNED[i]);
  }
  arena_free(A);
}

/* ---- IR construction ---- */

static const Sym *C(int64_t v) { return sym_const(M->st, v); }

static const Sym **cs(int n, const int64_t *v) {
  const Sym **s = arena_alloc(A, (size_t)(n ? n : 1) * sizeof *s);
  for (int i = 0; i < n; i++) s[i] = C(v[i]);
  return s;
}

static const Sym **contig_strides(int rank, const Sym **shape) {
  const Sym **s = arena_alloc(A, (size_t)(rank ? rank : 1) * sizeof *s);
  const Sym *acc = C(1);
  for (int d = rank - 1; d >= 0; d--) {
    s[d] = acc;
    acc = sym_mul(M->st, acc, shape[d]);
  }
  return s;
}

/* A value spec: constant geometry unless the symbolic fields are set. */
typedef struct VS {
  Op op;
  DType dt;
  int rank;
  int64_t shape[6], stride[6], off;
  bool strided; /* stride[] given, else contiguous */
  int nargs;
  IrRef args[3];
  int nattrs;
  int64_t attrs[8];
  int flags;
  double fattr[2];
  Scalar value;
  void *data;
  const Sym **sshape, **sstride, *soff, *sattr0;
} VS;

static IrRef V(VS s) {
  IrValue v = {0};
  v.op = s.op;
  v.dtype = s.dt;
  v.rank = s.rank;
  size_t gsz = (size_t)(s.rank ? s.rank : 1) * sizeof(const Sym *);
  /* symbolic arrays may be compound literals: copy them into the arena */
  v.shape = s.sshape ? arena_dup(A, s.sshape, gsz) : cs(s.rank, s.shape);
  v.stride = s.sstride ? arena_dup(A, s.sstride, gsz)
             : s.strided ? cs(s.rank, s.stride)
                         : contig_strides(s.rank, v.shape);
  v.offset = s.soff ? s.soff : C(s.off);
  v.nargs = s.nargs;
  v.args = arena_dup(A, s.args, sizeof s.args);
  v.nattrs = s.nattrs;
  v.attrs = cs(s.nattrs, s.attrs);
  if (s.sattr0) v.attrs[0] = s.sattr0;
  v.fattr[0] = s.fattr[0];
  v.fattr[1] = s.fattr[1];
  v.value = s.value;
  v.data = s.data;
  v.flags = s.flags;
  return ir_add(M, K, &v);
}
#define VAL(...) V((VS){__VA_ARGS__})

/* A tensor parameter (stride NULL: contiguous) or, rank < 0, a scalar. */
static IrRef P(const char *name, DType dt, int rank, const Sym **shape,
               Layout lay, const Sym **stride) {
  IrParam *p = &K->params[K->nparams];
  p->name = name;
  p->dtype = dt;
  p->is_tensor = rank >= 0;
  p->layout = lay;
  p->rank = rank < 0 ? 0 : rank;
  p->shape = rank > 0 ? arena_dup(A, shape, (size_t)rank * sizeof *shape) : NULL;
  p->value = VAL(.op = OP_PARAM, .dt = dt, .rank = p->rank,
                 .sshape = rank > 0 ? shape : NULL,
                 .sstride = stride ? stride
                            : rank > 0 ? contig_strides(rank, shape) : NULL,
                 .value.i = K->nparams);
  K->nparams++;
  return p->value;
}

static IrRef PC(const char *name, DType dt, int rank, const int64_t *shape) {
  return P(name, dt, rank, cs(rank, shape), LAYOUT_CONTIGUOUS, NULL);
}

static void R(IrRef r) {
  IrValue *v = ir_val(K, r);
  K->results[K->nresults++] = (IrResult){v->dtype, LAYOUT_CONTIGUOUS, v->rank,
                                         v->shape, (Loc){0, 0, 0}, r, NULL};
}

static int sym_id(const char *name, SymKind kind, int param, int dim) {
  IrSymVar s = {name, kind, param, dim, (Loc){0, 0, 0}};
  return ir_add_sym(M, K, &s);
}

/* ---- host tensors ---- */

static Scalar sc(DType dt, double v) {
  return dtype_is_float(dt) ? (Scalar){.f = v} : (Scalar){.i = (int64_t)v};
}

/* A tensor with the given strides and offset (NULL: contiguous); element
 * i (row-major) is vals[i], or i when vals is NULL. */
static HostTensor Tg(DType dt, int rank, const int64_t *shape,
                     const int64_t *stride, int64_t off, const double *vals) {
  HostTensor *t = calloc(1, sizeof *t);
  ARGS_OWNED[NOWNED++] = t;
  int64_t n = 1, ext = off + 1;
  t->dtype = dt;
  t->rank = rank;
  t->offset = off;
  for (int d = rank - 1; d >= 0; d--) {
    t->shape[d] = shape[d];
    t->stride[d] = stride ? stride[d] : n;
    n *= shape[d];
    ext += (shape[d] - 1) * t->stride[d];
  }
  t->owned = t->data = calloc((size_t)(ext > 0 ? ext : 1), 8);
  int64_t idx[TDSL_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t a = off, rem = i;
    for (int d = rank - 1; d >= 0; d--) {
      idx[d] = rem % shape[d];
      rem /= shape[d];
      a += idx[d] * t->stride[d];
    }
    scalar_store(dt, (char *)t->data + a * dtype_size(dt),
                 sc(dt, vals ? vals[i] : (double)i));
  }
  return *t;
}

static HostTensor T(DType dt, int rank, const int64_t *shape, const double *v) {
  return Tg(dt, rank, shape, NULL, 0, v);
}

/* Element i (row-major) of a result, as a double or an int64. */
static double at(int o, int64_t i) {
  Scalar s = scalar_load(OUT[o].dtype,
                         (char *)OUT[o].data + i * dtype_size(OUT[o].dtype));
  return dtype_is_float(OUT[o].dtype) ? s.f : (double)s.i;
}

static int64_t ati(int o, int64_t i) {
  return scalar_load(OUT[o].dtype,
                     (char *)OUT[o].data + i * dtype_size(OUT[o].dtype)).i;
}

static int run(const InterpArg *args) {
  return interp_run(M, K, args, OUT, ERR, sizeof ERR);
}

static void run_ok(const InterpArg *args) {
  int rc = run(args);
  ck_assert_msg(rc == 0, "interp_run failed: %s", ERR);
}

#define I64(...) ((int64_t[]){__VA_ARGS__})
#define F64(...) ((double[]){__VA_ARGS__})
#define ASSERT_NEAR(a, b, tol)                                                 \
  ck_assert_msg(fabs((double)(a) - (double)(b)) <= (tol), "%.17g != %.17g",    \
                (double)(a), (double)(b))

/* A binary op on two 1-D params of length n and dtype dt. */
static void binop_kernel(Op op, DType dt, DType res, int n) {
  IrRef a = PC("a", dt, 1, I64(n)), b = PC("b", dt, 1, I64(n));
  R(VAL(.op = op, .dt = res, .rank = 1, .shape = {n}, .nargs = 2,
        .args = {a, b}));
}

static void run2(DType dt, int n, const double *a, const double *b) {
  InterpArg args[2] = {{.t = T(dt, 1, I64(n), a)}, {.t = T(dt, 1, I64(n), b)}};
  run_ok(args);
}

/* ---- elementwise ---- */

START_TEST(test_add_f32) {
  IrRef x = PC("x", DT_F32, 2, I64(2, 3)), y = PC("y", DT_F32, 2, I64(2, 3));
  R(VAL(.op = OP_ADD, .dt = DT_F32, .rank = 2, .shape = {2, 3}, .nargs = 2,
        .args = {x, y}));
  InterpArg args[2] = {{.t = T(DT_F32, 2, I64(2, 3), NULL)},
                       {.t = T(DT_F32, 2, I64(2, 3), F64(.5, .25, 1, 2, 3, 4))}};
  run_ok(args);
  ck_assert_int_eq(OUT[0].rank, 2);
  ck_assert_int_eq(OUT[0].shape[0], 2);
  ck_assert_int_eq(OUT[0].shape[1], 3);
  double want[] = {0.5, 1.25, 3, 5, 7, 9};
  for (int i = 0; i < 6; i++) ck_assert_double_eq(at(0, i), want[i]);
}
END_TEST

/* i64 [1, -2, 100, 0] cast to each dtype, added to itself. */
START_TEST(test_cast_add_every_dtype) {
  static const double want[DT_COUNT][4] = {
      [DT_BOOL] = {1, 1, 1, 0},     [DT_I8] = {2, -4, -56, 0},
      [DT_U8] = {2, 252, 200, 0},   [DT_I16] = {2, -4, 200, 0},
      [DT_I32] = {2, -4, 200, 0},   [DT_I64] = {2, -4, 200, 0},
      [DT_F16] = {2, -4, 200, 0},   [DT_BF16] = {2, -4, 200, 0},
      [DT_F32] = {2, -4, 200, 0},   [DT_F64] = {2, -4, 200, 0}};
  DType dt = (DType)_i;
  IrRef x = PC("x", DT_I64, 1, I64(4));
  IrRef c = VAL(.op = OP_CAST, .dt = dt, .rank = 1, .shape = {4}, .nargs = 1,
                .args = {x});
  R(VAL(.op = OP_ADD, .dt = dt, .rank = 1, .shape = {4}, .nargs = 2,
        .args = {c, c}));
  InterpArg args[1] = {{.t = T(DT_I64, 1, I64(4), F64(1, -2, 100, 0))}};
  run_ok(args);
  ck_assert_int_eq(OUT[0].dtype, dt);
  for (int i = 0; i < 4; i++)
    ck_assert_msg(at(0, i) == want[dt][i], "%s[%d]: %g", dtype_name(dt), i,
                  at(0, i));
}
END_TEST

START_TEST(test_integer_wrap) {
  binop_kernel(OP_MUL, DT_I32, DT_I32, 2);
  run2(DT_I32, 2, F64(65536, -65536), F64(65536, 32768));
  ck_assert_int_eq(ati(0, 0), 0);                 /* 2^32 wraps to 0 */
  ck_assert_int_eq(ati(0, 1), INT32_MIN);         /* -2^31 fits */
}
END_TEST

START_TEST(test_integer_wrap_i64_u8_i8) {
  IrRef a = PC("a", DT_I64, 1, I64(1)), u = PC("u", DT_U8, 1, I64(2));
  IrRef s = PC("s", DT_I8, 1, I64(2));
  R(VAL(.op = OP_ADD, .dt = DT_I64, .rank = 1, .shape = {1}, .nargs = 2,
        .args = {a, a}));
  IrRef one = VAL(.op = OP_FULL, .dt = DT_U8, .rank = 1, .shape = {2},
                  .value.i = 1);
  R(VAL(.op = OP_SUB, .dt = DT_U8, .rank = 1, .shape = {2}, .nargs = 2,
        .args = {u, one}));
  R(VAL(.op = OP_NEG, .dt = DT_I8, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {s}));
  R(VAL(.op = OP_ABS, .dt = DT_I8, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {s}));
  InterpArg args[3] = {{.t = T(DT_I64, 1, I64(1), NULL)},
                       {.t = T(DT_U8, 1, I64(2), F64(0, 200))},
                       {.t = T(DT_I8, 1, I64(2), F64(-128, 5))}};
  /* INT64_MAX + INT64_MAX = -2 in two's complement */
  int64_t big = INT64_MAX;
  scalar_store(DT_I64, args[0].t.data, (Scalar){.i = big});
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), -2);
  ck_assert_int_eq(ati(1, 0), 255); /* 0 - 1 wraps */
  ck_assert_int_eq(ati(1, 1), 199);
  ck_assert_int_eq(ati(2, 0), -128); /* -(-128) wraps */
  ck_assert_int_eq(ati(2, 1), -5);
  ck_assert_int_eq(ati(3, 0), -128); /* abs(-128) wraps too, as PyTorch */
  ck_assert_int_eq(ati(3, 1), 5);
}
END_TEST

START_TEST(test_float_to_int_saturates) {
  IrRef x = PC("x", DT_F32, 1, I64(5));
  R(VAL(.op = OP_CAST, .dt = DT_I32, .rank = 1, .shape = {5}, .nargs = 1,
        .args = {x}));
  R(VAL(.op = OP_CAST, .dt = DT_I8, .rank = 1, .shape = {5}, .nargs = 1,
        .args = {x}));
  InterpArg args[1] = {{.t = T(DT_F32, 1, I64(5), F64(1e10, -1e10, NAN, -3.7, 3.7))}};
  run_ok(args);
  int64_t w32[] = {INT32_MAX, INT32_MIN, 0, -3, 3}, w8[] = {127, -128, 0, -3, 3};
  for (int i = 0; i < 5; i++) {
    ck_assert_int_eq(ati(0, i), w32[i]);
    ck_assert_int_eq(ati(1, i), w8[i]);
  }
}
END_TEST

START_TEST(test_half_rounding) {
  IrRef h = PC("h", DT_F16, 1, I64(4)), b = PC("b", DT_BF16, 1, I64(2));
  IrRef g = PC("g", DT_F16, 1, I64(4));
  R(VAL(.op = OP_ADD, .dt = DT_F16, .rank = 1, .shape = {4}, .nargs = 2,
        .args = {h, g}));
  IrRef one = VAL(.op = OP_FULL, .dt = DT_BF16, .rank = 1, .shape = {2},
                  .value.f = 1.0);
  R(VAL(.op = OP_ADD, .dt = DT_BF16, .rank = 1, .shape = {2}, .nargs = 2,
        .args = {b, one}));
  R(VAL(.op = OP_SQRT, .dt = DT_F16, .rank = 1, .shape = {4}, .nargs = 1,
        .args = {h}));
  /* f16 spacing is 2 in [2048, 4096): 1024+1025 = 2049 ties to even 2048;
   * 1025+1026 = 2051 ties to even 2052; 40000+40000 overflows to inf. */
  InterpArg args[3] = {{.t = T(DT_F16, 1, I64(4), F64(1024, 1025, 2, 40000))},
                       {.t = T(DT_BF16, 1, I64(2), F64(256, 258))},
                       {.t = T(DT_F16, 1, I64(4), F64(1025, 1026, 0, 40000))}};
  run_ok(args);
  ck_assert_double_eq(at(0, 0), 2048);
  ck_assert_double_eq(at(0, 1), 2052);
  ck_assert_double_eq(at(0, 2), 2);
  ck_assert(isinf(at(0, 3)) && at(0, 3) > 0);
  /* bf16 has 8 significant bits: 257 ties to 256, 259 ties to 260 */
  ck_assert_double_eq(at(1, 0), 256);
  ck_assert_double_eq(at(1, 1), 260);
  /* sqrt(2) in f16: 1448 * 2^-10 */
  ck_assert_double_eq(at(2, 2), 1448.0 / 1024.0);
}
END_TEST

START_TEST(test_floordiv_mod_int) {
  IrRef a = PC("a", DT_I32, 1, I64(6)), b = PC("b", DT_I32, 1, I64(6));
  R(VAL(.op = OP_FLOORDIV, .dt = DT_I32, .rank = 1, .shape = {6}, .nargs = 2,
        .args = {a, b}));
  R(VAL(.op = OP_MOD, .dt = DT_I32, .rank = 1, .shape = {6}, .nargs = 2,
        .args = {a, b}));
  run2(DT_I32, 6, F64(7, -7, 7, -7, 5, 6), F64(2, 2, -2, -2, 0, 3));
  int64_t q[] = {3, -4, -4, 3, 0, 2}, r[] = {1, 1, -1, -1, 0, 0};
  for (int i = 0; i < 6; i++) {
    ck_assert_int_eq(ati(0, i), q[i]);
    ck_assert_int_eq(ati(1, i), r[i]);
  }
}
END_TEST

START_TEST(test_floordiv_int64_min) {
  binop_kernel(OP_FLOORDIV, DT_I64, DT_I64, 2);
  InterpArg args[2] = {{.t = T(DT_I64, 1, I64(2), F64(0, -9))},
                       {.t = T(DT_I64, 1, I64(2), F64(-1, 4))}};
  scalar_store(DT_I64, args[0].t.data, (Scalar){.i = INT64_MIN});
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), INT64_MIN); /* -INT64_MIN wraps */
  ck_assert_int_eq(ati(0, 1), -3);
}
END_TEST

START_TEST(test_floordiv_mod_float) {
  IrRef a = PC("a", DT_F64, 1, I64(7)), b = PC("b", DT_F64, 1, I64(7));
  R(VAL(.op = OP_FLOORDIV, .dt = DT_F64, .rank = 1, .shape = {7}, .nargs = 2,
        .args = {a, b}));
  R(VAL(.op = OP_MOD, .dt = DT_F64, .rank = 1, .shape = {7}, .nargs = 2,
        .args = {a, b}));
  run2(DT_F64, 7, F64(7.5, -7.5, 5, 1, -1, 0, 0),
       F64(2, 2, -3, 0, 0, 0, -1));
  double q[] = {3, -4, -2, INFINITY, -INFINITY};
  double r[] = {1.5, 0.5, -1};
  for (int i = 0; i < 5; i++) ck_assert_double_eq(at(0, i), q[i]);
  ck_assert(isnan(at(0, 5)));
  ck_assert(at(0, 6) == 0 && signbit(at(0, 6))); /* 0 // -1 = -0.0 */
  for (int i = 0; i < 3; i++) ck_assert_double_eq(at(1, i), r[i]);
  ck_assert(isnan(at(1, 3)));                      /* x % 0 = nan */
}
END_TEST

START_TEST(test_pow) {
  IrRef a = PC("a", DT_I64, 1, I64(6)), b = PC("b", DT_I64, 1, I64(6));
  IrRef c = PC("c", DT_I8, 1, I64(1)), f = PC("f", DT_F64, 1, I64(2));
  R(VAL(.op = OP_POW, .dt = DT_I64, .rank = 1, .shape = {6}, .nargs = 2,
        .args = {a, b}));
  R(VAL(.op = OP_POW, .dt = DT_I8, .rank = 1, .shape = {1}, .nargs = 2,
        .args = {c, c}));
  R(VAL(.op = OP_POW, .dt = DT_F64, .rank = 1, .shape = {2}, .nargs = 2,
        .args = {f, f}));
  InterpArg args[4] = {
      {.t = T(DT_I64, 1, I64(6), F64(2, 3, 2, 1, -1, 2))},
      {.t = T(DT_I64, 1, I64(6), F64(10, 3, -1, -5, -3, 63))},
      {.t = T(DT_I8, 1, I64(1), F64(3))},
      {.t = T(DT_F64, 1, I64(2), F64(0.5, 2.5))}};
  run_ok(args);
  int64_t w[] = {1024, 27, 0, 1, -1, INT64_MIN};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(ati(0, i), w[i]);
  ck_assert_int_eq(ati(1, 0), 27);
  ASSERT_NEAR(at(2, 0), pow(0.5, 0.5), 1e-15);
  ASSERT_NEAR(at(2, 1), pow(2.5, 2.5), 1e-12);
}
END_TEST

START_TEST(test_maximum_minimum_nan) {
  binop_kernel(OP_MAXIMUM, DT_F32, DT_F32, 3);
  IrRef mn = VAL(.op = OP_MINIMUM, .dt = DT_F32, .rank = 1, .shape = {3},
                 .nargs = 2, .args = {0, 1});
  R(mn);
  run2(DT_F32, 3, F64(1, NAN, -2), F64(2, 0, NAN));
  ck_assert_double_eq(at(0, 0), 2);
  ck_assert(isnan(at(0, 1)) && isnan(at(0, 2)));
  ck_assert_double_eq(at(1, 0), 1);
  ck_assert(isnan(at(1, 1)) && isnan(at(1, 2)));
}
END_TEST

START_TEST(test_bitwise_logical) {
  IrRef a = PC("a", DT_I16, 1, I64(2)), b = PC("b", DT_I16, 1, I64(2));
  IrRef p = PC("p", DT_BOOL, 1, I64(4)), q = PC("q", DT_BOOL, 1, I64(4));
  Op ops[] = {OP_AND, OP_OR, OP_XOR};
  for (int i = 0; i < 3; i++) {
    R(VAL(.op = ops[i], .dt = DT_I16, .rank = 1, .shape = {2}, .nargs = 2,
          .args = {a, b}));
    R(VAL(.op = ops[i], .dt = DT_BOOL, .rank = 1, .shape = {4}, .nargs = 2,
          .args = {p, q}));
  }
  /* results only hold 4 tensors: check the rest in a second kernel run */
  K->nresults = 4;
  InterpArg args[4] = {{.t = T(DT_I16, 1, I64(2), F64(12, -1))},
                       {.t = T(DT_I16, 1, I64(2), F64(10, 5))},
                       {.t = T(DT_BOOL, 1, I64(4), F64(0, 0, 1, 1))},
                       {.t = T(DT_BOOL, 1, I64(4), F64(0, 1, 0, 1))}};
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), 8);
  ck_assert_int_eq(ati(0, 1), 5);
  ck_assert_int_eq(ati(2, 0), 14);
  ck_assert_int_eq(ati(2, 1), -1);
  int64_t band[] = {0, 0, 0, 1}, bor[] = {0, 1, 1, 1};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(ati(1, i), band[i]);
    ck_assert_int_eq(ati(3, i), bor[i]);
  }
  for (int i = 0; i < 4; i++) host_tensor_free(&OUT[i]);
  K->results[0] = K->results[4];
  K->results[1] = K->results[5];
  K->nresults = 2;
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), 6);
  ck_assert_int_eq(ati(0, 1), -6); /* 0xffff ^ 5 */
  int64_t bx[] = {0, 1, 1, 0};
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ati(1, i), bx[i]);
}
END_TEST

START_TEST(test_bitnot_logical_not) {
  IrRef p = PC("p", DT_BOOL, 1, I64(2)), u = PC("u", DT_U8, 1, I64(2));
  IrRef f = PC("f", DT_F32, 1, I64(3));
  R(VAL(.op = OP_BITNOT, .dt = DT_BOOL, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {p}));
  R(VAL(.op = OP_BITNOT, .dt = DT_U8, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {u}));
  R(VAL(.op = OP_LOGICAL_NOT, .dt = DT_BOOL, .rank = 1, .shape = {3},
        .nargs = 1, .args = {f}));
  InterpArg args[3] = {{.t = T(DT_BOOL, 1, I64(2), F64(0, 1))},
                       {.t = T(DT_U8, 1, I64(2), F64(0, 5))},
                       {.t = T(DT_F32, 1, I64(3), F64(0, NAN, -2))}};
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), 1);
  ck_assert_int_eq(ati(0, 1), 0);
  ck_assert_int_eq(ati(1, 0), 255);
  ck_assert_int_eq(ati(1, 1), 250);
  ck_assert_int_eq(ati(2, 0), 1);
  ck_assert_int_eq(ati(2, 1), 0); /* NaN is truthy */
  ck_assert_int_eq(ati(2, 2), 0);
}
END_TEST

START_TEST(test_compare) {
  static const Op ops[] = {OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE};
  static const int64_t want[6][4] = {{0, 1, 0, 0}, {1, 0, 1, 1},
                                     {1, 0, 0, 0}, {1, 1, 0, 0},
                                     {0, 0, 1, 0}, {0, 1, 1, 0}};
  for (int i = 0; i < 6; i++) {
    teardown();
    setup();
    binop_kernel(ops[i], DT_F64, DT_BOOL, 4);
    run2(DT_F64, 4, F64(1, 2, 3, NAN), F64(2, 2, -1, NAN));
    ck_assert_int_eq(OUT[0].dtype, DT_BOOL);
    for (int j = 0; j < 4; j++) ck_assert_int_eq(ati(0, j), want[i][j]);
  }
  teardown();
  setup();
  binop_kernel(OP_LT, DT_I8, DT_BOOL, 2);
  run2(DT_I8, 2, F64(-1, 3), F64(1, 2));
  ck_assert_int_eq(ati(0, 0), 1);
  ck_assert_int_eq(ati(0, 1), 0);
}
END_TEST

static double ref_unary(Op op, double x) {
  switch (op) {
  case OP_NEG: return -x;
  case OP_ABS: return x < 0 ? -x : x;
  case OP_EXP: return exp(x);
  case OP_LOG: return log(x);
  case OP_LOG1P: return log(1 + x);
  case OP_EXPM1: return exp(x) - 1;
  case OP_SQRT: return sqrt(x);
  case OP_RSQRT: return 1 / sqrt(x);
  case OP_SIN: return sin(x);
  case OP_COS: return cos(x);
  case OP_TANH: return (exp(2 * x) - 1) / (exp(2 * x) + 1);
  case OP_SIGMOID: return 1 / (1 + exp(-x));
  case OP_RELU: return x > 0 ? x : 0;
  case OP_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
  case OP_SILU: return x / (1 + exp(-x));
  case OP_ERF: return erf(x);
  case OP_FLOOR: return floor(x);
  case OP_CEIL: return ceil(x);
  case OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
  case OP_RECIPROCAL: return 1 / x;
  default: return NAN;
  }
}

START_TEST(test_unary_float) {
  static const Op ops[] = {OP_NEG,  OP_ABS,  OP_EXP,     OP_LOG,  OP_LOG1P,
                           OP_EXPM1, OP_SQRT, OP_RSQRT,  OP_SIN,  OP_COS,
                           OP_TANH, OP_SIGMOID, OP_RELU, OP_GELU, OP_SILU,
                           OP_ERF,  OP_FLOOR, OP_CEIL,   OP_SIGN, OP_RECIPROCAL};
  double xs[] = {-1.5, -0.25, 0.75, 2.5};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
    teardown();
    setup();
    IrRef x = PC("x", DT_F64, 1, I64(4));
    R(VAL(.op = ops[i], .dt = DT_F64, .rank = 1, .shape = {4}, .nargs = 1,
          .args = {x}));
    InterpArg args[1] = {{.t = T(DT_F64, 1, I64(4), xs)}};
    run_ok(args);
    for (int j = 0; j < 4; j++) {
      double w = ref_unary(ops[i], xs[j]);
      if (isnan(w)) ck_assert_msg(isnan(at(0, j)), "%s", op_name(ops[i]));
      else ck_assert_msg(fabs(at(0, j) - w) <= 1e-12 * (1 + fabs(w)),
                         "%s(%g) = %g, want %g", op_name(ops[i]), xs[j],
                         at(0, j), w);
    }
  }
}
END_TEST

START_TEST(test_round_sign_gelu_tanh) {
  IrRef x = PC("x", DT_F64, 1, I64(6));
  R(VAL(.op = OP_ROUND, .dt = DT_F64, .rank = 1, .shape = {6}, .nargs = 1,
        .args = {x}));
  R(VAL(.op = OP_SIGN, .dt = DT_F64, .rank = 1, .shape = {6}, .nargs = 1,
        .args = {x}));
  R(VAL(.op = OP_GELU, .dt = DT_F64, .rank = 1, .shape = {6}, .nargs = 1,
        .args = {x}, .flags = IRF_TANH));
  double xs[] = {0.5, 1.5, 2.5, -0.5, -1.5, NAN};
  InterpArg args[1] = {{.t = T(DT_F64, 1, I64(6), xs)}};
  run_ok(args);
  double r[] = {0, 2, 2, -0.0, -2};
  for (int i = 0; i < 5; i++) ck_assert_double_eq(at(0, i), r[i]);
  ck_assert(signbit(at(0, 3)));
  double s[] = {1, 1, 1, -1, -1, 0}; /* PyTorch: sign(nan) = 0 */
  for (int i = 0; i < 6; i++) ck_assert_double_eq(at(1, i), s[i]);
  for (int i = 0; i < 5; i++) {
    double v = xs[i];
    double pi = 4 * atan(1.0);
    double g = 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v * v * v)));
    ASSERT_NEAR(at(2, i), g, 1e-14);
  }
}
END_TEST

START_TEST(test_unary_int) {
  static const Op ops[] = {OP_NEG, OP_ABS, OP_RELU, OP_SIGN, OP_FLOOR,
                           OP_CEIL, OP_ROUND, OP_BITNOT};
  static const int64_t want[8][3] = {{3, 0, -7}, {3, 0, 7}, {0, 0, 7},
                                     {-1, 0, 1}, {-3, 0, 7}, {-3, 0, 7},
                                     {-3, 0, 7}, {2, -1, -8}};
  for (int i = 0; i < 8; i++) {
    teardown();
    setup();
    IrRef x = PC("x", DT_I32, 1, I64(3));
    R(VAL(.op = ops[i], .dt = DT_I32, .rank = 1, .shape = {3}, .nargs = 1,
          .args = {x}));
    InterpArg args[1] = {{.t = T(DT_I32, 1, I64(3), F64(-3, 0, 7))}};
    run_ok(args);
    for (int j = 0; j < 3; j++) ck_assert_int_eq(ati(0, j), want[i][j]);
  }
}
END_TEST

START_TEST(test_where_and_scalar_param) {
  IrRef c = PC("c", DT_BOOL, 1, I64(3)), a = PC("a", DT_F32, 1, I64(3));
  IrRef s = P("s", DT_F32, -1, NULL, LAYOUT_CONTIGUOUS, NULL);
  IrRef e = VAL(.op = OP_EXPAND, .dt = DT_F32, .rank = 1, .shape = {3},
                .strided = true, .stride = {0}, .nargs = 1, .args = {s},
                .flags = IRF_IMPLICIT);
  R(VAL(.op = OP_WHERE, .dt = DT_F32, .rank = 1, .shape = {3}, .nargs = 3,
        .args = {c, a, e}));
  InterpArg args[3] = {{.t = T(DT_BOOL, 1, I64(3), F64(1, 0, 1))},
                       {.t = T(DT_F32, 1, I64(3), F64(1, 2, 3))},
                       {.s.f = -4.5}};
  run_ok(args);
  double w[] = {1, -4.5, 3};
  for (int i = 0; i < 3; i++) ck_assert_double_eq(at(0, i), w[i]);
}
END_TEST

/* ---- sources ---- */

START_TEST(test_sources) {
  R(VAL(.op = OP_CONST, .dt = DT_I32, .rank = 0, .value.i = -7,
        .flags = IRF_WRAPPED));
  R(VAL(.op = OP_FULL, .dt = DT_F64, .rank = 2, .shape = {2, 2}, .value.f = 0.5));
  int16_t data[] = {1, -2, 3, 30000};
  R(VAL(.op = OP_TENSOR, .dt = DT_I16, .rank = 2, .shape = {2, 2},
        .data = data));
  R(VAL(.op = OP_ARANGE, .dt = DT_F32, .rank = 1, .shape = {5},
        .fattr = {0.1, 0.2}));
  run_ok(NULL);
  ck_assert_int_eq(OUT[0].rank, 0);
  ck_assert_int_eq(ati(0, 0), -7);
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(1, i), 0.5);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ati(2, i), data[i]);
  for (int i = 0; i < 5; i++)
    ck_assert_float_eq((float)at(3, i), (float)(0.1 + i * 0.2));
}
END_TEST

START_TEST(test_arange_int_symval) {
  IrRef x = P("x", DT_F32, 1, (const Sym *[]){sym_var(M->st, 0, "N")},
              LAYOUT_CONTIGUOUS, NULL);
  (void)x;
  sym_id("N", SYMK_SIZE, 0, 0);
  const Sym *n = sym_var(M->st, 0, "N");
  R(VAL(.op = OP_ARANGE, .dt = DT_I64, .rank = 1, .sshape = (const Sym *[]){n},
        .fattr = {10, -3}));
  R(VAL(.op = OP_SYMVAL, .dt = DT_I64, .rank = 0, .nattrs = 1,
        .sattr0 = sym_mul(M->st, n, C(3)), .flags = IRF_WRAPPED));
  InterpArg args[1] = {{.t = T(DT_F32, 1, I64(4), NULL)}};
  run_ok(args);
  ck_assert_int_eq(OUT[0].shape[0], 4);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ati(0, i), 10 - 3 * i);
  ck_assert_int_eq(ati(1, 0), 12);
}
END_TEST

/* ---- views and copies ---- */

START_TEST(test_permute_copy) {
  IrRef x = PC("x", DT_I32, 2, I64(2, 3));
  IrRef p = VAL(.op = OP_PERMUTE, .dt = DT_I32, .rank = 2, .shape = {3, 2},
                .strided = true, .stride = {1, 3}, .nargs = 1, .args = {x},
                .nattrs = 2, .attrs = {1, 0});
  R(VAL(.op = OP_COPY, .dt = DT_I32, .rank = 2, .shape = {3, 2}, .nargs = 1,
        .args = {p}));
  R(VAL(.op = OP_RESHAPE, .dt = DT_I32, .rank = 1, .shape = {6}, .nargs = 1,
        .args = {p}));
  R(p);
  InterpArg args[1] = {{.t = T(DT_I32, 2, I64(2, 3), NULL)}};
  run_ok(args);
  int64_t w[] = {0, 3, 1, 4, 2, 5}; /* x.t() row-major */
  for (int o = 0; o < 3; o++)
    for (int i = 0; i < 6; i++) ck_assert_int_eq(ati(o, i), w[i]);
  ck_assert_int_eq(OUT[0].shape[0], 3);
  ck_assert_int_eq(OUT[1].rank, 1);
}
END_TEST

START_TEST(test_slice_select_diag_unfold) {
  IrRef x = PC("x", DT_F32, 1, I64(10));
  /* x[2:9:3] -> [3]@(3) off 2 */
  R(VAL(.op = OP_SLICE, .dt = DT_F32, .rank = 1, .shape = {3}, .strided = true,
        .stride = {3}, .off = 2, .nargs = 1, .args = {x}, .nattrs = 4,
        .attrs = {0, 2, 9, 3}));
  /* x[:9].view(3, 3).diagonal(1) -> [2]@(4) off 1 */
  IrRef v = VAL(.op = OP_VIEW, .dt = DT_F32, .rank = 2, .shape = {3, 3},
                .nargs = 1, .args = {x}, .nattrs = 2, .attrs = {3, 3});
  R(VAL(.op = OP_DIAGONAL, .dt = DT_F32, .rank = 1, .shape = {2},
        .strided = true, .stride = {4}, .off = 1, .nargs = 1, .args = {v},
        .nattrs = 3, .attrs = {1, 0, 1}));
  /* x.unfold(0, 3, 4) -> [2, 3]@(4, 1); then select row 1 -> [3]@(1) off 4 */
  IrRef u = VAL(.op = OP_UNFOLD, .dt = DT_F32, .rank = 2, .shape = {2, 3},
                .strided = true, .stride = {4, 1}, .nargs = 1, .args = {x},
                .nattrs = 3, .attrs = {0, 3, 4});
  R(VAL(.op = OP_SELECT, .dt = DT_F32, .rank = 1, .shape = {3},
        .strided = true, .stride = {1}, .off = 4, .nargs = 1, .args = {u},
        .nattrs = 2, .attrs = {0, 1}));
  /* as_strided([2, 2], [1, 1], 7): overlapping windows */
  R(VAL(.op = OP_AS_STRIDED, .dt = DT_F32, .rank = 2, .shape = {2, 2},
        .strided = true, .stride = {1, 1}, .off = 7, .nargs = 1, .args = {x}));
  InterpArg args[1] = {{.t = T(DT_F32, 1, I64(10), NULL)}};
  run_ok(args);
  double s[] = {2, 5, 8}, d[] = {1, 5}, u1[] = {4, 5, 6}, a[] = {7, 8, 8, 9};
  for (int i = 0; i < 3; i++) ck_assert_double_eq(at(0, i), s[i]);
  for (int i = 0; i < 2; i++) ck_assert_double_eq(at(1, i), d[i]);
  for (int i = 0; i < 3; i++) ck_assert_double_eq(at(2, i), u1[i]);
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(3, i), a[i]);
}
END_TEST

START_TEST(test_expand_unsqueeze_squeeze) {
  IrRef x = PC("x", DT_I64, 2, I64(3, 1)), y = PC("y", DT_I64, 2, I64(3, 4));
  IrRef e = VAL(.op = OP_EXPAND, .dt = DT_I64, .rank = 2, .shape = {3, 4},
                .strided = true, .stride = {1, 0}, .nargs = 1, .args = {x},
                .nattrs = 2, .attrs = {3, 4});
  R(VAL(.op = OP_ADD, .dt = DT_I64, .rank = 2, .shape = {3, 4}, .nargs = 2,
        .args = {e, y}));
  IrRef sq = VAL(.op = OP_SQUEEZE, .dt = DT_I64, .rank = 1, .shape = {3},
                 .nargs = 1, .args = {x}, .nattrs = 1, .attrs = {1});
  R(VAL(.op = OP_UNSQUEEZE, .dt = DT_I64, .rank = 2, .shape = {1, 3},
        .strided = true, .stride = {3, 1}, .nargs = 1, .args = {sq},
        .nattrs = 1, .attrs = {0}));
  InterpArg args[2] = {{.t = T(DT_I64, 2, I64(3, 1), F64(100, 200, 300))},
                       {.t = T(DT_I64, 2, I64(3, 4), NULL)}};
  run_ok(args);
  for (int i = 0; i < 12; i++) ck_assert_int_eq(ati(0, i), 100 * (i / 4 + 1) + i);
  ck_assert_int_eq(OUT[1].shape[0], 1);
  for (int i = 0; i < 3; i++) ck_assert_int_eq(ati(1, i), 100 * (i + 1));
}
END_TEST

START_TEST(test_view_out_of_bounds) {
  IrRef x = PC("x", DT_F32, 1, I64(4));
  R(VAL(.op = OP_AS_STRIDED, .dt = DT_F32, .rank = 1, .shape = {3},
        .strided = true, .stride = {2}, .nargs = 1, .args = {x}));
  InterpArg args[1] = {{.t = T(DT_F32, 1, I64(4), NULL)}};
  ck_assert_int_eq(run(args), -1);
  ck_assert_ptr_nonnull(strstr(ERR, "addresses elements 0 to 4 of the storage of "));
  ck_assert_ptr_nonnull(strstr(ERR, "which holds elements 0 to 3"));
  ck_assert_ptr_null(OUT[0].data);
}
END_TEST

START_TEST(test_copy_channels_last) {
  IrRef x = PC("x", DT_F32, 4, I64(1, 2, 2, 3));
  R(VAL(.op = OP_COPY, .dt = DT_F32, .rank = 4, .shape = {1, 2, 2, 3},
        .strided = true, .stride = {12, 1, 6, 2}, .nargs = 1, .args = {x},
        .flags = IRF_CL));
  InterpArg args[1] = {{.t = T(DT_F32, 4, I64(1, 2, 2, 3), NULL)}};
  run_ok(args);
  for (int i = 0; i < 12; i++) ck_assert_double_eq(at(0, i), i);
}
END_TEST

/* A `strided` parameter: its semantic strides are the stride symbols. */
START_TEST(test_strided_param) {
  const Sym *s0 = sym_var(M->st, 0, "x.stride(0)");
  const Sym *s1 = sym_var(M->st, 1, "x.stride(1)");
  IrRef x = P("x", DT_F64, 2, cs(2, I64(3, 4)), LAYOUT_STRIDED,
              (const Sym *[]){s0, s1});
  sym_id("x.stride(0)", SYMK_STRIDE, 0, 0);
  sym_id("x.stride(1)", SYMK_STRIDE, 0, 1);
  /* x[:, 1:3] -> [3, 2]@(s0, s1) off s1 */
  R(VAL(.op = OP_SLICE, .dt = DT_F64, .rank = 2, .shape = {3, 2},
        .sstride = (const Sym *[]){s0, s1}, .soff = s1, .nargs = 1,
        .args = {x}, .nattrs = 4, .attrs = {1, 1, 3, 1}));
  R(VAL(.op = OP_MUL, .dt = DT_F64, .rank = 2, .shape = {3, 4}, .nargs = 2,
        .args = {x, x}));
  double w[] = {1, 2, 5, 6, 9, 10};
  /* transposed storage, then the same with a storage offset of 5 */
  for (int off = 0; off <= 5; off += 5) {
    InterpArg args[1] = {{.t = Tg(DT_F64, 2, I64(3, 4), I64(1, 3), off, NULL)}};
    run_ok(args);
    for (int i = 0; i < 6; i++) ck_assert_double_eq(at(0, i), w[i]);
    for (int i = 0; i < 12; i++) ck_assert_double_eq(at(1, i), i * i);
    host_tensor_free(&OUT[0]);
    host_tensor_free(&OUT[1]);
  }
}
END_TEST

/* A contiguous parameter given a non-contiguous argument: views of it
 * still see its logical elements. */
START_TEST(test_noncontiguous_arg) {
  IrRef x = PC("x", DT_I32, 2, I64(3, 4));
  R(VAL(.op = OP_SELECT, .dt = DT_I32, .rank = 1, .shape = {4}, .off = 4,
        .nargs = 1, .args = {x}, .nattrs = 2, .attrs = {0, 1}));
  InterpArg args[1] = {{.t = Tg(DT_I32, 2, I64(3, 4), I64(1, 3), 2, NULL)}};
  run_ok(args);
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ati(0, i), 4 + i);
}
END_TEST

/* ---- symbols, entry checks ---- */

static void sym_kernel(void) {
  const Sym *n = sym_var(M->st, 0, "N");
  IrRef x = P("x", DT_F32, 2, (const Sym *[]){n, C(3)}, LAYOUT_CONTIGUOUS, NULL);
  IrRef y = P("y", DT_F32, 1, (const Sym *[]){n}, LAYOUT_CONTIGUOUS, NULL);
  sym_id("N", SYMK_SIZE, 0, 0);
  IrRef u = VAL(.op = OP_UNSQUEEZE, .dt = DT_F32, .rank = 2,
                .sshape = (const Sym *[]){n, C(1)},
                .sstride = (const Sym *[]){C(1), C(1)}, .nargs = 1,
                .args = {y}, .nattrs = 1, .attrs = {1});
  IrRef e = VAL(.op = OP_EXPAND, .dt = DT_F32, .rank = 2,
                .sshape = (const Sym *[]){n, C(3)},
                .sstride = (const Sym *[]){C(1), C(0)}, .nargs = 1,
                .args = {u});
  R(VAL(.op = OP_SUB, .dt = DT_F32, .rank = 2,
        .sshape = (const Sym *[]){n, C(3)}, .nargs = 2, .args = {x, e}));
}

START_TEST(test_symbol_binding) {
  sym_kernel();
  InterpArg args[2] = {{.t = T(DT_F32, 2, I64(4, 3), NULL)},
                       {.t = T(DT_F32, 1, I64(4), F64(1, 2, 3, 4))}};
  run_ok(args);
  ck_assert_int_eq(OUT[0].shape[0], 4);
  for (int i = 0; i < 12; i++) ck_assert_double_eq(at(0, i), i - (i / 3 + 1));
}
END_TEST

START_TEST(test_symbol_mismatch) {
  sym_kernel();
  InterpArg args[2] = {{.t = T(DT_F32, 2, I64(4, 3), NULL)},
                       {.t = T(DT_F32, 1, I64(5), NULL)}};
  ck_assert_int_eq(run(args), -1);
  ck_assert_str_eq(ERR, "kernel 'f': parameter 'y' dim 0: expected 4 (N), got 5");
  args[0].t = T(DT_F32, 2, I64(5, 2), NULL);
  ck_assert_int_eq(run(args), -1);
  ck_assert_str_eq(ERR, "kernel 'f': parameter 'x' dim 1: expected 3, got 2");
  args[0].t = T(DT_F64, 2, I64(5, 3), NULL);
  ck_assert_int_eq(run(args), -1);
  ck_assert_str_eq(ERR, "kernel 'f': parameter 'x': expected dtype f32, got f64");
  args[0].t = T(DT_F32, 1, I64(5), NULL);
  ck_assert_int_eq(run(args), -1);
  ck_assert_str_eq(ERR, "kernel 'f': parameter 'x': expected rank 2, got 1");
}
END_TEST

START_TEST(test_failing_check) {
  sym_kernel();
  IrCheck ck = {sym_var(M->st, 0, "N"), C(3), CHK_LT,
                "index 3 is out of bounds for dim 0 with size N", {0, 0, 0}};
  ir_add_check(M, K, &ck);
  InterpArg args[2] = {{.t = T(DT_F32, 2, I64(3, 3), NULL)},
                       {.t = T(DT_F32, 1, I64(3), NULL)}};
  ck_assert_int_eq(run(args), -1);
  /* the message gives the symbol's value where it first names it */
  ck_assert_str_eq(ERR, "kernel 'f': index 3 is out of bounds for dim 0 with size N (= 3)");
  args[0].t = T(DT_F32, 2, I64(2, 3), NULL);
  args[1].t = T(DT_F32, 1, I64(2), NULL);
  run_ok(args);
  for (int i = 0; i < 4; i++) host_tensor_free(&OUT[i]);
  /* a message that does not name it gets the value at its end; '%' is text */
  K->checks[0].msg = "100% too large: NN";
  args[0].t = T(DT_F32, 2, I64(4, 3), NULL);
  args[1].t = T(DT_F32, 1, I64(4), NULL);
  ck_assert_int_eq(run(args), -1);
  ck_assert_str_eq(ERR, "kernel 'f': 100% too large: NN (N = 4)");
}
END_TEST

START_TEST(test_size_overflow) {
  R(VAL(.op = OP_FULL, .dt = DT_F32, .rank = 2, .shape = {INT64_C(1) << 40,
        INT64_C(1) << 40}));
  ck_assert_int_eq(run(NULL), -1);
  ck_assert_ptr_nonnull(strstr(ERR, "kernel 'f': "));
  K->nvalues = 0;
  K->nresults = 0;
  /* 2^62 elements: the count fits in int64, the bytes do not */
  R(VAL(.op = OP_FULL, .dt = DT_F32, .rank = 2, .shape = {INT64_C(1) << 31,
        INT64_C(1) << 31}));
  ck_assert_int_eq(run(NULL), -1);
  ck_assert_ptr_nonnull(strstr(ERR, "too large"));
}
END_TEST

/* ---- reductions ---- */

START_TEST(test_reduce_keepdim_multi) {
  IrRef x = PC("x", DT_F64, 3, I64(2, 3, 4));
  R(VAL(.op = OP_SUM, .dt = DT_F64, .rank = 3, .shape = {1, 3, 1}, .nargs = 1,
        .args = {x}, .nattrs = 2, .attrs = {0, 2}, .flags = IRF_KEEPDIM));
  R(VAL(.op = OP_MEAN, .dt = DT_F64, .rank = 2, .shape = {2, 4}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_AMAX, .dt = DT_F64, .rank = 1, .shape = {3}, .nargs = 1,
        .args = {x}, .nattrs = 2, .attrs = {0, 2}));
  R(VAL(.op = OP_AMIN, .dt = DT_F64, .rank = 0, .nargs = 1, .args = {x}));
  InterpArg args[1] = {{.t = T(DT_F64, 3, I64(2, 3, 4), NULL)}};
  run_ok(args);
  ck_assert_int_eq(OUT[0].rank, 3);
  for (int j = 0; j < 3; j++) {
    double s = 0, mx = -INFINITY;
    for (int i = 0; i < 2; i++)
      for (int k = 0; k < 4; k++) {
        s += i * 12 + j * 4 + k;
        mx = fmax(mx, i * 12 + j * 4 + k);
      }
    ck_assert_double_eq(at(0, j), s);
    ck_assert_double_eq(at(2, j), mx);
  }
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 4; k++)
      ASSERT_NEAR(at(1, i * 4 + k), i * 12 + 4 + k, 1e-12);
  ck_assert_double_eq(at(3, 0), 0);
}
END_TEST

START_TEST(test_reduce_int_prod_nan) {
  IrRef x = PC("x", DT_I64, 2, I64(2, 3)), f = PC("f", DT_F32, 1, I64(3));
  R(VAL(.op = OP_PROD, .dt = DT_I64, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_SUM, .dt = DT_I64, .rank = 0, .nargs = 1, .args = {x},
        .nattrs = 2, .attrs = {0, 1}));
  R(VAL(.op = OP_AMAX, .dt = DT_F32, .rank = 0, .nargs = 1, .args = {f},
        .nattrs = 1, .attrs = {0}));
  R(VAL(.op = OP_AMIN, .dt = DT_I64, .rank = 1, .shape = {3}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {0}));
  InterpArg args[2] = {
      {.t = T(DT_I64, 2, I64(2, 3), F64(-2, 3, 4, 5, -1, 2))},
      {.t = T(DT_F32, 1, I64(3), F64(1, NAN, 2))}};
  /* make the sum wrap: INT64_MAX in element 3 */
  scalar_store(DT_I64, (char *)args[0].t.data + 3 * 8, (Scalar){.i = INT64_MAX});
  run_ok(args);
  ck_assert_int_eq(ati(0, 0), -24);
  ck_assert_int_eq(ati(0, 1), (int64_t)((uint64_t)INT64_MAX * 2u * (uint64_t)-1));
  ck_assert_int_eq(ati(1, 0), (int64_t)((uint64_t)INT64_MAX + 6u));
  ck_assert(isnan(at(2, 0)));
  ck_assert_int_eq(ati(3, 0), -2);
  ck_assert_int_eq(ati(3, 1), -1);
  ck_assert_int_eq(ati(3, 2), 2);
}
END_TEST

START_TEST(test_reduce_empty) {
  IrRef x = PC("x", DT_F32, 2, I64(2, 0));
  R(VAL(.op = OP_SUM, .dt = DT_F32, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_PROD, .dt = DT_F32, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_MEAN, .dt = DT_F32, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_SUM, .dt = DT_F32, .rank = 1, .shape = {0}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {0}));
  InterpArg args[1] = {{.t = T(DT_F32, 2, I64(2, 0), NULL)}};
  run_ok(args);
  for (int i = 0; i < 2; i++) {
    ck_assert_double_eq(at(0, i), 0);
    ck_assert_double_eq(at(1, i), 1);
    ck_assert(isnan(at(2, i)));
  }
  ck_assert_int_eq(OUT[3].shape[0], 0);
  for (int i = 0; i < 4; i++) host_tensor_free(&OUT[i]);
  /* a float amax of nothing is -inf, the compiled loops' identity (sema
   * checks the program's own amax; logsumexp's inner max needs it) */
  R(VAL(.op = OP_AMAX, .dt = DT_F32, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  K->results[0] = K->results[4];
  K->nresults = 1;
  run_ok(args);
  ck_assert(isinf(at(0, 0)) && at(0, 0) < 0);
  host_tensor_free(&OUT[0]);
  R(VAL(.op = OP_ARGMAX, .dt = DT_I64, .rank = 1, .shape = {2}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  K->results[0] = K->results[1];
  K->nresults = 1;
  ck_assert_int_eq(run(args), -1);
  ck_assert_ptr_nonnull(strstr(ERR, "argmax(): cannot reduce over dim 1 of size 0"));
}
END_TEST

START_TEST(test_argmax_ties_nan) {
  IrRef x = PC("x", DT_F32, 2, I64(3, 4));
  R(VAL(.op = OP_ARGMAX, .dt = DT_I64, .rank = 1, .shape = {3}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_ARGMIN, .dt = DT_I64, .rank = 2, .shape = {3, 1}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}, .flags = IRF_KEEPDIM));
  R(VAL(.op = OP_ARGMAX, .dt = DT_I64, .rank = 0, .nargs = 1, .args = {x}));
  R(VAL(.op = OP_ARGMIN, .dt = DT_I64, .rank = 1, .shape = {4}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {0}));
  InterpArg args[1] = {{.t = T(DT_F32, 2, I64(3, 4),
                              F64(1, 3, 3, 2, 1, NAN, 5, NAN, 0, 0, -1, -1))}};
  run_ok(args);
  int64_t amax[] = {1, 1, 0}, amin[] = {0, 1, 2}, cmin[] = {2, 1, 2, 1}; /* NaN in column 3 */
  for (int i = 0; i < 3; i++) {
    ck_assert_int_eq(ati(0, i), amax[i]);
    ck_assert_int_eq(ati(1, i), amin[i]);
  }
  ck_assert_int_eq(ati(2, 0), 5); /* first NaN in the flattened input */
  for (int i = 0; i < 4; i++) ck_assert_int_eq(ati(3, i), cmin[i]);
}
END_TEST

/* ---- normalizations ---- */

START_TEST(test_softmax) {
  IrRef x = PC("x", DT_F64, 2, I64(3, 4));
  R(VAL(.op = OP_SOFTMAX, .dt = DT_F64, .rank = 2, .shape = {3, 4}, .nargs = 1,
        .args = {x}, .nattrs = 1, .attrs = {1}));
  R(VAL(.op = OP_LOG_SOFTMAX, .dt = DT_F64, .rank = 2, .shape = {3, 4},
        .nargs = 1, .args = {x}, .nattrs = 1, .attrs = {0}));
  double xs[12];
  for (int i = 0; i < 12; i++) xs[i] = sin(i) * (i < 4 ? 800 : 3);
  InterpArg args[1] = {{.t = T(DT_F64, 2, I64(3, 4), xs)}};
  run_ok(args);
  for (int r = 0; r < 3; r++) {
    double s = 0;
    for (int j = 0; j < 4; j++) s += at(0, r * 4 + j);
    ASSERT_NEAR(s, 1, 1e-12); /* no overflow even for +-800 */
  }
  double den = exp(xs[5] - 2) + exp(xs[6] - 2) + exp(xs[7] - 2) + exp(xs[4] - 2);
  ASSERT_NEAR(at(0, 6), exp(xs[6] - 2) / den, 1e-14);
  for (int j = 0; j < 4; j++) {
    double m = fmax(fmax(xs[j], xs[4 + j]), xs[8 + j]), s = 0;
    for (int i = 0; i < 3; i++) s += exp(xs[i * 4 + j] - m);
    for (int i = 0; i < 3; i++)
      ASSERT_NEAR(at(1, i * 4 + j), xs[i * 4 + j] - m - log(s), 1e-10);
  }
}
END_TEST

START_TEST(test_layer_norm) {
  IrRef x = PC("x", DT_F32, 3, I64(2, 2, 3));
  IrRef w = PC("w", DT_F32, 2, I64(2, 3)), b = PC("b", DT_F32, 2, I64(2, 3));
  IrRef b3 = PC("b3", DT_F32, 1, I64(3));
  R(VAL(.op = OP_LAYER_NORM, .dt = DT_F32, .rank = 3, .shape = {2, 2, 3},
        .nargs = 3, .args = {x, w, b}, .nattrs = 1, .attrs = {2},
        .fattr = {1e-5}, .flags = IRF_WEIGHT | IRF_BIAS));
  R(VAL(.op = OP_LAYER_NORM, .dt = DT_F32, .rank = 3, .shape = {2, 2, 3},
        .nargs = 2, .args = {x, b3}, .nattrs = 1, .attrs = {1},
        .fattr = {0.5}, .flags = IRF_BIAS));
  double xs[12], ws[6], bs[6];
  for (int i = 0; i < 12; i++) xs[i] = i * i * 0.25 - 3;
  for (int i = 0; i < 6; i++) ws[i] = 1 + i, bs[i] = -i * 0.5;
  InterpArg args[4] = {{.t = T(DT_F32, 3, I64(2, 2, 3), xs)},
                       {.t = T(DT_F32, 2, I64(2, 3), ws)},
                       {.t = T(DT_F32, 2, I64(2, 3), bs)},
                       {.t = T(DT_F32, 1, I64(3), bs)}};
  run_ok(args);
  for (int r = 0; r < 2; r++) { /* over the last 2 dims: 6 elements */
    double m = 0, v = 0;
    for (int j = 0; j < 6; j++) m += (float)xs[r * 6 + j] / 6.0;
    for (int j = 0; j < 6; j++) v += pow((float)xs[r * 6 + j] - m, 2) / 6.0;
    for (int j = 0; j < 6; j++) {
      double y = ((float)xs[r * 6 + j] - m) / sqrt(v + 1e-5) * ws[j] + bs[j];
      ASSERT_NEAR(at(0, r * 6 + j), y, 1e-5 * (1 + fabs(y)));
    }
  }
  for (int r = 0; r < 4; r++) { /* over the last dim, bias b[0][:] */
    double m = 0, v = 0;
    for (int j = 0; j < 3; j++) m += (float)xs[r * 3 + j] / 3.0;
    for (int j = 0; j < 3; j++) v += pow((float)xs[r * 3 + j] - m, 2) / 3.0;
    for (int j = 0; j < 3; j++) {
      double y = ((float)xs[r * 3 + j] - m) / sqrt(v + 0.5) + bs[j];
      ASSERT_NEAR(at(1, r * 3 + j), y, 1e-5 * (1 + fabs(y)));
    }
  }
}
END_TEST

/* ---- matmul, conv, pooling ---- */

START_TEST(test_matmul) {
  IrRef a = PC("a", DT_F64, 3, I64(2, 2, 3)), b = PC("b", DT_F64, 3, I64(2, 3, 2));
  IrRef ia = PC("ia", DT_I32, 2, I64(1, 2)), ib = PC("ib", DT_I32, 2, I64(2, 1));
  R(VAL(.op = OP_MATMUL, .dt = DT_F64, .rank = 3, .shape = {2, 2, 2},
        .nargs = 2, .args = {a, b}));
  R(VAL(.op = OP_MATMUL, .dt = DT_I32, .rank = 2, .shape = {1, 1}, .nargs = 2,
        .args = {ia, ib}));
  InterpArg args[4] = {{.t = T(DT_F64, 3, I64(2, 2, 3), NULL)},
                       {.t = T(DT_F64, 3, I64(2, 3, 2), NULL)},
                       {.t = T(DT_I32, 2, I64(1, 2), F64(65536, 2))},
                       {.t = T(DT_I32, 2, I64(2, 1), F64(65536, 3))}};
  run_ok(args);
  for (int n = 0; n < 2; n++)
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 2; j++) {
        double s = 0;
        for (int k = 0; k < 3; k++) s += (n * 6 + i * 3 + k) * (n * 6 + k * 2 + j);
        ck_assert_double_eq(at(0, n * 4 + i * 2 + j), s);
      }
  ck_assert_int_eq(ati(1, 0), 6); /* 2^32 wraps away */
}
END_TEST

/* Direct definition of conv2d (PyTorch's cross-correlation). */
static double ref_conv(const double *x, const double *w, const double *b,
                       const int64_t *xs, const int64_t *ws, const int64_t *p,
                       int64_t n, int64_t o, int64_t oy, int64_t ox) {
  int64_t C = xs[1], H = xs[2], W = xs[3], O = ws[0], G = p[6], cg = C / G;
  int64_t g = o / (O / G);
  double acc = b ? b[o] : 0;
  for (int64_t ci = 0; ci < cg; ci++)
    for (int64_t ky = 0; ky < ws[2]; ky++)
      for (int64_t kx = 0; kx < ws[3]; kx++) {
        int64_t iy = oy * p[0] - p[2] + ky * p[4];
        int64_t ix = ox * p[1] - p[3] + kx * p[5];
        if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
        acc += x[((n * C + g * cg + ci) * H + iy) * W + ix] *
               w[((o * cg + ci) * ws[2] + ky) * ws[3] + kx];
      }
  return acc;
}

START_TEST(test_conv2d) {
  /* x [2,4,5,6] channels-last, w [6,2,3,2], stride (2,1), padding (1,2),
   * dilation (2,1), groups 2: OH = (5+2-4-1)/2+1 = 2, OW = 6+4-1 = 9. */
  int64_t xs[] = {2, 4, 5, 6}, ws[] = {6, 2, 3, 2};
  int64_t pr[] = {2, 1, 1, 2, 2, 1, 2};
  IrRef x = P("x", DT_F64, 4, cs(4, xs), LAYOUT_CHANNELS_LAST,
              cs(4, I64(120, 1, 24, 4)));
  IrRef w = PC("w", DT_F64, 4, ws), b = PC("b", DT_F64, 1, I64(6));
  R(VAL(.op = OP_CONV2D, .dt = DT_F64, .rank = 4, .shape = {2, 6, 2, 9},
        .strided = true, .stride = {108, 1, 54, 6}, .nargs = 3,
        .args = {x, w, b}, .nattrs = 7, .attrs = {2, 1, 1, 2, 2, 1, 2},
        .flags = IRF_BIAS));
  R(VAL(.op = OP_CONV2D, .dt = DT_F64, .rank = 4, .shape = {2, 6, 2, 9},
        .nargs = 2, .args = {x, w}, .nattrs = 7, .attrs = {2, 1, 1, 2, 2, 1, 2}));
  double xv[240], wv[72], bv[6] = {0.5, -1, 2, 0, 3, -0.25};
  for (int i = 0; i < 240; i++) xv[i] = sin(i * 0.37);
  for (int i = 0; i < 72; i++) wv[i] = cos(i * 0.11);
  InterpArg args[3] = {{.t = Tg(DT_F64, 4, xs, I64(120, 1, 24, 4), 0, xv)},
                       {.t = T(DT_F64, 4, ws, wv)},
                       {.t = T(DT_F64, 1, I64(6), bv)}};
  run_ok(args);
  for (int64_t i = 0, n = 0; n < 2; n++)
    for (int64_t o = 0; o < 6; o++)
      for (int64_t oy = 0; oy < 2; oy++)
        for (int64_t ox = 0; ox < 9; ox++, i++) {
          ASSERT_NEAR(at(0, i), ref_conv(xv, wv, bv, xs, ws, pr, n, o, oy, ox), 1e-12);
          ASSERT_NEAR(at(1, i), ref_conv(xv, wv, NULL, xs, ws, pr, n, o, oy, ox), 1e-12);
        }
}
END_TEST

START_TEST(test_conv2d_large_runs) {
  int64_t xs[] = {64, 3, 32, 32}, ws[] = {16, 3, 3, 3}, pr[] = {1, 1, 0, 0, 1, 1, 1};
  IrRef x = PC("x", DT_F32, 4, xs), w = PC("w", DT_F32, 4, ws);
  R(VAL(.op = OP_CONV2D, .dt = DT_F32, .rank = 4, .shape = {64, 16, 30, 30},
        .nargs = 2, .args = {x, w}, .nattrs = 7, .attrs = {1, 1, 0, 0, 1, 1, 1}));
  static double xv[64 * 3 * 32 * 32], wv[16 * 27];
  for (int i = 0; i < 64 * 3 * 32 * 32; i++) xv[i] = (i % 17) * 0.125 - 1;
  for (int i = 0; i < 16 * 27; i++) wv[i] = (i % 5) * 0.25 - 0.5;
  InterpArg args[2] = {{.t = T(DT_F32, 4, xs, xv)}, {.t = T(DT_F32, 4, ws, wv)}};
  run_ok(args);
  int64_t n = 63, o = 15, oy = 29, ox = 7;
  ASSERT_NEAR(at(0, ((n * 16 + o) * 30 + oy) * 30 + ox),
              ref_conv(xv, wv, NULL, xs, ws, pr, n, o, oy, ox), 1e-4);
}
END_TEST

START_TEST(test_pools) {
  IrRef x = PC("x", DT_F32, 4, I64(1, 2, 3, 3));
  /* kernel 2, stride 2, padding 1: windows rows/cols {-1,0}, {1,2} */
  R(VAL(.op = OP_AVG_POOL2D, .dt = DT_F32, .rank = 4, .shape = {1, 2, 2, 2},
        .nargs = 1, .args = {x}, .nattrs = 6, .attrs = {2, 2, 2, 2, 1, 1}));
  R(VAL(.op = OP_MAX_POOL2D, .dt = DT_F32, .rank = 4, .shape = {1, 2, 2, 2},
        .nargs = 1, .args = {x}, .nattrs = 6, .attrs = {2, 2, 2, 2, 1, 1}));
  /* kernel 3 stride 1 padding 1 on a 3x3: divisors always 9 */
  R(VAL(.op = OP_AVG_POOL2D, .dt = DT_F32, .rank = 4, .shape = {1, 2, 3, 3},
        .nargs = 1, .args = {x}, .nattrs = 6, .attrs = {3, 3, 1, 1, 1, 1}));
  double xv[18];
  for (int i = 0; i < 9; i++) xv[i] = 1, xv[9 + i] = -1 - i; /* ch 1 negative */
  InterpArg args[1] = {{.t = T(DT_F32, 4, I64(1, 2, 3, 3), xv)}};
  run_ok(args);
  /* channel 0 (all ones): valid cells / 4 */
  double a0[] = {0.25, 0.5, 0.5, 1};
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(0, i), a0[i]);
  /* channel 1: (-1)/4; (-2-3)/4; (-4-7)/4; (-5-6-8-9)/4 */
  double a1[] = {-0.25, -1.25, -2.75, -7};
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(0, 4 + i), a1[i]);
  /* max: padding never wins even when every value is negative */
  double m1[] = {-1, -2, -4, -5};
  for (int i = 0; i < 4; i++) ck_assert_double_eq(at(1, 4 + i), m1[i]);
  double c9[] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
  for (int i = 0; i < 9; i++) ASSERT_NEAR(at(2, i), c9[i] / 9, 1e-7);
}
END_TEST

START_TEST(test_adaptive_avg_pool) {
  IrRef x = PC("x", DT_F64, 4, I64(1, 1, 5, 7));
  R(VAL(.op = OP_ADAPTIVE_AVG_POOL2D, .dt = DT_F64, .rank = 4,
        .shape = {1, 1, 3, 2}, .nargs = 1, .args = {x}));
  R(VAL(.op = OP_ADAPTIVE_AVG_POOL2D, .dt = DT_F64, .rank = 4,
        .shape = {1, 1, 1, 1}, .nargs = 1, .args = {x}));
  InterpArg args[1] = {{.t = T(DT_F64, 4, I64(1, 1, 5, 7), NULL)}};
  run_ok(args);
  /* rows [0,2) [1,4) [3,5); cols [0,4) [3,7) */
  int r0[] = {0, 1, 3}, r1[] = {2, 4, 5}, c0[] = {0, 3}, c1[] = {4, 7};
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 2; j++) {
      double s = 0;
      for (int y = r0[i]; y < r1[i]; y++)
        for (int xx = c0[j]; xx < c1[j]; xx++) s += y * 7 + xx;
      ASSERT_NEAR(at(0, i * 2 + j), s / ((r1[i] - r0[i]) * (c1[j] - c0[j])), 1e-12);
    }
  ASSERT_NEAR(at(1, 0), 17, 1e-12);
}
END_TEST

static Suite *interp_suite(void) {
  Suite *s = suite_create("interp");
  TCase *t = tcase_create("core");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 60);
  tcase_add_test(t, test_add_f32);
  tcase_add_loop_test(t, test_cast_add_every_dtype, 0, DT_COUNT);
  tcase_add_test(t, test_integer_wrap);
  tcase_add_test(t, test_integer_wrap_i64_u8_i8);
  tcase_add_test(t, test_float_to_int_saturates);
  tcase_add_test(t, test_half_rounding);
  tcase_add_test(t, test_floordiv_mod_int);
  tcase_add_test(t, test_floordiv_int64_min);
  tcase_add_test(t, test_floordiv_mod_float);
  tcase_add_test(t, test_pow);
  tcase_add_test(t, test_maximum_minimum_nan);
  tcase_add_test(t, test_bitwise_logical);
  tcase_add_test(t, test_bitnot_logical_not);
  tcase_add_test(t, test_compare);
  tcase_add_test(t, test_unary_float);
  tcase_add_test(t, test_round_sign_gelu_tanh);
  tcase_add_test(t, test_unary_int);
  tcase_add_test(t, test_where_and_scalar_param);
  tcase_add_test(t, test_sources);
  tcase_add_test(t, test_arange_int_symval);
  tcase_add_test(t, test_permute_copy);
  tcase_add_test(t, test_slice_select_diag_unfold);
  tcase_add_test(t, test_expand_unsqueeze_squeeze);
  tcase_add_test(t, test_view_out_of_bounds);
  tcase_add_test(t, test_copy_channels_last);
  tcase_add_test(t, test_strided_param);
  tcase_add_test(t, test_noncontiguous_arg);
  tcase_add_test(t, test_symbol_binding);
  tcase_add_test(t, test_symbol_mismatch);
  tcase_add_test(t, test_failing_check);
  tcase_add_test(t, test_size_overflow);
  tcase_add_test(t, test_reduce_keepdim_multi);
  tcase_add_test(t, test_reduce_int_prod_nan);
  tcase_add_test(t, test_reduce_empty);
  tcase_add_test(t, test_argmax_ties_nan);
  tcase_add_test(t, test_softmax);
  tcase_add_test(t, test_layer_norm);
  tcase_add_test(t, test_matmul);
  tcase_add_test(t, test_conv2d);
  tcase_add_test(t, test_conv2d_large_runs);
  tcase_add_test(t, test_pools);
  tcase_add_test(t, test_adaptive_avg_pool);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(interp_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
