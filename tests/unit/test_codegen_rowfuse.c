/* test_codegen_rowfuse.c — fusion across reductions (pass row-group,
 * passes/row_group.c; ir/row_groups.c; loops/lower.c lower_values):
 * which reductions and readers form a row group in the loop form (nest
 * group/shared) and which must not, the report's sentence, plan-memory's
 * lifetime rule for grouped values, the annotation through the IR
 * printer, reader and verifier, and compiled groups bitwise equal to the
 * same kernels compiled without the pass (-O1, -O2; 1, 2 and 3 threads)
 * and within tolerance of the interpreter.
 * Needs: the front end, passes, loops/ (lf_lower), tdslc (TDSL_TDSLC), a
 * C compiler and the runtime sources (codegen_util.h). */
#include "codegen_util.h"
#include "loops/loops.h"
#include "passes/passes.h"

/* ---- IR and loop form ---- */

typedef struct Prog {
  Arena *a;
  IrModule *m;
  Report *r;
} Prog;

static Prog compile(const char *src, int opt, const char *disabled) {
  Prog p = {.a = arena_new()};
  Diag d;
  diag_init(&d, "t.tdsl", src, stderr);
  AstProgram *ast = parse_program(p.a, &d, src);
  ck_assert_ptr_nonnull(ast);
  p.m = sema_program(p.a, &d, ast, "t.tdsl");
  ck_assert_ptr_nonnull(p.m);
  const char *dis[1] = {disabled};
  PassOptions o = {.opt_level = opt, .disabled = dis, .ndisabled = disabled != NULL,
                   .target = "host"};
  p.r = report_new(p.a, "t.tdsl", "host");
  ck_assert_int_eq(pipeline_run(p.m, &o, p.r), 0);
  ck_assert_int_eq(ir_verify(p.m, stderr), 0);
  return p;
}

/* Row groups of kernel 0's loop form at opt: sizes[i] nests sharing
 * shared[i] loops; returns how many. */
static int groups(const Prog *p, int opt, int *sizes, int *shared) {
  LfKernel *lk = lf_lower(p->m, p->m->kernels[0], opt);
  int n = 0;
  for (int i = 0; i < lk->nnests; i++) {
    const LfNest *g = &lk->nests[i];
    if (g->group <= 1) {
      ck_assert_int_eq(g->shared, 0);
      continue;
    }
    ck_assert_int_ge(g->shared, 1);
    ck_assert_int_le(i + g->group, lk->nnests);
    for (int j = 1; j < g->group; j++) { /* the members share the rows */
      const LfNest *m = &g[j];
      ck_assert_int_eq(m->group, 0);
      ck_assert_int_ge(m->rank, g->shared);
      for (int l = 0; l < g->shared; l++) ck_assert_ptr_eq(m->shape[l], g->shape[l]);
    }
    sizes[n] = g->group;
    shared[n++] = g->shared;
    i += g->group - 1;
  }
  return n;
}

/* The one group of src at -O2: `size` nests sharing `rows` loops. */
static void one_group(const char *src, int size, int rows) {
  Prog p = compile(src, 2, NULL);
  int s[8], sh[8];
  ck_assert_int_eq(groups(&p, 2, s, sh), 1);
  ck_assert_int_eq(s[0], size);
  ck_assert_int_eq(sh[0], rows);
  ck_assert_int_eq(groups(&p, 0, s, sh), 0); /* -O0: one nest after another */
  arena_free(p.a);
  p = compile(src, 2, "row-group");
  ck_assert_int_eq(groups(&p, 2, s, sh), 0);
  arena_free(p.a);
}

static void no_group(const char *src) {
  Prog p = compile(src, 2, NULL);
  int s[8], sh[8];
  ck_assert_int_eq(groups(&p, 2, s, sh), 0);
  for (IrRef r = 0; r < p.m->kernels[0]->nvalues; r++)
    ck_assert_int_eq(p.m->kernels[0]->values[r].group, 0);
  arena_free(p.a);
}

static const char *CENTER =
    "kernel f(x: f32[M, K]) -> f32[M, K] {\n"
    "  return x - x.mean(-1, keepdim=true)\n}\n";
