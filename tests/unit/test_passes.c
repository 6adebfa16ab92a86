/* test_passes.c — the pass pipeline, the report, fold-views,
 * eliminate-copies and ir_compact on small programs.
 *
 * Each program is parsed and checked by the real front end; a pass is run
 * and the test checks the IR change (ops, operands, geometry kept), the
 * verifier, the decisions recorded, and that the reference interpreter
 * gives bit-identical results before and after (the passes only change
 * how values are addressed, never what is computed).
 * Needs: the front end, ir/, interp.c, passes/. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"
#include "ir/interp.h"
#include "passes/passes.h"

static Arena *A;

static void setup(void) { A = arena_new(); }
static void teardown(void) { arena_free(A); }

static IrModule *compile(const char *src) {
  Diag d;
  diag_init(&d, "t.tdsl", src, stderr);
  AstProgram *p = parse_program(A, &d, src);
  ck_assert_ptr_nonnull(p);
  IrModule *m = sema_program(A, &d, p, "t.tdsl");
  ck_assert_ptr_nonnull(m);
  ck_assert_int_eq(d.nerrors, 0);
  ck_assert_int_eq(ir_verify(m, stderr), 0);
  return m;
}

/* Runs one pass over kernel 0 with a fresh report section. */
static bool run_pass(IrModule *m, Report *r, bool (*pass)(PassCtx *)) {
  PassOptions o = {.opt_level = 2};
  PassCtx c = {.m = m, .k = m->kernels[0], .opt = &o, .r = r};
  report_kernel(r, c.k);
  bool changed = pass(&c);
  ck_assert_int_eq(ir_verify(m, stderr), 0);
  return changed;
}

static int count_op(const IrKernel *k, Op op) {
  int n = 0;
  for (int i = 0; i < k->nvalues; i++) n += k->values[i].op == op;
  return n;
}

static char *json_of(const Report *r) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  report_write_json(r, f);
  fclose(f);
  char *s = arena_strdup(A, buf);
  free(buf);
  return s;
}

static char *text_of(const Report *r) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  report_write_text(r, f);
  fclose(f);
  char *s = arena_strdup(A, buf);
  free(buf);
  return s;
}

/* Element i (row-major logical order) of an f32 tensor of rank <= 3. */
static float at(const HostTensor *t, int64_t i) {
  int64_t idx[3] = {0, 0, 0}, off = t->offset;
  for (int d = t->rank - 1; d >= 0; d--) {
    idx[d] = i % t->shape[d];
    i /= t->shape[d];
  }
  for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
  return ((const float *)t->data)[off];
}

/* Runs kernel 0 of `before` and `after` on the same f32 inputs (rank
 * <= 3, shapes given) and requires bit-equal results. */
static void same_results(const IrModule *before, const IrModule *after,
                         int nin, const int64_t shapes[][3], const int *ranks) {
  InterpArg args[4];
  memset(args, 0, sizeof args);
  for (int i = 0; i < nin; i++) {
    ck_assert_int_eq(host_tensor_alloc(&args[i].t, DT_F32, ranks[i], shapes[i]), 0);
    float *p = args[i].t.data;
    for (int64_t j = 0; j < host_tensor_numel(&args[i].t); j++)
      p[j] = (float)(j * 7 % 11) * 0.25f - 1.0f + (float)i;
  }
  HostTensor o0[8], o1[8];
  char err[256];
  memset(o0, 0, sizeof o0);
  memset(o1, 0, sizeof o1);
  const IrKernel *k0 = before->kernels[0], *k1 = after->kernels[0];
  ck_assert_msg(interp_run(before, k0, args, o0, err, sizeof err) == 0, "%s", err);
  ck_assert_msg(interp_run(after, k1, args, o1, err, sizeof err) == 0, "%s", err);
  for (int i = 0; i < k0->nresults; i++) {
    ck_assert_int_eq(o0[i].rank, o1[i].rank);
    int64_t n = host_tensor_numel(&o0[i]);
    ck_assert_int_eq(n, host_tensor_numel(&o1[i]));
    for (int64_t j = 0; j < n; j++)
      ck_assert_msg(at(&o0[i], j) == at(&o1[i], j), "result %d element %lld",
                    i, (long long)j);
    host_tensor_free(&o0[i]);
    host_tensor_free(&o1[i]);
  }
  for (int i = 0; i < nin; i++) host_tensor_free(&args[i].t);
}

/* ---- fold-views ---- */

static const char VIEWS[] =
    "kernel f(x: f32[2, 3, 4], v: f32[10]) -> (f32[3], f32[4, 3], f32[2, 4]) {\n"
    "    c = v[2:][1::3]\n"
    "    d = x[1].t()\n"
    "    e = x.permute(2, 0, 1)[:, :, 1].t()\n"
    "    return c, d.exp(), e\n"
    "}\n";

