/* test_geometry.c — the table of view geometry cases: every worked example
 * of spec/pytorch-semantics.md §1–§7 (constant shapes, expected results
 * taken from the spec's tables, which were checked against PyTorch), plus
 * size-0/size-1/stride-0/channels-last inputs, every error path, and the
 * symbolic cases (sizes N, C, H, W, M).
 *
 * Needs: ir/geometry.c, ir/geometry_views.c, ir/sym.c, ir/ir.c (run-time checks), Check. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ir/geometry.h"

enum { MAXR = 6 };
#define L(...) ((const int64_t[]){__VA_ARGS__})
#define NOSTRIDE NULL

static Arena *A;
static GeomCtx C;

static void setup(void) {
  A = arena_new();
  C = (GeomCtx){.st = sym_tab_new(A), .arena = A};
}
static void teardown(void) { arena_free(A); }

static const Sym *k(int64_t v) { return sym_const(C.st, v); }

static const Sym **syms(const int64_t *v, int n) {
  const Sym **s = arena_alloc(A, sizeof *s * (size_t)(n + 1));
  for (int i = 0; i < n; i++) s[i] = k(v[i]);
  return s;
}

/* A geometry; stride NULL = contiguous allocation strides. */
static Geom mk(int rank, const int64_t *shape, const int64_t *stride,
               int64_t off) {
  Geom g;
  if (stride) {
    g = (Geom){rank, syms(shape, rank), syms(stride, rank), k(off)};
  } else {
    geom_contiguous(&C, rank, syms(shape, rank), &g);
    g.offset = k(off);
  }
  return g;
}

static char *gstr(const Geom *g) {
  return arena_printf(A, "%s@%s+%s", geom_shape_str(A, g->shape, g->rank),
                      geom_stride_str(A, g->stride, g->rank),
                      sym_str(A, g->offset));
}

static void expect_geom(const Geom *g, int rank, const int64_t *shape,
                        const int64_t *stride, int64_t off, const char *what) {
  Geom w = {rank, syms(shape, rank), syms(stride, rank), k(off)};
  bool ok = g->rank == rank && g->offset == w.offset;
  for (int d = 0; ok && d < rank; d++)
    ok = g->shape[d] == w.shape[d] && g->stride[d] == w.stride[d];
  ck_assert_msg(ok, "%s: got %s, want %s", what, gstr(g), gstr(&w));
}

/* err must be non-NULL and contain every NULL-terminated substring. */
static void expect_err(const char *err, const char *what, ...) {
  ck_assert_msg(err != NULL, "%s: expected an error", what);
  va_list ap;
  va_start(ap, what);
  for (const char *s; (s = va_arg(ap, const char *));)
    ck_assert_msg(strstr(err, s), "%s: message \"%s\" lacks \"%s\"", what, err,
                  s);
  va_end(ap);
}

static void expect_ok(const char *err, const char *what) {
  ck_assert_msg(err == NULL, "%s: unexpected error: %s", what, err);
}

/* ---- §1 view table -------------------------------------------------- */

typedef struct ViewCase {
  int rank;
  int64_t shape[MAXR], stride[MAXR];
  int n;
  int64_t view[MAXR];
  bool ok;
  int64_t want[MAXR]; /* strides of the view */
} ViewCase;

static const ViewCase view_table[] = {
    {3, {2, 3, 4}, {12, 4, 1}, 2, {6, 4}, true, {4, 1}},
    {3, {2, 3, 4}, {12, 4, 1}, 2, {2, 12}, true, {12, 1}},
    {3, {2, 4, 3}, {12, 1, 4}, 2, {8, 3}, false, {0}},
    {3, {2, 4, 3}, {12, 1, 4}, 4, {2, 2, 2, 3}, true, {12, 2, 1, 4}},
    {3, {2, 3, 4}, {24, 4, 1}, 2, {2, 12}, true, {24, 1}},
    {3, {2, 3, 4}, {24, 4, 1}, 2, {6, 4}, false, {0}},
    {3, {4, 1, 3}, {3, 99, 1}, 1, {12}, true, {1}},
    {3, {4, 1, 3}, {3, 99, 1}, 4, {2, 2, 1, 3}, true, {6, 3, 3, 1}},
    {1, {6}, {1}, 3, {1, 6, 1}, true, {6, 1, 1}},
    {2, {3, 4}, {1, 3}, 1, {12}, false, {0}},
    {2, {3, 4}, {1, 3}, 3, {3, 2, 2}, true, {1, 6, 3}},
    {2, {3, 4}, {1, 3}, 3, {3, 4, 1}, true, {1, 3, 3}},
    {2, {2, 3}, {0, 1}, 1, {6}, false, {0}},
    {2, {2, 3}, {0, 1}, 3, {2, 3, 1}, true, {0, 1, 1}},
    {2, {0, 3}, {7, 2}, 2, {0, 3}, true, {7, 2}},
    {3, {2, 0, 3}, {3, 3, 1}, 2, {0, 4}, true, {4, 1}},
    /* own rows: size-1 dims, stride-0 size-1 dims, 0-dim-like results */
    {3, {2, 1, 3}, {3, 0, 1}, 1, {6}, true, {1}},
    {2, {1, 1}, {7, 9}, 1, {1}, true, {9}},
    {2, {1, 5}, {0, 1}, 2, {5, 1}, true, {1, 1}},
    {2, {2, 0}, {5, 7}, 3, {0, 2, 1}, true, {2, 1, 1}},
};

START_TEST(test_view_table) {
  const ViewCase *t = &view_table[_i];
  Geom in = mk(t->rank, t->shape, t->stride, 5), out;
  const char *what = arena_printf(A, "row %d: %s view %s", _i, gstr(&in),
                                  geom_shape_str(A, syms(t->view, t->n), t->n));
  const char *err = geom_view(&C, &in, syms(t->view, t->n), t->n, &out);
  if (!t->ok) {
    expect_err(err, what, "cannot view shape", "use reshape()", NULL);
    return;
  }
  expect_ok(err, what);
  expect_geom(&out, t->n, t->view, t->want, 5, what);
  /* reshape aliases exactly when view succeeds */
  bool is_view = false;
  expect_ok(geom_reshape(&C, &in, syms(t->view, t->n), t->n, &out, &is_view),
            what);
  ck_assert_msg(is_view, "%s: reshape should alias", what);
}
END_TEST

START_TEST(test_view_message) {
  /* [3,4].t() is [4,3]@(1,4) */
  Geom in = mk(2, L(4, 3), L(1, 4), 0), out;
  const char *err = geom_view(&C, &in, syms(L(12), 1), 1, &out);
  ck_assert_ptr_nonnull(err);
  ck_assert_str_eq(err, "cannot view shape [4, 3] with strides [1, 4] as [12]: "
                        "its dims are not contiguous in memory; use "
                        "reshape() to copy");
}
END_TEST