static const char *RMS =
    "kernel f(x: f32[M, K], w: f32[K]) -> f32[M, K] {\n"
    "  return x * rsqrt((x * x).mean(-1, keepdim=true) + 1e-6) * w\n}\n";
static const char *SOFTMAX =
    "kernel f(x: f32[M, K]) -> f32[M, K] {\n"
    "  e = (x - x.amax(-1, keepdim=true)).exp()\n"
    "  return e / e.sum(-1, keepdim=true)\n}\n";
static const char *LAYERNORM =
    "kernel f(x: f32[B, T, C], w: f32[C], b: f32[C]) -> f32[B, T, C] {\n"
    "  m = x.mean(-1, keepdim=true)\n"
    "  d = x - m\n"
    "  v = (d * d).mean(-1, keepdim=true)\n"
    "  return d / (v + 1e-5).sqrt() * w + b\n}\n";
static const char *GROUPNORM =
    "kernel f(x: f32[N, 6, H, W], w: f32[6]) -> f32[N, 6, H, W] {\n"
    "  xg = x.view(N, 3, 2 * H * W)\n"
    "  m = xg.mean(-1, keepdim=true)\n"
    "  d = xg - m\n"
    "  v = (d * d).mean(-1, keepdim=true)\n"
    "  return (d * rsqrt(v + 1e-5)).view(N, 6, H, W) * w.view(6, 1, 1)\n}\n";
static const char *UNSQUEEZE =
    "kernel f(x: f32[M, K]) -> f32[M, K] {\n"
    "  return x / x.sum(1).unsqueeze(1)\n}\n";
static const char *TWO_DIMS =
    "kernel f(x: f64[A, B, C]) -> f64[A, B, C] {\n"
    "  return x - x.mean([1, 2], keepdim=true)\n}\n";

START_TEST(grouped_in_the_loop_form) {
  one_group(CENTER, 2, 1);
  one_group(RMS, 2, 1);
  one_group(SOFTMAX, 3, 1);   /* amax, sum of exp, divide */
  one_group(LAYERNORM, 3, 2); /* mean, variance, normalize over [B, T] */
  one_group(GROUPNORM, 3, 2); /* over [N, 3] of the view */
  one_group(UNSQUEEZE, 2, 1);
  one_group(TWO_DIMS, 2, 1);
}
END_TEST

START_TEST(not_grouped) {
  /* a reduction over the leading dim: no rows */
  no_group("kernel f(x: f32[M, K]) -> f32[M, K] {\n"
           "  return x - x.mean(0, keepdim=true)\n}\n");
  /* a reduction over a middle dim: not trailing */
  no_group("kernel f(x: f32[A, B, C]) -> f32[A, B, C] {\n"
           "  return x - x.mean(1, keepdim=true)\n}\n");
  /* the reader reads the statistic of another row (transposed) */
  no_group("kernel f(x: f32[M, M]) -> f32[M, M] {\n"
           "  return x - x.sum(-1, keepdim=true).t()\n}\n");
  /* a value outside the group, computed after the mean, read by the
   * last step */
  no_group("kernel f(x: f32[M, K]) -> f32[M, K] {\n"
           "  m = x.mean(-1, keepdim=true)\n"
           "  c = (x - m).sum(0, keepdim=true)\n"
           "  return x - m - c\n}\n");
  /* rows of other extents: the reader is over [K, M] */
  no_group("kernel f(x: f32[M, K], y: f32[K, M]) -> f32[K, M] {\n"
           "  return y - x.sum(-1).unsqueeze(0)\n}\n");
}
END_TEST

/* A statistic also returned, read by a later nest outside the group:
 * still grouped, its buffer kept for the later reader. */
START_TEST(member_read_outside) {
  Prog p = compile("kernel f(x: f32[M, K]) -> (f32[M, K], f32[1, 1], f32[M, 1]) {\n"
                   "  m = x.amax(-1, keepdim=true)\n"
                   "  return x - m, (m * 2.0).sum(0, keepdim=true), m\n}\n", 2, NULL);
  int s[8], sh[8];
  ck_assert_int_eq(groups(&p, 2, s, sh), 1);
  ck_assert_int_eq(s[0], 2);
  arena_free(p.a);
}
END_TEST

