/* test_passes_opt.c — the passes fuse, choose-layout and plan-memory
 * (passes/): fusion flags and decisions on small programs, the layout
 * chosen for conv chains on NCHW and channels-last inputs and under
 * --layout, the cost model's row per target (costs.c: the numbers a
 * decision names, the fusion budget), scratch slots reused along a
 * chain, and compiled kernels
 * (-O2, each pass disabled in turn, --layout forced) equal to the
 * interpreter.
 * Needs: the front end, passes (tdslc_core), tdslc (TDSL_TDSLC), a C
 * compiler and the runtime sources (codegen_util.h). */
#include "codegen_util.h"
#include "passes/passes.h"

/* ---- IR-level: parse, check, run the pipeline ---- */

typedef struct Prog {
  Arena *a;
  IrModule *m;
  Report *r;
} Prog;

/* Compiled for --target=target (its cost model's row). */
static Prog compile_for(const char *src, int opt, LayoutPolicy lay, const char *disabled,
                        const char *target) {
  Prog p = {.a = arena_new()};
  Diag d;
  diag_init(&d, "t.tdsl", src, stderr);
  AstProgram *ast = parse_program(p.a, &d, src);
  ck_assert_ptr_nonnull(ast);
  p.m = sema_program(p.a, &d, ast, "t.tdsl");
  ck_assert_ptr_nonnull(p.m);
  const char *dis[1] = {disabled};
  PassOptions o = {.opt_level = opt, .layout = lay, .disabled = dis,
                   .ndisabled = disabled != NULL, .target = target};
  p.r = report_new(p.a, "t.tdsl", target);
  ck_assert_int_eq(pipeline_run(p.m, &o, p.r), 0);
  ck_assert_int_eq(ir_verify(p.m, stderr), 0);
  return p;
}

static Prog compile(const char *src, int opt, LayoutPolicy lay, const char *disabled) {
  return compile_for(src, opt, lay, disabled, "host");
}

/* The text report (malloc'd). */
static char *report_text(const Prog *p) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  report_write_text(p->r, f);
  fclose(f);
  return text;
}

/* The value bound to source name `name` (the last one). */
static const IrValue *named(const Prog *p, const char *name) {
  const IrKernel *k = p->m->kernels[0];
  for (IrRef r = k->nvalues - 1; r >= 0; r--)
    if (k->values[r].name && !strcmp(k->values[r].name, name)) return &k->values[r];
  ck_abort_msg("no value named %s", name);
  return NULL;
}

static bool inl(const IrValue *v) { return v->flags & IRF_INLINE; }