START_TEST(fold_chains) {
  IrModule *m = compile(VIEWS), *orig = compile(VIEWS);
  Report *r = report_new(A, "t.tdsl", "host");
  IrKernel *k = m->kernels[0];
  int before = k->nvalues;
  ck_assert(run_pass(m, r, pass_fold_views));
  /* Every remaining view reads a non-view directly. */
  for (int i = 0; i < k->nvalues; i++)
    if (op_kind(k->values[i].op) == IRK_VIEW)
      ck_assert_int_ne(op_kind(k->values[k->values[i].args[0]].op), IRK_VIEW);
  /* v[2:][1::3]: offset 2 + 1, stride 3, 3 elements, reading v (%1). */
  const IrValue *c = &k->values[k->results[0].value];
  ck_assert_int_eq(c->op, OP_AS_STRIDED);
  ck_assert_int_eq(c->args[0], k->params[1].value);
  ck_assert(sym_is(c->offset, 3) && sym_is(c->stride[0], 3) && sym_is(c->shape[0], 3));
  /* x.permute(2,0,1)[:, :, 1].t(): shape [2, 4], strides [12, 1], offset 4 */
  const IrValue *e = &k->values[k->results[2].value];
  ck_assert(sym_is(e->shape[0], 2) && sym_is(e->shape[1], 4));
  ck_assert(sym_is(e->stride[0], 12) && sym_is(e->stride[1], 1) && sym_is(e->offset, 4));
  /* The inner views of each chain (1 + 1 + 2 of them) are gone. */
  ck_assert_int_eq(k->nvalues, before - 4);
  ck_assert_int_eq(report_count(r, "f", "fold-views", "fold"), 3);
  char *j = json_of(r);
  ck_assert_ptr_nonnull(strstr(j, "v[2:10][1:8:3] reads v directly with shape [3] "
                                  "strides [3] offset 3: 2 views folded"));
  ck_assert_ptr_nonnull(strstr(j, "3 views folded"));
  int64_t shapes[2][3] = {{2, 3, 4}, {10}};
  int ranks[2] = {3, 1};
  same_results(orig, m, 2, shapes, ranks);
}
END_TEST

START_TEST(fold_nothing_and_broadcast) {
  IrModule *m = compile("kernel f(x: f32[N, 3], b: f32[3]) -> f32[N, 3] {\n"
                        "    return x.t().t() + b\n}\n");
  Report *r = report_new(A, "t.tdsl", "host");
  ck_assert(run_pass(m, r, pass_fold_views));
  ck_assert_int_eq(report_count(r, NULL, "fold-views", "broadcast"), 1);
  ck_assert_ptr_nonnull(strstr(json_of(r), "broadcast of b [3] to [N, 3] stays a stride-0 read"));
  /* Values without a name are named by their source: the scalar literal
   * or the op, with its line:col, never the IR's %N. */
  IrModule *m3 = compile("kernel h(x: f32[B, T, T], y: f32[120]) -> (f32[B, T, T], f32[15, 8]) {\n"
                         "    return x * 2.5, (y + 1.0).view(8, 15).t()\n}\n");
  Report *r3 = report_new(A, "t.tdsl", "host");
  ck_assert(run_pass(m3, r3, pass_fold_views));
  char *j3 = json_of(r3);
  ck_assert_ptr_null(strchr(j3, '%'));
  ck_assert_ptr_nonnull(strstr(j3, "broadcast of the scalar 2.5 at 2:16 to [B, T, T] "
                                   "stays a stride-0 read"));
  ck_assert_ptr_nonnull(strstr(j3, "add(y, 1.0).view(8, 15).t() reads add(y, 1.0) at 2:24 "
                                   "directly with shape [15, 8]"));
  /* A kernel with single views only is left alone. */
  IrModule *m2 = compile("kernel g(x: f32[3, 4]) -> f32[4, 3] {\n  return x.t()\n}\n");
  Report *r2 = report_new(A, "t.tdsl", "host");
  int n = m2->kernels[0]->nvalues;
  ck_assert(!run_pass(m2, r2, pass_fold_views));
  ck_assert_int_eq(m2->kernels[0]->nvalues, n);
  ck_assert_int_eq(report_count(r2, NULL, NULL, NULL), 0);
}
END_TEST

/* ---- eliminate-copies ---- */

static const char COPIES[] =
    "kernel f(x: f32[2, 3, 4], y: f32[3, 4]) -> (f32[2, 4, 3], f32[2, 3], f32[12], f32[4, 3], f32[4, 4]) {\n"
    "    a = x.transpose(1, 2).contiguous()\n"
    "    s = x.clone().sum(2)\n"
    "    t = y.t().contiguous()\n"
    "    w = t.view(12)\n"
    "    return a.exp(), s, w, y.t().contiguous(), y.t().clone() @ y\n"
    "}\n";