/* ---- the report ---- */

static char *report_text(const Prog *p) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  report_write_text(p->r, f);
  fclose(f);
  return text;
}

START_TEST(report_names_the_group) {
  Prog p = compile(CENTER, 2, NULL);
  char *t = report_text(&p);
  ck_assert_msg(strstr(t, "t.tdsl:2:16: row-group: row group: mean (2:16), sub (2:12) run "
                          "one row at a time over [M] (the 1 leading dim): they read each "
                          "row of x once while it is in cache, 4*M*K bytes not read again "
                          "from memory\n"), "%s", t);
  ck_assert_int_eq(report_count(p.r, "f", "row-group", "row group"), 1);
  free(t);
  arena_free(p.a);
  p = compile(RMS, 2, NULL);
  t = report_text(&p);
  ck_assert_msg(strstr(t, "row group: mean (2:28), mul (2:59) run one row at a time over [M] "
                          "(the 1 leading dim), computing mul (2:23), add (2:51), rsqrt "
                          "(2:14), mul (2:12) inside them"), "%s", t);
  free(t);
  arena_free(p.a);
  p = compile("kernel f(x: f32[M, M]) -> f32[M, M] {\n"
              "  return x - x.sum(-1, keepdim=true).t()\n}\n", 2, NULL);
  t = report_text(&p);
  ck_assert_msg(strstr(t, "row-group: not grouped: no row group for sum (2:16): its reader "
                          "sub (2:12) reads it row by row, but it reads sum (2:16) at other "
                          "rows than its own (not row-local)"), "%s", t);
  free(t);
  arena_free(p.a);
}
END_TEST

/* ---- plan-memory: grouped values never share a block ---- */

/* Whether a and b's storage roots share a plan-memory slot. */
static bool share(const IrKernel *k, IrRef a, IrRef b) {
  const IrValue *x = ir_val(k, ir_storage_root(k, a)), *y = ir_val(k, ir_storage_root(k, b));
  return a != b && x->slot > 0 && x->slot == y->slot;
}

/* Pairs (member, member) and (member, value a member reads) sharing a
 * block, in kernel 0. */
static int member_conflicts(const Prog *p) {
  const IrKernel *k = p->m->kernels[0];
  int n = 0;
  for (IrRef a = 0; a < k->nvalues; a++) {
    const IrValue *v = ir_val(k, a);
    if (v->group == 0) continue;
    for (IrRef b = a + 1; b < k->nvalues; b++)
      if (ir_val(k, b)->group == v->group && share(k, a, b)) n++;
    for (int j = 0; j < v->nargs; j++)
      if (share(k, a, v->args[j])) n++;
  }
  return n;
}

/* A softmax-like chain with nothing inlined (fuse disabled): six members
 * of [M, K] and [M, 1].  Value order alone lets e * e take the block of
 * x - max (dead after exp) and the sum the block of the max; grouped,
 * rows interleave (row 1's max is written after row 0's sum), so
 * members keep blocks of their own. */
static const char *SOFTMAX_CL =
    "kernel f(x: f32[M, K]) -> f32[M, K] {\n"
    "  s = x - x.amax(-1, keepdim=true)\n"
    "  e = s.exp()\n"
    "  t = e * e\n"
    "  return t / t.sum(-1, keepdim=true)\n}\n";