START_TEST(fuse_single_use_chain) {
  Prog p = compile("kernel f(x: f32[64, 32], y: f32[64, 32]) -> f32[64, 32] {\n"
                   "  a = relu(x)\n"
                   "  b = a * y\n"
                   "  return b + 1.0\n"
                   "}\n", 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(inl(named(&p, "a")));
  ck_assert(inl(named(&p, "b")));
  ck_assert_int_ge(report_count(p.r, "f", "fuse", "fused"), 2);
  ck_assert_int_eq(report_count(p.r, "f", "fuse", "materialized"), 0);
  arena_free(p.a);
}
END_TEST

START_TEST(fuse_o0_and_disabled_flag_nothing) {
  const char *src = "kernel f(x: f32[8]) -> f32[8] {\n  a = exp(x)\n  return a + 1.0\n}\n";
  Prog p = compile(src, 0, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(!inl(named(&p, "a")));
  ck_assert_int_eq(report_count(p.r, NULL, "fuse", NULL), 0);
  arena_free(p.a);
  p = compile(src, 2, LAYOUT_POLICY_AUTO, "fuse");
  ck_assert(!inl(named(&p, "a")));
  ck_assert_int_eq(report_count(p.r, NULL, "fuse", NULL), 0);
  arena_free(p.a);
}
END_TEST

START_TEST(fuse_multi_use_budget) {
  /* e = exp(x): cost 9, read twice -> recomputed; g = exp(exp(x)) inlined
   * inner costs 9 + 8 = 17 > 12, read twice -> materialized. */
  Prog p = compile("kernel f(x: f32[16]) -> (f32[16], f32[16]) {\n"
                   "  e = exp(x)\n"
                   "  g = exp(exp(x))\n"
                   "  return e * e, g + g\n"
                   "}\n", 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(inl(named(&p, "e")));
  ck_assert(!inl(named(&p, "g")));
  ck_assert_int_eq(report_count(p.r, "f", "fuse", "recomputed"), 1);
  ck_assert_int_ge(report_count(p.r, "f", "fuse", "materialized"), 1);
  arena_free(p.a);
}
END_TEST

START_TEST(fuse_budget_per_target) {
  /* g = exp(exp(x)) costs 17, read twice: over the CPU's budget (12),
   * within CUDA's (24), and recomputing loads 4 bytes per read against
   * 12 to store it: materialized on the CPU, recomputed on CUDA. */
  const char *src = "kernel f(x: f32[16]) -> f32[16] {\n"
                    "  g = exp(exp(x))\n"
                    "  return g + g\n"
                    "}\n";
  Prog p = compile_for(src, 2, LAYOUT_POLICY_AUTO, NULL, "x86-64-v3");
  ck_assert(!inl(named(&p, "g")));
  char *text = report_text(&p);
  ck_assert_msg(strstr(text, "costs 17 > 12"), "%s", text);
  free(text);
  arena_free(p.a);
  p = compile_for(src, 2, LAYOUT_POLICY_AUTO, NULL, "cuda:sm_90");
  ck_assert(inl(named(&p, "g")));
  ck_assert_int_eq(report_count(p.r, "f", "fuse", "recomputed"), 1);
  text = report_text(&p);
  ck_assert_msg(strstr(text, "(cost 17 <= 24)"), "%s", text);
  free(text);
  arena_free(p.a);
}
END_TEST

START_TEST(fuse_blockers) {
  /* a slice view and a softmax input: materialized; a matmul operand: the
   * GEMM's prologue (inlined into its packing). */
  Prog p = compile("kernel f(x: f32[8, 8], w: f32[8, 8]) -> (f32[4, 8], f32[8, 8], f32[8, 8]) {\n"
                   "  s = x * 2.0\n"
                   "  m = x + 1.0\n"
                   "  n = x - 1.0\n"
                   "  return s[0:4], m @ w, softmax(n, 1)\n"
                   "}\n", 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(!inl(named(&p, "s")));
  ck_assert(inl(named(&p, "m")));
  ck_assert(!inl(named(&p, "n")));
  ck_assert_int_eq(report_count(p.r, "f", "fuse", "materialized"), 4); /* + matmul, softmax */
  ck_assert_int_eq(report_count(p.r, "f", "fuse", "prologue"), 1);
  arena_free(p.a);
}
END_TEST

START_TEST(fuse_into_scans) {
  /* a scan reads its operand element by element, as a reduction: the
   * producer is inlined into the scan's loop; the scan itself gets its own
   * nest and the report says why */
  Prog p = compile("kernel f(x: f32[8, 8], y: f32[8]) -> (f32[8, 8], f32[8, 8]) {\n"
                   "  a = x * y\n"
                   "  b = exp(x)\n"
                   "  c = b.cumsum(0)\n"
                   "  return a.cumsum(1), logcumsumexp(c, 1)\n"
                   "}\n", 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(inl(named(&p, "a")));
  ck_assert(inl(named(&p, "b")));
  ck_assert(!inl(named(&p, "c")));
  char *text = report_text(&p);
  ck_assert_msg(strstr(text, "computed inside the cumsum"), "%s", text);
  ck_assert_msg(strstr(text, "a scan runs its own loop nest"), "%s", text);
  free(text);
  arena_free(p.a);
}
END_TEST

/* ---- choose-layout ---- */

/* Two convs with kernel size ks (padding keeps the size) and a relu. */
static const char *conv_src(const char *xlayout, const char *ylayout, int ks) {
  static char buf[512];
  snprintf(buf, sizeof buf,
           "kernel c(x: f32[2, 16, 12, 12] %s, w: f32[16, 16, %d, %d]) -> f32[2, 16, 12, 12] %s {\n"
           "  y = relu(conv2d(x, w, padding=%d))\n"
           "  return conv2d(y, w, padding=%d)\n"
           "}\n", xlayout, ks, ks, ylayout, ks / 2, ks / 2);
  return buf;
}

/* The layout of conv value #first conv in kernel 0. */
static bool conv_is_cl(const Prog *p) {
  const IrKernel *k = p->m->kernels[0];
  for (IrRef r = 0; r < k->nvalues; r++)
    if (k->values[r].op == OP_CONV2D) {
      const IrValue *v = &k->values[r];
      return sym_is(v->stride[1], 1) && !sym_is(v->stride[3], 1);
    }
  ck_abort_msg("no conv");
  return false;
}

START_TEST(layout_follows_cost) {
  /* channels_last in and out, 1x1 convs: an NCHW 1x1 conv packs slowly
   * from a channels_last input and the result would need a transpose, so
   * channels-last wins although its GEMM is slower; NCHW in and out with
   * 3x3 convs: channels-last (the built-in row's NCHW direct kernel runs
   * at 0.57 of the channels-last one, which pays for the transposes);
   * NCHW in and out with 1x1 convs: NCHW (the plain GEMM, no
   * transposes). */
  Prog p = compile(conv_src("channels_last", "channels_last", 1), 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(conv_is_cl(&p));
  ck_assert_int_eq(report_count(p.r, "c", "choose-layout", "layout"), 1);
  ck_assert(sym_is(named(&p, "y")->stride[1], 1)); /* the relu follows */
  arena_free(p.a);
  p = compile(conv_src("contiguous", "contiguous", 3), 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(conv_is_cl(&p));
  arena_free(p.a);
  p = compile(conv_src("contiguous", "contiguous", 1), 2, LAYOUT_POLICY_AUTO, NULL);
  ck_assert(!conv_is_cl(&p));
  arena_free(p.a);
}
END_TEST

START_TEST(layout_overrides) {
  Prog p = compile(conv_src("contiguous", "contiguous", 3), 2, LAYOUT_POLICY_NHWC, NULL);
  ck_assert(conv_is_cl(&p));
  arena_free(p.a);
  p = compile(conv_src("channels_last", "channels_last", 1), 2, LAYOUT_POLICY_NCHW, NULL);
  ck_assert(!conv_is_cl(&p));
  arena_free(p.a);
  /* -O0: PyTorch's layout stays (channels_last in -> channels_last conv) */
  p = compile(conv_src("channels_last", "contiguous", 3), 0, LAYOUT_POLICY_NCHW, NULL);
  ck_assert(conv_is_cl(&p));
  arena_free(p.a);
}
END_TEST

START_TEST(costs_row_per_target) {
  /* cuda and cuda:sm_NN take the cuda row, everything else the cpu row */
  const char *cpu[] = {"host", "x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", NULL};
  for (int i = 0; i < 6; i++) ck_assert_str_eq(pass_costs(cpu[i])->name, "cpu");
  ck_assert_str_eq(pass_costs("cuda")->name, "cuda");
  ck_assert_str_eq(pass_costs("cuda:sm_90a")->name, "cuda");
  ck_assert_ptr_eq(pass_costs("cuda:sm_80"), pass_costs_row("cuda"));
  const PassCosts *c = pass_costs("host"), *g = pass_costs("cuda");
  ck_assert(c->gflops == 55.0 && c->bw_gbs == 22.0 && c->fuse_multi_use_budget == 12);
  ck_assert(g->gflops == 50000.0 && g->bw_gbs == 3000.0 && g->fuse_multi_use_budget == 24);
}
END_TEST

START_TEST(layout_names_cost_model) {
  /* The same program's layout decision names the row that weighed it. */
  const char *src = conv_src("contiguous", "contiguous", 3);
  Prog p = compile_for(src, 2, LAYOUT_POLICY_AUTO, NULL, "host");
  char *text = report_text(&p);
  ck_assert_msg(strstr(text, "; cost model cpu (built-in): 22 GB/s, 55 GFLOP/s"), "%s", text);
  ck_assert_ptr_null(strstr(text, "cost model cuda"));
  free(text);
  arena_free(p.a);
  p = compile_for(src, 2, LAYOUT_POLICY_AUTO, NULL, "cuda");
  ck_assert_int_eq(report_count(p.r, "c", "choose-layout", "layout"), 1);
  text = report_text(&p);
  ck_assert_msg(strstr(text, "; cost model cuda (built-in): 3000 GB/s, 50000 GFLOP/s"), "%s", text);
  ck_assert_ptr_null(strstr(text, "cost model cpu"));
  free(text);
  arena_free(p.a);
}
END_TEST

START_TEST(layout_not_through_views) {
  /* y is read by a permute view: its strides are semantic, left alone. */
  Prog p = compile("kernel c(x: f32[2, 16, 12, 12], w: f32[16, 16, 1, 1]) -> f32[2, 12, 16, 12] {\n"
                   "  y = conv2d(x, w)\n"
                   "  return y.permute(0, 2, 1, 3)\n"
                   "}\n", 2, LAYOUT_POLICY_NHWC, NULL);
  ck_assert(!conv_is_cl(&p));
  ck_assert_int_eq(report_count(p.r, "c", "choose-layout", NULL), 0);
  arena_free(p.a);
}
END_TEST

/* ---- plan-memory ---- */

START_TEST(memory_chain_reuses) {
  /* fuse disabled: a, b, c, d all materialized; a is dead after b's
   * nest, so the chain needs two blocks: a, c in one, b in the other; d,
   * the result, is computed in the caller's output. */
  Prog p = compile("kernel f(x: f32[100]) -> f32[100] {\n"
                   "  a = x + 1.0\n  b = a * 2.0\n  c = b - 3.0\n  d = c * c\n"
                   "  return d\n}\n", 2, LAYOUT_POLICY_AUTO, "fuse");
  int sa = named(&p, "a")->slot, sb = named(&p, "b")->slot;
  ck_assert_int_gt(sa, 0);
  ck_assert_int_gt(sb, 0);
  ck_assert_int_ne(sa, sb);
  ck_assert_int_eq(named(&p, "c")->slot, sa);
  ck_assert_int_eq(named(&p, "d")->slot, 0);
  ck_assert_int_eq(named(&p, "d")->out, 1);
  ck_assert_int_eq(report_count(p.r, "f", "plan-memory", "in-place"), 1);
  /* (the scalar constants are materialized too, and reuse blocks) */
  ck_assert_int_ge(report_count(p.r, "f", "plan-memory", "reuse"), 2);
  /* two 400-byte blocks plus the scalar constants' (4 bytes each) */
  int64_t total;
  ck_assert(sym_is_const(ir_planned_scratch_bytes(p.m, p.m->kernels[0]), &total));
  ck_assert_int_ge(total, 800);
  ck_assert_int_lt(total, 800 + 64);
  arena_free(p.a);
}
END_TEST

START_TEST(memory_no_unprovable_reuse) {
  /* a [N] dies before b [M] is made, but M <= N is not provable: two
   * blocks; c [N] fits a's block exactly. */
  Prog p = compile("kernel f(x: f32[N], y: f32[M]) -> (f32[1], f32[1]) {\n"
                   "  a = x * 2.0\n  s = a.sum(0, keepdim=True)\n"
                   "  b = y * 3.0\n  t = b.sum(0, keepdim=True)\n"
                   "  c = x - 1.0\n"
                   "  return s + t, c.sum(0, keepdim=True)\n}\n", 2, LAYOUT_POLICY_AUTO, "fuse");
  int sa = named(&p, "a")->slot, sb = named(&p, "b")->slot;
  ck_assert_int_ne(sa, sb);
  ck_assert_int_eq(named(&p, "c")->slot, sa);
  arena_free(p.a);
}
END_TEST

START_TEST(slots_print_and_read_back) {
  Prog p = compile("kernel f(x: f32[10]) -> f32[10] {\n"
                   "  a = exp(x)\n  b = a.sum(0, keepdim=True)\n  return a * b\n}\n",
                   2, LAYOUT_POLICY_AUTO, NULL);
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  ir_print_module(f, p.m);
  fclose(f);
  ck_assert_ptr_nonnull(strstr(text, " slot 1"));
  ck_assert_ptr_nonnull(strstr(text, " inline"));
  Arena *a2 = arena_new();
  Diag d;
  diag_init(&d, "t.ir", text, stderr);
  IrModule *m2 = ir_read(a2, &d, "t.ir", text);
  ck_assert_ptr_nonnull(m2);
  char *text2 = NULL;
  size_t n2 = 0;
  f = open_memstream(&text2, &n2);
  ir_print_module(f, m2);
  fclose(f);
  ck_assert_str_eq(text, text2);
  free(text);
  free(text2);
  arena_free(a2);
  arena_free(p.a);
}
END_TEST

/* ---- compiled == interpreted ---- */

static const char *const exec_flags[] = {
    "-O2", "-O2 --disable-pass=fold-views", "-O2 --disable-pass=eliminate-copies",
    "-O2 --disable-pass=choose-layout", "-O2 --disable-pass=fuse",
    "-O2 --disable-pass=plan-memory", "-O2 --disable-pass=row-group", "-O2 --layout=nchw",
    "-O2 --layout=nhwc", "-O0"};

/* A conv chain with pooling, an elementwise tail with several uses, a
 * softmax, a mean subtracted back (a row group) and a reduction: every
 * pass has something to do. */
static const char exec_src[] =
    "kernel net(x: f32[2, 8, 10, 10] channels_last, w1: f32[8, 8, 3, 3], w2: f32[8, 8, 1, 1],"
    " b: f32[8]) -> (f32[2, 8, 5, 5], f32[2, 8]) {\n"
    "  y = relu(conv2d(x, w1, b, padding=1))\n"
    "  z = conv2d(y, w2) * 0.5 + y\n"
    "  p = max_pool2d(z, 2)\n"
    "  e = exp(p - 1.0)\n"
    "  s = softmax(e * e + e, 3)\n"
    "  return s - s.mean((2, 3), keepdim=true), s.sum((2, 3))\n"
    "}\n";

START_TEST(exec_equal_to_interpreter) {
  Lib L;
  build_flags(&L, exec_src, NULL, exec_flags[_i]);
  int64_t xs[4] = {2, 8, 10, 10}, xst[4] = {800, 1, 80, 8}, w1[4] = {8, 8, 3, 3},
          w2[4] = {8, 8, 1, 1}, bs[1] = {8}, o1[4] = {2, 8, 5, 5}, o2[2] = {2, 8};
  Ten in[4], out[2];
  ten(&in[0], DT_F32, 4, xs, xst, 0, false);
  ten(&in[1], DT_F32, 4, w1, NULL, 0, false);
  ten(&in[2], DT_F32, 4, w2, NULL, 0, false);
  ten(&in[3], DT_F32, 1, bs, NULL, 0, false);
  out_ten(&out[0], DT_F32, 4, o1);
  out_ten(&out[1], DT_F32, 2, o2);
  run_and_compare(&L, "net", in, 4, out, 2, true);
  for (int i = 0; i < 4; i++) ten_free(&in[i]);
  for (int i = 0; i < 2; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* K_info's scratch: the chain of memory_chain_reuses compiled without
 * fusion needs two 400-byte blocks (plus the scalar constants'), four
 * without plan-memory; a symbolic size gives -1 and the expression. */
static int64_t info_scratch(const char *src, const char *flags, const char **expr) {
  Lib L;
  build_flags(&L, src, NULL, flags);
  const tdsl_kernel_info *(*info)(void) = (const tdsl_kernel_info *(*)(void))sym(&L, "f_info");
  int64_t b = info()->scratch_bytes;
  static char text[128];
  snprintf(text, sizeof text, "%s", info()->scratch_expr);
  *expr = text;
  /* the header's comment gives the same expression */
  char path[160], head[4096], want[256];
  snprintf(path, sizeof path, "%s/k.h", L.dir);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  head[fread(head, 1, sizeof head - 1, f)] = '\0';
  fclose(f);
  snprintf(want, sizeof want, "/* f: scratch memory per call (f_info()->scratch_expr): %s bytes",
           text);
  ck_assert_msg(strstr(head, want), "'%s' not in the header:\n%s", want, head);
  unbuild(&L);
  return b;
}

START_TEST(info_scratch_bytes) {
  const char *chain = "kernel f(x: f32[100]) -> f32[100] {\n"
                      "  a = x + 1.0\n  b = a * 2.0\n  c = b - 3.0\n  d = c * c\n"
                      "  return d\n}\n";
  const char *e;
  int64_t planned = info_scratch(chain, "-O2 --disable-pass=fuse", &e);
  ck_assert_int_ge(planned, 800);
  ck_assert_int_lt(planned, 864);
  int64_t unplanned = info_scratch(chain, "-O2 --disable-pass=fuse --disable-pass=plan-memory", &e);
  ck_assert_int_ge(unplanned, 1600);
  ck_assert_int_eq(info_scratch(chain, "-O2", &e), 0); /* all fused */
  ck_assert_int_eq(info_scratch("kernel f(x: f32[N]) -> f32[1] {\n"
                                "  return exp(x).sum(0, keepdim=True) + softmax(x, 0).sum(0, keepdim=True)\n}\n",
                                "-O2", &e), -1);
  /* simplified: a row-major buffer of N elements needs max(N, 1), not
   * max(N - 1, 0) + 1 (plus the softmax row statistics, 16 bytes) */
  ck_assert_str_eq(e, "4*max(N, 1) + 16");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("passes_opt");
  TCase *t = tcase_create("ir");
  tcase_add_test(t, fuse_single_use_chain);
  tcase_add_test(t, fuse_o0_and_disabled_flag_nothing);
  tcase_add_test(t, fuse_multi_use_budget);
  tcase_add_test(t, fuse_budget_per_target);
  tcase_add_test(t, fuse_blockers);
  tcase_add_test(t, fuse_into_scans);
  tcase_add_test(t, layout_follows_cost);
  tcase_add_test(t, layout_overrides);
  tcase_add_test(t, costs_row_per_target);
  tcase_add_test(t, layout_names_cost_model);
  tcase_add_test(t, layout_not_through_views);
  tcase_add_test(t, memory_chain_reuses);
  tcase_add_test(t, memory_no_unprovable_reuse);
  tcase_add_test(t, slots_print_and_read_back);
  suite_add_tcase(s, t);
  TCase *e = tcase_create("exec");
  tcase_set_timeout(e, 300);
  tcase_add_test(e, info_scratch_bytes);
  tcase_add_loop_test(e, exec_equal_to_interpreter, 0,
                      (int)(sizeof exec_flags / sizeof exec_flags[0]));
  suite_add_tcase(s, e);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed != 0;
}