START_TEST(test_view_infer) {
  Geom in = mk(2, L(4, 3), NOSTRIDE, 0), out;
  expect_ok(geom_view(&C, &in, syms(L(-1), 1), 1, &out), "view(-1)");
  expect_geom(&out, 1, L(12), L(1), 0, "view(-1)");
  expect_ok(geom_view(&C, &in, syms(L(2, -1, 2), 3), 3, &out), "view(2,-1,2)");
  expect_geom(&out, 3, L(2, 3, 2), L(6, 2, 1), 0, "view(2,-1,2)");
  expect_err(geom_view(&C, &in, syms(L(-1, -1), 2), 2, &out), "two -1",
             "only one dimension can be inferred (-1)", NULL);
  expect_err(geom_view(&C, &in, syms(L(5, 2), 2), 2, &out), "5x2",
             "shape [5, 2] is invalid for a tensor of 12 elements", NULL);
  expect_err(geom_view(&C, &in, syms(L(5, -1), 2), 2, &out), "5x-1", "[5, -1]",
             "12", NULL);
  expect_err(geom_view(&C, &in, syms(L(4, -3), 2), 2, &out), "negative",
             "-3", NULL);
  Geom z = mk(2, L(0, 3), NOSTRIDE, 0);
  expect_err(geom_view(&C, &z, syms(L(0, -1), 2), 2, &out), "-1 with 0",
             "cannot infer -1", "[0, -1]", NULL);
  expect_ok(geom_view(&C, &z, syms(L(-1, 3), 2), 2, &out), "-1 is 0");
  expect_geom(&out, 2, L(0, 3), L(3, 1), 0, "-1 is 0");
  expect_ok(geom_view(&C, &z, syms(L(3, -1, 2), 3), 3, &out), "-1 is 0 (b)");
  expect_geom(&out, 3, L(3, 0, 2), L(2, 2, 1), 0, "-1 is 0 (b)");
}
END_TEST

START_TEST(test_view_zero_dim) {
  Geom s = mk(0, NULL, NULL, 3), out;
  expect_ok(geom_view(&C, &s, syms(L(1, 1), 2), 2, &out), "0-dim view(1,1)");
  expect_geom(&out, 2, L(1, 1), L(1, 1), 3, "0-dim view(1,1)");
  expect_ok(geom_view(&C, &s, syms(L(-1), 1), 1, &out), "0-dim view(-1)");
  expect_geom(&out, 1, L(1), L(1), 3, "0-dim view(-1)");
  Geom one = mk(2, L(1, 1), L(4, 2), 0);
  expect_ok(geom_view(&C, &one, NULL, 0, &out), "[1,1] view()");
  ck_assert_int_eq(out.rank, 0);
  expect_err(geom_view(&C, &s, syms(L(2), 1), 1, &out), "0-dim view(2)", "[2]",
             "1 element", NULL);
}
END_TEST

/* ---- §2 reshape / flatten -------------------------------------------- */

START_TEST(test_reshape) {
  Geom cl = mk(4, L(2, 3, 4, 5), L(60, 1, 15, 3), 0), out;
  bool is_view = true;
  /* flatten(1) copies */
  expect_ok(geom_reshape(&C, &cl, syms(L(2, 60), 2), 2, &out, &is_view),
            "flatten(1)");
  ck_assert(!is_view);
  expect_geom(&out, 2, L(2, 60), L(60, 1), 0, "flatten(1)");
  /* flatten(2) is a view */
  expect_ok(geom_reshape(&C, &cl, syms(L(2, 3, 20), 3), 3, &out, &is_view),
            "flatten(2)");
  ck_assert(is_view);
  expect_geom(&out, 3, L(2, 3, 20), L(60, 1, 3), 0, "flatten(2)");
  /* transposed input: reshape(-1) copies, offset reset */
  Geom t = mk(2, L(4, 3), L(1, 4), 7);
  expect_ok(geom_reshape(&C, &t, syms(L(-1), 1), 1, &out, &is_view), "t");
  ck_assert(!is_view);
  expect_geom(&out, 1, L(12), L(1), 0, "reshape of t()");
  expect_err(geom_reshape(&C, &t, syms(L(5, -1), 2), 2, &out, &is_view),
             "reshape 5,-1", "[5, -1]", "12", NULL);
  /* zero-size copy uses max(size, 1) */
  Geom z = mk(2, L(0, 3), L(1, 0), 0);
  expect_ok(geom_reshape(&C, &z, syms(L(3, 0), 2), 2, &out, &is_view), "z");
  ck_assert(is_view);
  expect_geom(&out, 2, L(3, 0), L(1, 1), 0, "zero reshape");
}
END_TEST

/* ---- §3 contiguity table -------------------------------------------- */

typedef struct LayoutCase {
  int rank;
  int64_t shape[MAXR], stride[MAXR];
  bool contig, cl, suggests_cl, dense;
} LayoutCase;

static const LayoutCase layout_table[] = {
    {4, {2, 3, 4, 5}, {60, 20, 5, 1}, true, false, false, true},
    {4, {2, 3, 4, 5}, {60, 1, 15, 3}, false, true, true, true},
    {4, {2, 1, 4, 5}, {20, 20, 5, 1}, true, true, false, true},
    {4, {2, 1, 4, 5}, {20, 1, 5, 1}, true, true, true, true},
    {4, {2, 3, 1, 1}, {3, 1, 3, 3}, true, true, true, true},
    /* own rows */
    {4, {2, 1, 1, 1}, {1, 1, 1, 1}, true, true, false, true}, /* N111 */
    {4, {0, 3, 4, 5}, {7, 7, 7, 7}, true, false, false, true},
    {4, {2, 3, 4, 5}, {60, 0, 15, 3}, false, false, false, false},
    {4, {2, 3, 4, 5}, {0, 20, 5, 1}, false, false, false, false},
    {2, {4, 3}, {1, 4}, false, false, false, true},
    {2, {2, 3}, {0, 1}, false, false, false, false},
    {2, {3, 4}, {8, 1}, false, false, false, false},
    {1, {5}, {2}, false, false, false, false},
    {1, {1}, {9}, true, false, false, true},
    {0, {0}, {0}, true, false, false, true},
    {3, {2, 3, 4}, {1, 2, 6}, false, false, false, true},
    {3, {2, 3, 4}, {12, 4, 2}, false, false, false, false},
};

START_TEST(test_layout_table) {
  const LayoutCase *t = &layout_table[_i];
  Geom g = mk(t->rank, t->shape, t->stride, 0);
  const char *w = gstr(&g);
  ck_assert_msg(geom_is_contiguous(&g) == t->contig, "%s contig", w);
  ck_assert_msg(geom_is_channels_last(&g) == t->cl, "%s cl", w);
  ck_assert_msg(geom_suggests_channels_last(&g) == t->suggests_cl, "%s sug", w);
  ck_assert_msg(geom_is_dense(&g) == t->dense, "%s dense", w);
}
END_TEST

START_TEST(test_allocation) {
  Geom g;
  geom_contiguous(&C, 4, syms(L(2, 3, 4, 5), 4), &g);
  expect_geom(&g, 4, L(2, 3, 4, 5), L(60, 20, 5, 1), 0, "contiguous");
  geom_channels_last(&C, syms(L(2, 3, 4, 5), 4), &g);
  expect_geom(&g, 4, L(2, 3, 4, 5), L(60, 1, 15, 3), 0, "channels-last");
  geom_channels_last(&C, syms(L(2, 3, 1, 1), 4), &g);
  expect_geom(&g, 4, L(2, 3, 1, 1), L(3, 1, 3, 3), 0, "channels-last 11");
  geom_contiguous(&C, 3, syms(L(2, 0, 3), 3), &g);
  expect_geom(&g, 3, L(2, 0, 3), L(3, 3, 1), 0, "contiguous with 0");
  geom_channels_last(&C, syms(L(2, 0, 4, 5), 4), &g);
  expect_geom(&g, 4, L(2, 0, 4, 5), L(0, 1, 0, 0), 0, "channels-last with 0");
  geom_contiguous(&C, 0, NULL, &g);
  ck_assert_int_eq(g.rank, 0);
}
END_TEST