START_TEST(plan_memory_keeps_members_apart) {
  Prog p = compile(SOFTMAX_CL, 2, "fuse");
  const IrKernel *k = p.m->kernels[0];
  int members = 0;
  for (IrRef r = 0; r < k->nvalues; r++) members += k->values[r].group > 0;
  ck_assert_int_eq(members, 6);
  ck_assert_int_eq(member_conflicts(&p), 0);
  /* a block is reused only between values whose lifetimes (in execution
   * order) do not overlap: none of the members' here */
  for (IrRef a = 0; a < k->nvalues; a++)
    for (IrRef b = a + 1; b < k->nvalues; b++)
      if (k->values[a].group > 0 && k->values[b].group > 0)
        ck_assert_msg(!share(k, a, b), "%%%d and %%%d share slot %d", a, b, k->values[a].slot);
  arena_free(p.a);
  /* without the group the same program reuses blocks along the chain */
  const char *dis[2] = {"fuse", "row-group"};
  p.a = arena_new();
  Diag d;
  diag_init(&d, "t.tdsl", SOFTMAX_CL, stderr);
  p.m = sema_program(p.a, &d, parse_program(p.a, &d, SOFTMAX_CL), "t.tdsl");
  PassOptions o = {.opt_level = 2, .disabled = dis, .ndisabled = 2, .target = "host"};
  ck_assert_int_eq(pipeline_run(p.m, &o, NULL), 0);
  k = p.m->kernels[0];
  int reused = 0;
  for (IrRef a = 0; a < k->nvalues; a++)
    for (IrRef b = a + 1; b < k->nvalues; b++) reused += share(k, a, b);
  ck_assert_int_ge(reused, 1);
  arena_free(p.a);
}
END_TEST

/* The hazard the rule prevents: a (x.t() - max, stored column-major)
 * dies at its last reader c, so in value order b (row-major, same size)
 * may take its block; grouped, b's row 0 would land on a's later rows,
 * which a writes after it (row 1's a[1, 0] is b[0, 1]), and the result
 * copy would read a's values as b's.  Grouped, b keeps its own block,
 * and the compiled kernel agrees with the interpreter. */
static const char *CLOBBER =
    "kernel f(x: f32[6, 5], y: f32[5, 6]) -> (f32[5, 6] strided, f32[5, 1]) {\n"
    "  xt = x.t()\n"
    "  a = xt - xt.amax(-1, keepdim=true)\n"
    "  c = a.sum(-1, keepdim=true)\n"
    "  b = y * c\n"
    "  return b, c\n}\n";

/* The values named a and b (the last bound to each name). */
static void named_ab(const IrKernel *k, IrRef *a, IrRef *b) {
  *a = *b = -1;
  for (IrRef r = 0; r < k->nvalues; r++) {
    const char *n = k->values[r].name;
    if (n && !strcmp(n, "a")) *a = r;
    if (n && !strcmp(n, "b")) *b = r;
  }
  ck_assert(*a >= 0 && *b >= 0);
}