START_TEST(copies_removed_and_kept) {
  IrModule *m = compile(COPIES), *orig = compile(COPIES);
  Report *r = report_new(A, "t.tdsl", "host");
  IrKernel *k = m->kernels[0];
  ck_assert_int_eq(count_op(k, OP_COPY), 5);
  ck_assert(run_pass(m, r, pass_eliminate_copies));
  /* Kept: the copy under view(12) and the clone feeding matmul. */
  ck_assert_int_eq(count_op(k, OP_COPY), 2);
  ck_assert_int_eq(report_count(r, "f", "eliminate-copies", "removed"), 3);
  ck_assert_int_eq(report_count(r, "f", "eliminate-copies", "kept"), 2);
  /* exp now reads the transposed view of x; sum reads x itself. */
  const IrValue *ex = &k->values[k->results[0].value];
  ck_assert_int_eq(k->values[ex->args[0]].op, OP_PERMUTE);
  const IrValue *s = &k->values[k->results[1].value];
  ck_assert_int_eq(s->args[0], k->params[0].value);
  /* The result that was a copy is now the view itself. */
  ck_assert_int_eq(k->values[k->results[3].value].op, OP_PERMUTE);
  char *j = json_of(r);
  /* 2 x 24 elements x 4 bytes for the [2, 4, 3] copy */
  ck_assert_ptr_nonnull(strstr(j, "\"kind\": \"removed\", \"line\": 2, \"col\": 27"));
  ck_assert_ptr_nonnull(strstr(j, "\"bytes\": 192}"));
  ck_assert_ptr_nonnull(strstr(j, "read only by an elementwise exp"));
  ck_assert_ptr_nonnull(strstr(j, "y.t().contiguous() stays: t.view(12)"));
  ck_assert_ptr_nonnull(strstr(j, "y.t().clone() stays: the matmul"));
  int64_t shapes[2][3] = {{2, 3, 4}, {3, 4}};
  int ranks[2] = {3, 2};
  same_results(orig, m, 2, shapes, ranks);
}
END_TEST

START_TEST(copies_symbolic_bytes) {
  IrModule *m = compile("kernel f(x: f64[N, 3]) -> f64[N] {\n"
                        "    return x.t().contiguous().sum(0)\n}\n");
  Report *r = report_new(A, "t.tdsl", "host");
  ck_assert(run_pass(m, r, pass_eliminate_copies));
  ck_assert_int_eq(count_op(m->kernels[0], OP_COPY), 0);
  /* 2 x 3N elements x 8 bytes, as an expression string */
  ck_assert_ptr_nonnull(strstr(json_of(r), "\"bytes\": \"48*N\""));
  ck_assert_ptr_nonnull(strstr(text_of(r), "48*N bytes saved"));
}
END_TEST

/* ---- ir_compact ---- */

START_TEST(compact_renumbers) {
  IrModule *m = compile("kernel f(x: f32[4], y: f32[4]) -> f32[4] {\n"
                        "    u = x.exp()\n    v = u + y\n    return y.neg()\n}\n");
  IrKernel *k = m->kernels[0];
  int n = k->nvalues;
  bool *none = arena_alloc(A, (size_t)n);
  ck_assert_int_eq(ir_compact(m, k, none), 0); /* nothing may go */
  ck_assert_int_eq(ir_compact(m, k, NULL), 2); /* exp and add */
  ck_assert_int_eq(k->nvalues, n - 2);
  ck_assert_int_eq(k->params[0].value, 0);
  ck_assert_int_eq(k->params[1].value, 1);
  const IrValue *neg = &k->values[k->results[0].value];
  ck_assert_int_eq(neg->op, OP_NEG);
  ck_assert_int_eq(neg->args[0], 1);
  ck_assert_int_eq(ir_verify(m, stderr), 0);
}
END_TEST

/* ---- pipeline and report ---- */