/* ---- §4 view ops ----------------------------------------------------- */

START_TEST(test_permute_transpose) {
  Geom in = mk(3, L(2, 3, 4), NOSTRIDE, 1), out;
  expect_ok(geom_permute(&C, &in, L(2, 0, 1), 3, &out), "permute");
  expect_geom(&out, 3, L(4, 2, 3), L(1, 12, 4), 1, "permute(2,0,1)");
  expect_ok(geom_permute(&C, &in, L(-1, 0, -2), 3, &out), "permute neg");
  expect_geom(&out, 3, L(4, 2, 3), L(1, 12, 4), 1, "permute(-1,0,-2)");
  expect_err(geom_permute(&C, &in, L(0, 0, 1), 3, &out), "dup",
             "permute() needs a permutation of 3 dims, got [0, 0, 1]", NULL);
  expect_err(geom_permute(&C, &in, L(0, 1), 2, &out), "short", "3 dims",
             "[0, 1]", NULL);
  expect_err(geom_permute(&C, &in, L(0, 1, 3), 3, &out), "range", "[0, 1, 3]",
             "3", NULL);
  expect_ok(geom_transpose(&C, &in, 0, -1, &out), "transpose");
  expect_geom(&out, 3, L(4, 3, 2), L(1, 4, 12), 1, "transpose(0,-1)");
  expect_err(geom_transpose(&C, &in, 0, 3, &out), "transpose range", "3",
             "[-3, 2]", NULL);
  Geom m = mk(2, L(3, 4), NOSTRIDE, 0);
  expect_err(geom_transpose(&C, &m, 2, 0, &out), "wrap message",
             "dim 2 is out of range", "[-2, 1]", NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_ok(geom_transpose(&C, &s, 0, -1, &out), "0-dim transpose");
  ck_assert_int_eq(out.rank, 0);
  expect_ok(geom_permute(&C, &s, NULL, 0, &out), "0-dim permute()");
}
END_TEST

START_TEST(test_wrap_dim) {
  int d = -7;
  expect_ok(geom_wrap_dim(&C, -2, 2, &d), "-2 of 2");
  ck_assert_int_eq(d, 0);
  expect_ok(geom_wrap_dim(&C, 1, 2, &d), "1 of 2");
  ck_assert_int_eq(d, 1);
  expect_err(geom_wrap_dim(&C, 2, 2, &d), "2 of 2", "dim 2", "[-2, 1]", NULL);
  expect_err(geom_wrap_dim(&C, -3, 2, &d), "-3 of 2", "dim -3", "[-2, 1]",
             NULL);
  /* a 0-dim tensor wraps like rank 1 */
  expect_ok(geom_wrap_dim(&C, -1, 0, &d), "-1 of 0");
  ck_assert_int_eq(d, 0);
  expect_err(geom_wrap_dim(&C, 1, 0, &d), "1 of 0", "[-1, 0]", NULL);
}
END_TEST

START_TEST(test_expand) {
  Geom in = mk(2, L(3, 1), L(1, 1), 2), out;
  expect_ok(geom_expand(&C, &in, syms(L(2, 3, 4), 3), 3, &out), "2,3,4");
  expect_geom(&out, 3, L(2, 3, 4), L(0, 1, 0), 2, "expand(2,3,4)");
  expect_ok(geom_expand(&C, &in, syms(L(-1, 4), 2), 2, &out), "-1,4");
  expect_geom(&out, 2, L(3, 4), L(1, 0), 2, "expand(-1,4)");
  /* a new leading dim of size 1 gets the next dim's extent */
  expect_ok(geom_expand(&C, &in, syms(L(1, 3, 1), 3), 3, &out), "1,3,1");
  expect_geom(&out, 3, L(1, 3, 1), L(3, 1, 1), 2, "expand(1,3,1)");
  expect_ok(geom_expand(&C, &in, syms(L(3, 0), 2), 2, &out), "3,0");
  expect_geom(&out, 2, L(3, 0), L(1, 0), 2, "expand(3,0)");
  Geom v = mk(1, L(3), NOSTRIDE, 0);
  expect_err(geom_expand(&C, &v, syms(L(2, 4), 2), 2, &out), "mismatch",
             "the expanded size 4 must match the existing size 3 at "
             "non-singleton dimension 1",
             NULL);
  expect_err(geom_expand(&C, &in, syms(L(4), 1), 1, &out), "fewer", "[3, 1]",
             "[4]", NULL);
  expect_err(geom_expand(&C, &in, syms(L(-1, 3, 4), 3), 3, &out), "-1 new",
             "-1", "leading", NULL);
  expect_err(geom_expand(&C, &in, syms(L(3, -2), 2), 2, &out), "neg", "-2",
             NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_ok(geom_expand(&C, &s, syms(L(2, 3), 2), 2, &out), "0-dim expand");
  expect_geom(&out, 2, L(2, 3), L(0, 0), 0, "0-dim expand");
}
END_TEST

START_TEST(test_unsqueeze_squeeze) {
  Geom in = mk(2, L(2, 3), L(3, 1), 0), out;
  static const int64_t want[3][3] = {{6, 3, 1}, {3, 3, 1}, {3, 1, 1}};
  static const int64_t shape[3][3] = {{1, 2, 3}, {2, 1, 3}, {2, 3, 1}};
  for (int d = 0; d < 3; d++) {
    expect_ok(geom_unsqueeze(&C, &in, d, &out), "unsqueeze");
    expect_geom(&out, 3, shape[d], want[d], 0, "unsqueeze(d)");
    expect_ok(geom_unsqueeze(&C, &in, d - 3, &out), "unsqueeze neg");
    expect_geom(&out, 3, shape[d], want[d], 0, "unsqueeze(d-3)");
  }
  expect_err(geom_unsqueeze(&C, &in, 3, &out), "unsqueeze 3", "3", "[-3, 2]",
             NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_ok(geom_unsqueeze(&C, &s, 0, &out), "0-dim unsqueeze");
  expect_geom(&out, 1, L(1), L(1), 0, "0-dim unsqueeze");

  Geom q = mk(4, L(1, 3, 1, 2), L(9, 2, 5, 1), 4);
  expect_ok(geom_squeeze(&C, &q, NULL, &out), "squeeze()");
  expect_geom(&out, 2, L(3, 2), L(2, 1), 4, "squeeze()");
  int64_t d = 2;
  expect_ok(geom_squeeze(&C, &q, &d, &out), "squeeze(2)");
  expect_geom(&out, 3, L(1, 3, 2), L(9, 2, 1), 4, "squeeze(2)");
  d = -3;
  expect_ok(geom_squeeze(&C, &q, &d, &out), "squeeze(-3) no-op");
  expect_geom(&out, 4, L(1, 3, 1, 2), L(9, 2, 5, 1), 4, "squeeze(-3)");
  d = 4;
  expect_err(geom_squeeze(&C, &q, &d, &out), "squeeze(4)", "4", "[-4, 3]",
             NULL);
  d = 0;
  expect_ok(geom_squeeze(&C, &s, &d, &out), "0-dim squeeze(0)");
  ck_assert_int_eq(out.rank, 0);
  Geom ones = mk(2, L(1, 1), L(1, 1), 0);
  expect_ok(geom_squeeze(&C, &ones, NULL, &out), "all ones");
  ck_assert_int_eq(out.rank, 0);
}
END_TEST

START_TEST(test_slice) {
  Geom in = mk(1, L(10), L(1), 0), out;
  expect_ok(geom_slice(&C, &in, 0, k(2), k(9), k(3), &out), "2:9:3");
  expect_geom(&out, 1, L(3), L(3), 0 + 2, "[2:9:3]");
  expect_ok(geom_slice(&C, &in, 0, k(5), k(2), NULL, &out), "5:2");
  expect_geom(&out, 1, L(0), L(1), 5, "[5:2]");
  expect_ok(geom_slice(&C, &in, 0, k(-3), NULL, NULL, &out), "-3:");
  expect_geom(&out, 1, L(3), L(1), 7, "[-3:]");
  expect_ok(geom_slice(&C, &in, 0, k(-30), k(30), k(4), &out), "clamped");
  expect_geom(&out, 1, L(3), L(4), 0, "[-30:30:4]");
  expect_ok(geom_slice(&C, &in, 0, k(12), NULL, NULL, &out), "12:");
  expect_geom(&out, 1, L(0), L(1), 10, "[12:]");
  expect_ok(geom_slice(&C, &in, 0, NULL, k(-1), NULL, &out), ":-1");
  expect_geom(&out, 1, L(9), L(1), 0, "[:-1]");
  Geom m = mk(2, L(4, 6), NOSTRIDE, 3);
  expect_ok(geom_slice(&C, &m, -1, k(1), NULL, k(2), &out), "dim -1");
  expect_geom(&out, 2, L(4, 3), L(6, 2), 4, "[:, 1::2]");
  expect_err(geom_slice(&C, &in, 0, NULL, NULL, k(0), &out), "step 0",
             "step", "0", NULL);
  expect_err(geom_slice(&C, &in, 0, NULL, NULL, k(-1), &out), "step -1",
             "step", "-1", NULL);
  expect_err(geom_slice(&C, &m, 2, NULL, NULL, NULL, &out), "dim 2", "2",
             "[-2, 1]", NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_err(geom_slice(&C, &s, 0, NULL, NULL, NULL, &out), "0-dim", "0-dim",
             NULL);
}
END_TEST

START_TEST(test_narrow_select) {
  Geom in = mk(2, L(5, 4), NOSTRIDE, 1), out;
  expect_ok(geom_narrow(&C, &in, 0, k(1), k(3), &out), "narrow");
  expect_geom(&out, 2, L(3, 4), L(4, 1), 5, "narrow(0,1,3)");
  expect_ok(geom_narrow(&C, &in, -1, k(-2), k(2), &out), "narrow neg");
  expect_geom(&out, 2, L(5, 2), L(4, 1), 3, "narrow(-1,-2,2)");
  expect_ok(geom_narrow(&C, &in, 1, k(4), k(0), &out), "narrow empty at end");
  expect_geom(&out, 2, L(5, 0), L(4, 1), 5, "narrow(1,4,0)");
  expect_err(geom_narrow(&C, &in, 0, k(3), k(3), &out), "too long", "3", "5",
             "exceeds", NULL);
  expect_err(geom_narrow(&C, &in, 0, k(6), k(0), &out), "start", "6", "5",
             NULL);
  expect_err(geom_narrow(&C, &in, 0, k(-6), k(0), &out), "start neg", "-6",
             "5", NULL);
  expect_err(geom_narrow(&C, &in, 0, k(0), k(-1), &out), "len neg", "-1",
             "length", NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_err(geom_narrow(&C, &s, 0, k(0), k(1), &out), "0-dim", "0-dim", NULL);

  Geom v = mk(1, L(3), NOSTRIDE, 0);
  expect_err(geom_select(&C, &v, 0, k(5), &out), "select 5",
             "index 5 is out of range for dim 0 of size 3", NULL);
  expect_err(geom_select(&C, &v, 0, k(3), &out), "select 3", "index 3", NULL);
  expect_err(geom_select(&C, &v, 0, k(-4), &out), "select -4", "index -4",
             "size 3", NULL);
  expect_ok(geom_select(&C, &v, 0, k(-3), &out), "select -3");
  expect_geom(&out, 0, NULL, NULL, 0, "select(0,-3)");
  expect_ok(geom_select(&C, &in, 1, k(-1), &out), "select col");
  expect_geom(&out, 1, L(5), L(4), 4, "select(1,-1)");
  expect_ok(geom_select(&C, &in, 0, k(2), &out), "select row");
  expect_geom(&out, 1, L(4), L(1), 9, "select(0,2)");
  expect_err(geom_select(&C, &s, 0, k(0), &out), "select 0-dim", "0-dim",
             NULL);
  expect_err(geom_select(&C, &in, 2, k(0), &out), "select dim", "[-2, 1]",
             NULL);
}
END_TEST

START_TEST(test_diagonal_unfold) {
  Geom in = mk(2, L(3, 4), L(4, 1), 0), out;
  expect_ok(geom_diagonal(&C, &in, 1, 0, 1, &out), "diag 1");
  expect_geom(&out, 1, L(3), L(5), 1, "diagonal(1)");
  expect_ok(geom_diagonal(&C, &in, 0, 0, 1, &out), "diag 0");
  expect_geom(&out, 1, L(3), L(5), 0, "diagonal(0)");
  expect_ok(geom_diagonal(&C, &in, -1, 0, 1, &out), "diag -1");
  expect_geom(&out, 1, L(2), L(5), 4, "diagonal(-1)");
  expect_ok(geom_diagonal(&C, &in, 2, 1, 0, &out), "diag swapped dims");
  expect_geom(&out, 1, L(1), L(5), 8, "diagonal(2,1,0)");
  /* off the end: empty, offset untouched */
  expect_ok(geom_diagonal(&C, &in, 7, 0, 1, &out), "diag 7");
  expect_geom(&out, 1, L(0), L(5), 0, "diagonal(7)");
  Geom b = mk(3, L(2, 3, 4), NOSTRIDE, 0);
  expect_ok(geom_diagonal(&C, &b, 0, -2, -1, &out), "batched");
  expect_geom(&out, 2, L(2, 3), L(12, 5), 0, "diagonal(0,-2,-1)");
  expect_err(geom_diagonal(&C, &in, 0, 1, -1, &out), "same dim", "1", NULL);
  expect_err(geom_diagonal(&C, &in, 0, 0, 2, &out), "dim range", "[-2, 1]",
             NULL);

  Geom v = mk(1, L(7), L(1), 0);
  expect_ok(geom_unfold(&C, &v, 0, k(3), k(2), &out), "unfold");
  expect_geom(&out, 2, L(3, 3), L(2, 1), 0, "unfold(0,3,2)");
  expect_ok(geom_unfold(&C, &b, 1, k(3), k(1), &out), "unfold full");
  expect_geom(&out, 4, L(2, 1, 4, 3), L(12, 4, 1, 4), 0, "unfold(1,3,1)");
  expect_err(geom_unfold(&C, &v, 0, k(8), k(1), &out), "too big", "8", "7",
             NULL);
  expect_err(geom_unfold(&C, &v, 0, k(3), k(0), &out), "step 0", "step", "0",
             NULL);
  expect_err(geom_unfold(&C, &v, 0, k(-1), k(1), &out), "neg size", "-1",
             NULL);
  Geom s = mk(0, NULL, NULL, 0);
  expect_ok(geom_unfold(&C, &s, 0, k(1), k(1), &out), "0-dim unfold");
  expect_geom(&out, 1, L(1), L(1), 0, "0-dim unfold");
}
END_TEST

START_TEST(test_as_strided) {
  Geom in = mk(1, L(12), NOSTRIDE, 2), out;
  expect_ok(geom_as_strided(&C, &in, &in, syms(L(3, 3), 2), syms(L(1, 1), 2), 2,
                            NULL, &out),
            "overlap");
  expect_geom(&out, 2, L(3, 3), L(1, 1), 2, "as_strided keeps offset");
  expect_ok(geom_as_strided(&C, &in, &in, syms(L(2), 1), syms(L(0), 1), 1, k(0),
                            &out),
            "offset 0");
  expect_geom(&out, 1, L(2), L(0), 0, "as_strided offset 0");
  expect_err(geom_as_strided(&C, &in, &in, syms(L(2), 1), syms(L(-1), 1), 1, NULL,
                             &out),
             "neg stride", "-1", "stride", NULL);
  expect_err(geom_as_strided(&C, &in, &in, syms(L(2), 1), syms(L(1), 1), 1, k(-3),
                             &out),
             "neg offset", "-3", "offset", NULL);
  expect_err(geom_as_strided(&C, &in, &in, syms(L(-2), 1), syms(L(1), 1), 1, NULL,
                             &out),
             "neg size", "-2", NULL);
}
END_TEST

/* PyTorch's setStorage bound, against the storage root (here [4, 4]):
 * 0 + 2*6 + 2*2 = 16 is past the last element 15. */
START_TEST(test_as_strided_bounds) {
  Geom st = mk(2, L(4, 4), NOSTRIDE, 0), out;
  expect_err(geom_as_strided(&C, &st, &st, syms(L(3, 3), 2),
                             syms(L(6, 2), 2), 2, NULL, &out),
             "past the end", "[3, 3]", "[6, 2]", "17 elements", "of 16", NULL);
  expect_err(geom_as_strided(&C, &st, &st, syms(L(3, 3), 2),
                             syms(L(4, 1), 2), 2, k(6), &out),
             "offset past the end", "offset 6", "17 elements", NULL);
  expect_ok(geom_as_strided(&C, &st, &st, syms(L(3, 3), 2), syms(L(4, 1), 2),
                            2, k(5), &out),
            "last element exactly");
  /* empty views need no storage; the view's own offset is not the root's */
  expect_ok(geom_as_strided(&C, &st, &st, syms(L(0, 3), 2),
                            syms(L(100, 100), 2), 2, k(99), &out),
            "empty");
  Geom row = mk(1, L(4), L(1), 12);
  expect_ok(geom_as_strided(&C, &row, &st, syms(L(4), 1), syms(L(1), 1), 1,
                            NULL, &out),
            "row view of the storage");
  /* an expanded input's storage is its unexpanded root */
  Geom v = mk(1, L(4), NOSTRIDE, 0);
  expect_err(geom_as_strided(&C, &st, &v, syms(L(3, 3), 2), syms(L(1, 2), 2),
                             2, NULL, &out),
             "expanded", "7 elements", "of 4", NULL);
}
END_TEST

/* ---- §5 broadcasting ------------------------------------------------- */

START_TEST(test_broadcast) {
  const Sym **r;
  int n;
  expect_ok(geom_broadcast(&C, syms(L(5, 1, 4), 3), 3, syms(L(3, 1), 2), 2, &r,
                           &n),
            "531");
  ck_assert_str_eq(geom_shape_str(A, r, n), "[5, 3, 4]");
  expect_ok(geom_broadcast(&C, syms(L(1, 0), 2), 2, syms(L(3, 1), 2), 2, &r,
                           &n),
            "1 vs 0");
  ck_assert_str_eq(geom_shape_str(A, r, n), "[3, 0]");
  expect_ok(geom_broadcast(&C, NULL, 0, syms(L(2), 1), 1, &r, &n), "scalar");
  ck_assert_str_eq(geom_shape_str(A, r, n), "[2]");
  expect_err(geom_broadcast(&C, syms(L(2, 3), 2), 2, syms(L(4), 1), 1, &r, &n),
             "3 vs 4", "[2, 3]", "[4]", "3", "4", NULL);
  expect_err(geom_broadcast(&C, syms(L(2), 1), 1, syms(L(0), 1), 1, &r, &n),
             "2 vs 0", "2", "0", NULL);
}
END_TEST

/* ---- §6 clone -------------------------------------------------------- */

typedef struct CloneCase {
  int rank;
  int64_t shape[MAXR], stride[MAXR], want[MAXR];
} CloneCase;

static const CloneCase clone_table[] = {
    {4, {2, 3, 4, 3}, {72, 1, 18, 6}, {36, 1, 9, 3}},
    /* dense inputs keep their exact strides */
    {4, {2, 3, 4, 5}, {60, 1, 15, 3}, {60, 1, 15, 3}},
    {2, {4, 3}, {1, 4}, {1, 4}},
    {3, {2, 1, 3}, {3, 17, 1}, {3, 17, 1}},
    /* expanded: stride-0 dims stay put */
    {2, {2, 3}, {0, 1}, {3, 1}},
    {3, {3, 2, 4}, {1, 0, 3}, {1, 3, 6}},
    /* equal strides: the larger size goes outer */
    {2, {2, 3}, {1, 1}, {1, 2}},
    {2, {3, 2}, {1, 1}, {2, 1}},
    /* a sliced transpose */
    {2, {4, 3}, {2, 8}, {1, 4}},
    /* size 0: contiguous, hence dense, strides kept */
    {3, {2, 0, 3}, {0, 1, 2}, {0, 1, 2}},
    /* size-1 dims do not advance the stride */
    {3, {3, 1, 4}, {8, 5, 2}, {4, 4, 1}},
    {0, {0}, {0}, {0}},
};

START_TEST(test_clone_table) {
  const CloneCase *t = &clone_table[_i];
  Geom in = mk(t->rank, t->shape, t->stride, 9), out;
  geom_preserve(&C, &in, &out);
  expect_geom(&out, t->rank, t->shape, t->want, 0, gstr(&in));
}
END_TEST

/* ---- §7 elementwise layout ------------------------------------------- */

typedef struct IterCase {
  int nops;
  struct {
    int rank;
    int64_t shape[MAXR], stride[MAXR];
  } op[3];
  int rank;
  int64_t shape[MAXR], want[MAXR];
} IterCase;

static const IterCase iter_table[] = {
    /* contig + CL -> contiguous; CL + contig -> channels-last */
    {2,
     {{4, {2, 3, 4, 5}, {60, 20, 5, 1}}, {4, {2, 3, 4, 5}, {60, 1, 15, 3}}},
     4, {2, 3, 4, 5}, {60, 20, 5, 1}},
    {2,
     {{4, {2, 3, 4, 5}, {60, 1, 15, 3}}, {4, {2, 3, 4, 5}, {60, 20, 5, 1}}},
     4, {2, 3, 4, 5}, {60, 1, 15, 3}},
    /* bias[3,1,1] + CL -> channels-last */
    {2,
     {{3, {3, 1, 1}, {1, 1, 1}}, {4, {2, 3, 4, 5}, {60, 1, 15, 3}}},
     4, {2, 3, 4, 5}, {60, 1, 15, 3}},
    /* [4,3]@(1,4) unary -> (1,4) */
    {1, {{2, {4, 3}, {1, 4}}}, 2, {4, 3}, {1, 4}},
    {2,
     {{4, {2, 3, 1, 1}, {3, 1, 3, 3}}, {3, {3, 1, 3}, {1, 3, 3}}},
     4, {2, 3, 1, 3}, {9, 1, 3, 3}},
    /* own rows: all CL fast path, scalar operands, equal dense strides */
    {2,
     {{4, {2, 3, 4, 5}, {60, 1, 15, 3}}, {0, {0}, {0}}},
     4, {2, 3, 4, 5}, {60, 1, 15, 3}},
    {2,
     {{2, {4, 3}, {1, 4}}, {2, {4, 3}, {1, 4}}}, 2, {4, 3}, {1, 4}},
    /* same shape, one not dense: general path, first operand decides */
    {2,
     {{2, {4, 3}, {1, 8}}, {2, {4, 3}, {3, 1}}}, 2, {4, 3}, {1, 4}},
    /* an expanded operand has no say on its 0-stride dim */
    {2,
     {{2, {4, 3}, {0, 1}}, {2, {4, 3}, {1, 4}}}, 2, {4, 3}, {1, 4}},
    {2,
     {{2, {4, 3}, {1, 0}}, {2, {4, 3}, {3, 1}}}, 2, {4, 3}, {3, 1}},
    /* broadcast row vector + transposed matrix */
    {2,
     {{1, {3}, {1}}, {2, {4, 3}, {1, 4}}}, 2, {4, 3}, {1, 4}},
    /* a size-1 dim that stays size 1 keeps its stride for ordering */
    {2,
     {{3, {3, 1, 2}, {1, 6, 3}}, {3, {3, 1, 2}, {2, 2, 1}}},
     3, {3, 1, 2}, {1, 6, 3}},
    {2,
     {{2, {4, 1}, {1, 1}}, {2, {4, 3}, {1, 4}}}, 2, {4, 3}, {1, 4}},
    /* fast paths keep odd strides of size-1 dims out of the decision */
    {1, {{3, {2, 1, 3}, {3, 100, 1}}}, 3, {2, 1, 3}, {3, 3, 1}},
    {1, {{4, {2, 3, 4, 1}, {12, 1, 3, 99}}}, 4, {2, 3, 4, 1}, {12, 1, 3, 3}},
    {1, {{3, {3, 1, 4}, {1, 50, 3}}}, 3, {3, 1, 4}, {1, 50, 3}},
    /* rank 1 and 0 */
    {1, {{1, {5}, {2}}}, 1, {5}, {1}},
    {2, {{0, {0}, {0}}, {0, {0}, {0}}}, 0, {0}, {0}},
};

START_TEST(test_iter_table) {
  const IterCase *t = &iter_table[_i];
  Geom g[3];
  const Geom *ops[3];
  for (int i = 0; i < t->nops; i++) {
    g[i] = mk(t->op[i].rank, t->op[i].shape, t->op[i].stride, 0);
    ops[i] = &g[i];
  }
  Geom out;
  geom_elementwise_layout(&C, ops, t->nops, t->rank, syms(t->shape, t->rank),
                          &out);
  expect_geom(&out, t->rank, t->shape, t->want, 0,
              arena_printf(A, "iter row %d", _i));
}
END_TEST

/* ---- printing -------------------------------------------------------- */

START_TEST(test_strings) {
  const Sym *n = sym_var(C.st, 0, "N");
  const Sym *v[2] = {k(4), n};
  ck_assert_str_eq(geom_shape_str(A, v, 2), "[4, N]");
  ck_assert_str_eq(geom_stride_str(A, syms(L(1, 4), 2), 2), "[1, 4]");
  ck_assert_str_eq(geom_shape_str(A, NULL, 0), "[]");
  ck_assert_str_eq(geom_stride_str(A, NULL, 0), "[]");
}
END_TEST

/* ---- symbolic sizes -------------------------------------------------- */

typedef struct Vars {
  const Sym *N, *C, *H, *W, *M;
} Vars;

static Vars vars(void) {
  return (Vars){sym_var(C.st, 0, "N"), sym_var(C.st, 1, "C"),
                sym_var(C.st, 2, "H"), sym_var(C.st, 3, "W"),
                sym_var(C.st, 4, "M")};
}

static const Sym *mul3(const Sym *a, const Sym *b, const Sym *c) {
  return sym_mul(C.st, sym_mul(C.st, a, b), c);
}

START_TEST(test_sym_contiguous_view) {
  Vars s = vars();
  const Sym *shape[4] = {s.N, s.C, s.H, s.W};
  Geom g, out;
  geom_contiguous(&C, 4, shape, &g);
  /* strides as an independent product: W*H*C, W*H, W, 1 */
  ck_assert_ptr_eq(g.stride[0], mul3(s.W, s.H, s.C));
  ck_assert_ptr_eq(g.stride[1], sym_mul(C.st, s.W, s.H));
  ck_assert_ptr_eq(g.stride[2], s.W);
  ck_assert_ptr_eq(g.stride[3], k(1));
  ck_assert(geom_is_contiguous(&g));
  ck_assert(geom_is_dense(&g));
  ck_assert(!geom_is_channels_last(&g));
  ck_assert(!geom_suggests_channels_last(&g));

  const Sym *sz[2] = {s.N, k(-1)};
  expect_ok(geom_view(&C, &g, sz, 2, &out), "view(N,-1)");
  ck_assert_int_eq(out.rank, 2);
  ck_assert_ptr_eq(out.shape[0], s.N);
  ck_assert_ptr_eq(out.shape[1], mul3(s.H, s.C, s.W));
  ck_assert_ptr_eq(out.stride[0], mul3(s.C, s.W, s.H));
  ck_assert_ptr_eq(out.stride[1], k(1));

  /* view(N*C, H, W) merges; view(N, C, -1) too */
  const Sym *sz2[3] = {sym_mul(C.st, s.C, s.N), s.H, s.W};
  expect_ok(geom_view(&C, &g, sz2, 3, &out), "view(N*C,H,W)");
  ck_assert_ptr_eq(out.stride[0], sym_mul(C.st, s.H, s.W));
  const Sym *bad[2] = {s.M, k(-1)};
  expect_err(geom_view(&C, &g, bad, 2, &out), "view(M,-1)", "-1",
             "symbolically", NULL);
  const Sym *bad2[1] = {s.M};
  expect_err(geom_view(&C, &g, bad2, 1, &out), "view(M)", "[M]", NULL);
}
END_TEST

START_TEST(test_sym_transpose_view_error) {
  Vars s = vars();
  const Sym *shape[2] = {s.N, k(3)};
  Geom g, t, out;
  geom_contiguous(&C, 2, shape, &g);
  expect_ok(geom_transpose(&C, &g, 0, 1, &t), "t");
  const Sym *m1[1] = {k(-1)};
  expect_err(geom_view(&C, &t, m1, 1, &out), "t().view(-1)",
             "cannot view shape [3, N] with strides [1, 3] as [3*N]", NULL);
  bool is_view = true;
  expect_ok(geom_reshape(&C, &t, m1, 1, &out, &is_view), "reshape");
  ck_assert(!is_view);
  /* a transpose of [N,1] is still viewable: size-1 dims never split */
  const Sym *shape1[2] = {s.N, k(1)};
  geom_contiguous(&C, 2, shape1, &g);
  expect_ok(geom_transpose(&C, &g, 0, 1, &t), "t1");
  expect_ok(geom_view(&C, &t, m1, 1, &out), "[1,N] view(-1)");
  ck_assert_ptr_eq(out.shape[0], s.N);
  ck_assert_ptr_eq(out.stride[0], k(1));
  /* [N,2] view(-1, 2) back and forth */
  const Sym *shape2[2] = {s.N, k(2)};
  geom_contiguous(&C, 2, shape2, &g);
  const Sym *v2[2] = {k(2), k(-1)};
  expect_ok(geom_view(&C, &g, v2, 2, &out), "[N,2] view(2,-1)");
  ck_assert_ptr_eq(out.shape[1], s.N);
  ck_assert_ptr_eq(out.stride[0], s.N);
  const Sym *v3[2] = {k(-1), k(4)};
  expect_err(geom_view(&C, &g, v3, 2, &out), "[N,2] view(-1,4)",
             "symbolically", NULL);
}
END_TEST

START_TEST(test_sym_broadcast) {
  Vars s = vars();
  const Sym *a[2] = {s.N, k(1)}, *b[2] = {k(1), s.M};
  const Sym **r;
  int n;
  expect_ok(geom_broadcast(&C, a, 2, b, 2, &r, &n), "[N,1]+[1,M]");
  ck_assert_int_eq(n, 2);
  ck_assert_ptr_eq(r[0], s.N);
  ck_assert_ptr_eq(r[1], s.M);
  expect_err(geom_broadcast(&C, &s.N, 1, &s.M, 1, &r, &n), "[N]+[M]", "N",
             "M", NULL);
  expect_ok(geom_broadcast(&C, &s.N, 1, &s.N, 1, &r, &n), "[N]+[N]");
  const Sym *three[1] = {k(3)};
  expect_err(geom_broadcast(&C, &s.N, 1, three, 1, &r, &n), "[N]+[3]", "N",
             "3", NULL);
  /* expand with symbols */
  Geom g, out;
  const Sym *one[2] = {k(1), s.W};
  geom_contiguous(&C, 2, one, &g);
  const Sym *to[3] = {s.N, s.H, s.W};
  expect_ok(geom_expand(&C, &g, to, 3, &out), "expand [1,W] to [N,H,W]");
  ck_assert_ptr_eq(out.stride[0], k(0));
  ck_assert_ptr_eq(out.stride[1], k(0));
  ck_assert_ptr_eq(out.stride[2], k(1));
  const Sym *to2[2] = {s.H, s.M};
  expect_err(geom_expand(&C, &g, to2, 2, &out), "expand W to M", "M", "W",
             NULL);
}
END_TEST

START_TEST(test_sym_slice) {
  Vars s = vars();
  Geom g, out;
  geom_contiguous(&C, 1, &s.N, &g);
  expect_ok(geom_slice(&C, &g, 0, k(0), k(4), NULL, &out), "[0:4]");
  ck_assert_ptr_eq(out.shape[0], sym_min(C.st, s.N, k(4)));
  ck_assert_str_eq(sym_str(A, out.shape[0]), sym_str(A, sym_min(C.st, k(4), s.N)));
  ck_assert_ptr_eq(out.offset, k(0));
  expect_ok(geom_slice(&C, &g, 0, NULL, NULL, NULL, &out), "[:]");
  ck_assert_ptr_eq(out.shape[0], s.N);
  /* [1:N] needs no clamping of the end */
  expect_ok(geom_slice(&C, &g, 0, k(1), s.N, k(2), &out), "[1:N:2]");
  ck_assert_ptr_eq(out.stride[0], k(2));
  ck_assert_ptr_eq(out.offset, sym_min(C.st, k(1), s.N));
  /* a symbolic step gets a run-time check */
  IrModule *m = ir_module_new(A, "t.tdsl");
  C.m = m;
  C.k = ir_kernel_new(m, "f", (Loc){1, 1, 1});
  expect_ok(geom_slice(&C, &g, 0, NULL, NULL, s.M, &out), "[::M]");
  ck_assert_int_eq(C.k->nchecks, 1);
}
END_TEST

START_TEST(test_sym_select_check) {
  Vars s = vars();
  const Sym *shape[2] = {s.N, k(3)};
  Geom g, out;
  geom_contiguous(&C, 2, shape, &g);
  /* without a module: no check, no crash */
  expect_ok(geom_select(&C, &g, 0, k(2), &out), "select(0,2) no module");
  IrModule *m = ir_module_new(A, "t.tdsl");
  C.m = m;
  C.k = ir_kernel_new(m, "f", (Loc){1, 1, 1});
  C.loc = (Loc){3, 7, 6};
  expect_ok(geom_select(&C, &g, 0, k(2), &out), "select(0,2)");
  ck_assert_int_eq(C.k->nchecks, 1);
  IrCheck *ch = &C.k->checks[0];
  ck_assert_int_eq(ch->op, CHK_LT);
  ck_assert_ptr_eq(ch->lhs, k(2));
  ck_assert_ptr_eq(ch->rhs, s.N);
  ck_assert_int_eq(ch->loc.line, 3);
  ck_assert_ptr_nonnull(strstr(ch->msg, "index 2"));
  ck_assert_int_eq(out.rank, 1);
  ck_assert_ptr_eq(out.offset, k(6));
  /* a constant dim needs no check; a negative index wraps symbolically */
  expect_ok(geom_select(&C, &g, 1, k(2), &out), "select(1,2)");
  ck_assert_int_eq(C.k->nchecks, 1);
  expect_ok(geom_select(&C, &g, 0, k(-1), &out), "select(0,-1)");
  ck_assert_int_eq(C.k->nchecks, 2);
  ck_assert_ptr_eq(out.offset,
                   sym_mul(C.st, sym_sub(C.st, s.N, k(1)), k(3)));
  /* index 0 on a symbolic dim still needs N > 0 */
  expect_ok(geom_select(&C, &g, 0, k(0), &out), "select(0,0)");
  ck_assert_int_eq(C.k->nchecks, 3);
  /* narrow on a symbolic dim: one check for start + length <= N */
  expect_ok(geom_narrow(&C, &g, 0, k(1), k(2), &out), "narrow");
  ck_assert_int_eq(C.k->nchecks, 4);
  ck_assert_ptr_eq(out.shape[0], k(2));
  /* narrow(0, 0, N) is provably fine */
  expect_ok(geom_narrow(&C, &g, 0, k(0), s.N, &out), "narrow full");
  ck_assert_int_eq(C.k->nchecks, 4);
  /* as_strided over a symbolic storage [N, 3]: 3*N elements at run time
   * (min(3*N, 1) * 3*N: an empty storage holds nothing) */
  expect_ok(geom_as_strided(&C, &g, &g, syms(L(2, 2), 2), syms(L(3, 1), 2), 2,
                            NULL, &out),
            "as_strided symbolic");
  ck_assert_int_eq(C.k->nchecks, 5);
  ch = &C.k->checks[4];
  ck_assert_int_eq(ch->op, CHK_LE);
  ck_assert_ptr_eq(ch->lhs, k(5));
  const Sym *n3 = sym_mul(C.st, s.N, k(3));
  ck_assert_ptr_eq(ch->rhs, sym_mul(C.st, sym_min(C.st, n3, k(1)), n3));
  ck_assert_ptr_nonnull(strstr(ch->msg, "as_strided()"));
}
END_TEST

START_TEST(test_sym_same_size_and_squeeze) {
  Vars s = vars();
  SymTab *t = C.st;
  const Sym *half = sym_floordiv(t, s.N, k(2));
  const Sym *rest = sym_sub(t, s.N, half);
  /* without a kernel, only proofs count */
  ck_assert(geom_same_size(&C, sym_add(t, sym_floordiv(t, sym_sub(t, s.H, k(1)), k(2)), k(1)),
                           sym_floordiv(t, sym_add(t, s.H, k(1)), k(2)), "m"));
  ck_assert(!geom_same_size(&C, half, rest, "m"));
  IrModule *m = ir_module_new(A, "t.tdsl");
  C.m = m;
  C.k = ir_kernel_new(m, "f", (Loc){1, 1, 1});
  /* equal for even N only: one entry check, however often asked */
  ck_assert(geom_same_size(&C, half, rest, "halves"));
  ck_assert(geom_same_size(&C, rest, half, "halves"));
  ck_assert_int_eq(C.k->nchecks, 1);
  ck_assert_int_eq(C.k->checks[0].op, CHK_EQ);
  /* different in general: rejected, no check */
  ck_assert(!geom_same_size(&C, s.N, s.M, "m"));
  ck_assert(!geom_same_size(&C, s.N, sym_add(t, s.N, k(1)), "m"));
  ck_assert_int_eq(C.k->nchecks, 1);
  /* a broadcast of the two halves gets the same check */
  const Sym **out;
  int nout;
  ck_assert_ptr_null(geom_broadcast(&C, &half, 1, &rest, 1, &out, &nout));
  ck_assert_int_eq(C.k->nchecks, 1);
  /* squeeze() keeps N and M: each must not be 1 at entry; H >= 2 is known */
  const Sym *shape[4] = {s.N, k(1), s.M, s.H};
  Geom g, o;
  geom_contiguous(&C, 4, shape, &g);
  IrCheck h2 = {.lhs = k(2), .rhs = s.H, .op = CHK_LE, .msg = "h"};
  ir_add_check(m, C.k, &h2);
  expect_ok(geom_squeeze(&C, &g, NULL, &o), "squeeze()");
  ck_assert_int_eq(o.rank, 3);
  ck_assert_int_eq(C.k->nchecks, 4);
  const Sym *n1 = sym_sub(t, s.N, k(1));
  ck_assert_int_eq(C.k->checks[2].op, CHK_LE);
  ck_assert_ptr_eq(C.k->checks[2].rhs, sym_mul(t, n1, n1));
  ck_assert_ptr_nonnull(strstr(C.k->checks[2].msg, "PyTorch would drop it"));
  expect_ok(geom_squeeze(&C, &g, L(0), &o), "squeeze(0)");
  ck_assert_int_eq(o.rank, 4);
  ck_assert_int_eq(C.k->nchecks, 4); /* the same check, not twice */
}
END_TEST

START_TEST(test_sym_channels_last) {
  Vars s = vars();
  const Sym *shape[4] = {s.N, s.C, s.H, s.W};
  Geom cl, ct, out;
  geom_channels_last(&C, shape, &cl);
  geom_contiguous(&C, 4, shape, &ct);
  ck_assert(geom_is_channels_last(&cl));
  ck_assert(!geom_is_contiguous(&cl));
  ck_assert(geom_suggests_channels_last(&cl));
  ck_assert(geom_is_dense(&cl));
  const Geom *ops[2] = {&cl, &ct};
  geom_elementwise_layout(&C, ops, 2, 4, shape, &out);
  ck_assert(geom_is_channels_last(&out));
  ops[0] = &ct;
  ops[1] = &cl;
  geom_elementwise_layout(&C, ops, 2, 4, shape, &out);
  ck_assert(geom_is_contiguous(&out));
  geom_preserve(&C, &cl, &out);
  for (int d = 0; d < 4; d++) ck_assert_ptr_eq(out.stride[d], cl.stride[d]);
  /* permute the CL tensor to [N,H,W,C]: contiguous */
  expect_ok(geom_permute(&C, &cl, (const int64_t[]){0, 2, 3, 1}, 4, &out),
            "nhwc");
  ck_assert(geom_is_contiguous(&out));
  /* flatten(2) of CL is a view with strides (H*W*C, 1, C) */
  const Sym *fl[3] = {s.N, s.C, sym_mul(C.st, s.H, s.W)};
  expect_ok(geom_view(&C, &cl, fl, 3, &out), "cl flatten(2)");
  ck_assert_ptr_eq(out.stride[2], s.C);
  const Sym *fl1[2] = {s.N, k(-1)};
  expect_err(geom_view(&C, &cl, fl1, 2, &out), "cl flatten(1)",
             "cannot view", NULL);
  /* strides that are themselves symbols (a `strided` parameter) */
  const Sym *st[2] = {sym_var(C.st, 5, "x.stride(0)"),
                      sym_var(C.st, 6, "x.stride(1)")};
  Geom x = {2, (const Sym *[]){s.N, s.M}, st, k(0)};
  ck_assert(!geom_is_contiguous(&x));
  ck_assert(!geom_is_dense(&x));
}
END_TEST

static Suite *geometry_suite(void) {
  Suite *s = suite_create("geometry");
  TCase *t = tcase_create("table");
  tcase_add_checked_fixture(t, setup, teardown);
  int nview = (int)(sizeof view_table / sizeof *view_table);
  int nlay = (int)(sizeof layout_table / sizeof *layout_table);
  int nclone = (int)(sizeof clone_table / sizeof *clone_table);
  int niter = (int)(sizeof iter_table / sizeof *iter_table);
  tcase_add_loop_test(t, test_view_table, 0, nview);
  tcase_add_test(t, test_view_message);
  tcase_add_test(t, test_view_infer);
  tcase_add_test(t, test_view_zero_dim);
  tcase_add_test(t, test_reshape);
  tcase_add_loop_test(t, test_layout_table, 0, nlay);
  tcase_add_test(t, test_allocation);
  tcase_add_test(t, test_permute_transpose);
  tcase_add_test(t, test_wrap_dim);
  tcase_add_test(t, test_expand);
  tcase_add_test(t, test_unsqueeze_squeeze);
  tcase_add_test(t, test_slice);
  tcase_add_test(t, test_narrow_select);
  tcase_add_test(t, test_diagonal_unfold);
  tcase_add_test(t, test_as_strided);
  tcase_add_test(t, test_as_strided_bounds);
  tcase_add_test(t, test_broadcast);
  tcase_add_loop_test(t, test_clone_table, 0, nclone);
  tcase_add_loop_test(t, test_iter_table, 0, niter);
  tcase_add_test(t, test_strings);
  suite_add_tcase(s, t);
  TCase *y = tcase_create("symbolic");
  tcase_add_checked_fixture(y, setup, teardown);
  tcase_add_test(y, test_sym_contiguous_view);
  tcase_add_test(y, test_sym_transpose_view_error);
  tcase_add_test(y, test_sym_broadcast);
  tcase_add_test(y, test_sym_slice);
  tcase_add_test(y, test_sym_select_check);
  tcase_add_test(y, test_sym_same_size_and_squeeze);
  tcase_add_test(y, test_sym_channels_last);
  suite_add_tcase(s, y);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(geometry_suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