START_TEST(plan_memory_no_clobber_across_rows) {
  IrRef a, b;
  Prog p = compile(CLOBBER, 2, "fuse");
  const IrKernel *k = p.m->kernels[0];
  named_ab(k, &a, &b);
  ck_assert_int_gt(k->values[a].group, 0);
  ck_assert_int_eq(k->values[b].group, k->values[a].group);
  ck_assert_msg(!share(k, a, b), "a and b share slot %d", k->values[a].slot);
  arena_free(p.a);
  /* ungrouped (one nest after the other) the block is b's to take */
  const char *dis[2] = {"fuse", "row-group"};
  p.a = arena_new();
  Diag d;
  diag_init(&d, "t.tdsl", CLOBBER, stderr);
  p.m = sema_program(p.a, &d, parse_program(p.a, &d, CLOBBER), "t.tdsl");
  PassOptions o = {.opt_level = 2, .disabled = dis, .ndisabled = 2, .target = "host"};
  ck_assert_int_eq(pipeline_run(p.m, &o, NULL), 0);
  named_ab(p.m->kernels[0], &a, &b);
  ck_assert(share(p.m->kernels[0], a, b));
  arena_free(p.a);
  Lib L;
  build_flags(&L, CLOBBER, NULL, "-O2 --disable-pass=fuse");
  int64_t xs[2] = {6, 5}, ys[2] = {5, 6}, cs[2] = {5, 1};
  Ten in[2], out[2];
  ten(&in[0], DT_F32, 2, xs, NULL, 0, false);
  ten(&in[1], DT_F32, 2, ys, NULL, 0, false);
  out_ten(&out[0], DT_F32, 2, ys);
  out_ten(&out[1], DT_F32, 2, cs);
  run_and_compare(&L, "f", in, 2, out, 2, true);
  for (int i = 0; i < 2; i++) ten_free(&in[i]), ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* A non-member between the group's members runs after the group
 * (ir_exec_order), and may take the block of a member only once no
 * member reads it any more. */
START_TEST(exec_order_moves_members_together) {
  Prog p = compile("kernel f(x: f32[M, K], y: f32[M, K]) -> (f32[M, K], f32[M, K]) {\n"
                   "  m = x.mean(-1, keepdim=true)\n"
                   "  z = (y * 3.0).exp().sum(0, keepdim=true)\n"
                   "  return x - m, y - z\n}\n", 2, NULL);
  const IrKernel *k = p.m->kernels[0];
  int n = k->nvalues, pos[64], first = -1, last = -1, z = -1;
  ck_assert_int_lt(n, 63);
  ir_exec_order(k, NULL, pos);
  for (IrRef r = 0; r < n; r++) {
    if (k->values[r].group > 0) {
      if (first < 0 || pos[r] < first) first = pos[r];
      if (pos[r] > last) last = pos[r];
    }
    if (k->values[r].name && !strcmp(k->values[r].name, "z")) z = r;
  }
  ck_assert_int_eq(last - first, 1);  /* consecutive */
  ck_assert_int_gt(pos[z], last);     /* the column sum after the group */
  arena_free(p.a);
}
END_TEST

/* ---- the IR text and the verifier ---- */

START_TEST(ir_round_trip_and_verifier) {
  Prog p = compile(LAYERNORM, 2, NULL);
  char *text = NULL, *again = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  ir_print_module(f, p.m);
  fclose(f);
  ck_assert_ptr_nonnull(strstr(text, " group 1 rows 2 "));
  Arena *a = arena_new();
  Diag d;
  diag_init(&d, "t.ir", text, stderr);
  IrModule *m = ir_read(a, &d, "t.ir", text);
  ck_assert_ptr_nonnull(m);
  ck_assert_int_eq(ir_verify(m, stderr), 0);
  f = open_memstream(&again, &n);
  ir_print_module(f, m);
  fclose(f);
  ck_assert_str_eq(text, again);
  /* a group of one, and members of different rows, are rejected */
  IrKernel *k = m->kernels[0];
  IrRef first = -1;
  for (IrRef r = 0; r < k->nvalues; r++)
    if (k->values[r].group > 0) {
      if (first < 0) first = r;
      else k->values[r].group = 0, k->values[r].rows = 0;
    }
  FILE *null = fopen("/dev/null", "w");
  ck_assert_int_gt(ir_verify(m, null), 0);
  k->values[first].group = 0, k->values[first].rows = 0;
  ck_assert_int_eq(ir_verify(m, null), 0);
  k->values[first].rows = 1; /* rows without a group */
  ck_assert_int_gt(ir_verify(m, null), 0);
  fclose(null);
  free(text), free(again);
  arena_free(a);
  arena_free(p.a);
}
END_TEST

/* ---- compiled: bitwise the ungrouped nests' results ---- */

static const char *KERNELS =
    "kernel center(x: f32[M, K]) -> f32[M, K] {\n"
    "  return x - x.mean(-1, keepdim=true)\n}\n"
    "kernel rms(x: f32[M, K], w: f32[K]) -> f32[M, K] {\n"
    "  return x * rsqrt((x * x).mean(-1, keepdim=true) + 1e-6) * w\n}\n"
    "kernel sm(x: f32[M, K]) -> (f32[M, K], f32[M, K]) {\n"
    "  e = (x - x.amax(-1, keepdim=true)).exp()\n"
    "  s = x - x.amax(-1, keepdim=true)\n"
    "  return e / e.sum(-1, keepdim=true), s - s.exp().sum(-1, keepdim=true).log()\n}\n"
    "kernel ln(x: f32[M, K], w: f32[K]) -> (f32[M, K], f32[M, 1]) {\n"
    "  m = x.mean(-1, keepdim=true)\n"
    "  d = x - m\n"
    "  v = (d * d).mean(-1, keepdim=true)\n"
    "  return d / (v + 1e-5).sqrt() * w, v\n}\n"
    "kernel half(x: f16[M, K], y: bf16[M, K]) -> (f16[M, K], bf16[M, K]) {\n"
    "  return x - x.mean(-1, keepdim=true), y / y.sum(-1, keepdim=true)\n}\n"
    "kernel dbl(x: f64[M, K]) -> f64[M, K] {\n"
    "  return x - x.mean(-1, keepdim=true)\n}\n";

typedef struct Case {
  const char *name;
  int nin, nout;
  DType in[2], out[2];
  bool wvec; /* input 1 is a [K] vector */
  bool stat; /* output 1 is [M, 1] */
} Case;

static const Case CASES[] = {
    {"center", 1, 1, {DT_F32}, {DT_F32}, false, false},
    {"rms", 2, 1, {DT_F32, DT_F32}, {DT_F32}, true, false},
    {"sm", 1, 2, {DT_F32}, {DT_F32, DT_F32}, false, false},
    {"ln", 2, 2, {DT_F32, DT_F32}, {DT_F32, DT_F32}, true, true},
    {"half", 2, 2, {DT_F16, DT_BF16}, {DT_F16, DT_BF16}, false, false},
    {"dbl", 1, 1, {DT_F64}, {DT_F64}, false, false},
};

/* Runs case c on [m, k] in the grouped (G) and ungrouped (U) builds:
 * outputs bitwise equal; G within tolerance of the interpreter, at 1, 2
 * and 3 threads bitwise equal. */
static void same_bits(Lib *G, Lib *U, const Case *c, int64_t m, int64_t k, bool threads) {
  int64_t s[2] = {m, k}, sv[1] = {k}, ss[2] = {m, 1};
  Ten in[2], og[2], ou[2];
  for (int i = 0; i < c->nin; i++)
    ten(&in[i], c->in[i], i == 1 && c->wvec ? 1 : 2, i == 1 && c->wvec ? sv : s, NULL, 0, false);
  for (int i = 0; i < c->nout; i++) {
    out_ten(&og[i], c->out[i], 2, i == 1 && c->stat ? ss : s);
    out_ten(&ou[i], c->out[i], 2, i == 1 && c->stat ? ss : s);
  }
  call_ok(U, c->name, in, c->nin, ou, c->nout);
  call_ok(G, c->name, in, c->nin, og, c->nout);
  for (int i = 0; i < c->nout; i++)
    ck_assert_msg(same_bytes(&og[i], &ou[i]), "%s [%lld, %lld] out%d: grouped differs from "
                  "ungrouped", c->name, (long long)m, (long long)k, i);
  if (threads) threads_and_reference(G, c->name, in, c->nin, og, c->nout, true);
  else run_and_compare(G, c->name, in, c->nin, og, c->nout, true);
  for (int i = 0; i < c->nin; i++) ten_free(&in[i]);
  for (int i = 0; i < c->nout; i++) ten_free(&og[i]), ten_free(&ou[i]);
}

static void bits_at(const char *opt) {
  Lib G, U;
  char flags[64];
  build_flags(&G, KERNELS, NULL, opt);
  snprintf(flags, sizeof flags, "%s --disable-pass=row-group", opt);
  build_flags(&U, KERNELS, NULL, flags);
  /* rows split unevenly over threads, long rows (the cascade's blocks,
   * vector remainders), short ones, no rows (amax rejects empty rows) */
  int64_t shapes[][2] = {{257, 1031}, {33, 7}, {5, 1}, {1, 4099}, {0, 5}};
  for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; c++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      same_bits(&G, &U, &CASES[c], shapes[i][0], shapes[i][1], i == 0);
  unbuild(&G);
  unbuild(&U);
}

START_TEST(bitwise_o2) { bits_at("-O2"); }
END_TEST

START_TEST(bitwise_o1) { bits_at("-O1"); }
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_rowfuse");
  TCase *t = tcase_create("rowfuse");
  tcase_set_timeout(t, 240);
  tcase_add_test(t, grouped_in_the_loop_form);
  tcase_add_test(t, not_grouped);
  tcase_add_test(t, member_read_outside);
  tcase_add_test(t, report_names_the_group);
  tcase_add_test(t, plan_memory_keeps_members_apart);
  tcase_add_test(t, plan_memory_no_clobber_across_rows);
  tcase_add_test(t, exec_order_moves_members_together);
  tcase_add_test(t, ir_round_trip_and_verifier);
  tcase_add_test(t, bitwise_o2);
  tcase_add_test(t, bitwise_o1);
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