START_TEST(pipeline_levels) {
  ck_assert(pass_known("fold-views") && pass_known("eliminate-copies"));
  ck_assert(pass_known("plan-memory") && !pass_known("fold"));
  ck_assert_str_eq(pass_table[0].name, "fold-views");
  ck_assert_str_eq(pass_table[1].name, "eliminate-copies");
  IrModule *m = compile(COPIES);
  int n = m->kernels[0]->nvalues;
  Report *r = report_new(A, "t.tdsl", "host");
  char *buf = NULL;
  size_t len = 0;
  FILE *dump = open_memstream(&buf, &len);
  PassOptions o0 = {.opt_level = 0, .dump_after = "fold-views", .dump = dump};
  ck_assert_int_eq(pipeline_run(m, &o0, r), 0);
  fflush(dump);
  ck_assert_int_eq(m->kernels[0]->nvalues, n); /* -O0: nothing ran */
  ck_assert_int_eq(report_count(r, NULL, NULL, NULL), 0);
  ck_assert_ptr_nonnull(strstr(buf, "kernel f("));
  ck_assert_ptr_nonnull(strstr(text_of(r), "no passes ran"));
  const char *off[] = {"eliminate-copies", "choose-layout", "fuse", "plan-memory"};
  PassOptions o2 = {.opt_level = 2, .disabled = off, .ndisabled = 4};
  ck_assert_int_eq(pipeline_run(m, &o2, r), 0);
  ck_assert_int_eq(report_count(r, NULL, "eliminate-copies", NULL), 0);
  ck_assert_int_eq(count_op(m->kernels[0], OP_COPY), 5);
  char *j = json_of(r);
  ck_assert_ptr_nonnull(strstr(j, "\"passes\": [{\"name\": \"fold-views\", \"ms\": "));
  ck_assert_ptr_null(strstr(j, "\"name\": \"eliminate-copies\""));
  fclose(dump);
  free(buf);
}
END_TEST

/* plan-memory's totals say something true when sharing saved nothing. */
START_TEST(plan_totals_text) {
  IrModule *m = compile("kernel f(x: f32[4]) -> f32[] {\n  return (x * x).sum()\n}\n");
  Report *r = report_new(A, "t.tdsl", "host");
  run_pass(m, r, pass_plan_memory);
  char *j = json_of(r);
  ck_assert_ptr_nonnull(strstr(j, "1 scratch buffer: 16 B of scratch\""));
  ck_assert_ptr_null(strstr(j, "instead of"));
  /* three live at once: nothing to share */
  IrModule *m2 = compile("kernel f(x: f32[4]) -> f32[4] {\n"
                         "  return (x * x) + (x - x) * exp(x)\n}\n");
  Report *r2 = report_new(A, "t.tdsl", "host");
  run_pass(m2, r2, pass_plan_memory);
  j = json_of(r2);
  ck_assert_ptr_null(strstr(j, "instead of"));
  ck_assert_ptr_nonnull(strstr(j, "no buffer could take over the block of a dead one"));
}
END_TEST

START_TEST(report_escapes_and_totals) {
  IrModule *m = compile("kernel f(x: f32[N]) -> f32[N] {\n  return x.exp()\n}\n");
  Report *r = report_new(A, "a\"b\\c.tdsl", "x86-64");
  report_kernel(r, m->kernels[0]);
  report_decision(r, "fuse", "note", (Loc){2, 10, 3}, -5, "tab\there \"q\"\nnl %c", 1);
  SymTab *st = m->st;
  const Sym *n4 = sym_mul(st, ir_numel(m, &m->kernels[0]->values[0]), sym_const(st, 4));
  report_set_totals(r, m->kernels[0], sym_mul(st, n4, sym_const(st, 2)), n4, 2, 1,
                    sym_const(st, 0));
  char *j = json_of(r);
  ck_assert_ptr_nonnull(strstr(j, "{\"file\": \"a\\\"b\\\\c.tdsl\", \"target\": \"x86-64\""));
  ck_assert_ptr_nonnull(strstr(j, "\"message\": \"tab\\there \\\"q\\\"\\nnl \\u0001\""));
  ck_assert_ptr_nonnull(strstr(j, "\"bytes\": -5}"));
  ck_assert_ptr_nonnull(strstr(j, "\"bytes_moved\": {\"before\": \"8*N\", \"after\": \"4*N\"}"));
  ck_assert_ptr_nonnull(strstr(j, "\"loop_nests\": {\"before\": 2, \"after\": 1}"));
  ck_assert_ptr_nonnull(strstr(j, "\"scratch_bytes\": 0"));
  char *t = text_of(r);
  ck_assert_ptr_nonnull(strstr(t, "a\"b\\c.tdsl:2:10: fuse: note: tab"));
  ck_assert_ptr_nonnull(strstr(t, "loop nests:   2 -> 1"));
  char b[32];
  report_format_bytes(b, sizeof b, 512);
  ck_assert_str_eq(b, "512 B");
  report_format_bytes(b, sizeof b, 1500000);
  ck_assert_str_eq(b, "1.50 MB");
  report_format_bytes(b, sizeof b, 123456);
  ck_assert_str_eq(b, "123 KB");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("passes");
  TCase *t = tcase_create("core");
  tcase_add_checked_fixture(t, setup, teardown);
  tcase_add_test(t, fold_chains);
  tcase_add_test(t, fold_nothing_and_broadcast);
  tcase_add_test(t, copies_removed_and_kept);
  tcase_add_test(t, copies_symbolic_bytes);
  tcase_add_test(t, compact_renumbers);
  tcase_add_test(t, pipeline_levels);
  tcase_add_test(t, report_escapes_and_totals);
  tcase_add_test(t, plan_totals_text);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
