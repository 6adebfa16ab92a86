/* test_costs.c — cost files and calibration (passes/costs_file.c,
 * driver/calibrate.c): a file parses over the built-in row of its
 * family; every malformed file is rejected with "path:line: error: ..."
 * (a table of bad inputs and a few thousand deterministic garbage
 * inputs, none of which may crash); pass_costs_write and
 * pass_costs_parse round-trip; a crafted row turns choose-layout's
 * decision where its numbers say so, and the report names the file; and
 * tdslc --calibrate=quick writes a file that --costs and TDSL_COSTS read
 * back.
 * Needs: tdslc_core (front end, passes), tdslc (TDSL_TDSLC), a C compiler
 * for --calibrate's link step. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/ast.h"
#include "passes/passes.h"

/* Parses text as "t.costs"; the messages go to *msg (malloc'd). */
static bool parse(Arena *a, const char *text, PassCosts *pc, char **msg) {
  size_t n = 0;
  FILE *err = open_memstream(msg, &n);
  bool ok = pass_costs_parse(a, "t.costs", text, pc, err);
  fclose(err);
  return ok;
}

START_TEST(parse_good) {
  Arena *a = arena_new();
  PassCosts pc;
  char *msg;
  const char *text = "# a comment\r\n\r\n   # another\n"
                     "tdsl-costs 1\r\n"
                     "family\tcpu  \n"
                     "machine Some CPU @ 2.0GHz # not a comment\n"
                     "date today\n"
                     "  gflops 80.5\n"
                     "conv_eff_nhwc_kxk 1.25\n"
                     "ns_runs_1x1 0\n"
                     "few_channels 8\n"
                     "fuse_multi_use_budget 0";
  ck_assert_msg(parse(a, text, &pc, &msg), "%s", msg);
  ck_assert_str_eq(msg, "");
  const PassCosts *cpu = pass_costs_row("cpu");
  ck_assert_str_eq(pc.name, "cpu");
  ck_assert_str_eq(pc.source, "t.costs");
  ck_assert(pc.gflops == 80.5 && pc.conv_eff_nhwc_kxk == 1.25 && pc.ns_runs_1x1 == 0);
  ck_assert_int_eq(pc.few_channels, 8);
  ck_assert_int_eq(pc.fuse_multi_use_budget, 0);
  /* what the file leaves out is the built-in row's */
  ck_assert(pc.bw_gbs == cpu->bw_gbs && pc.f_strided == cpu->f_strided);
  ck_assert(pc.ns_gather_kxk == cpu->ns_gather_kxk);
  ck_assert_ptr_null(cpu->source);
  free(msg);
  /* a cuda file starts from the cuda row */
  ck_assert(parse(a, "tdsl-costs 1\nfamily cuda\nbw_gbs 2000\n", &pc, &msg));
  ck_assert_str_eq(pc.name, "cuda");
  ck_assert(pc.bw_gbs == 2000 && pc.gflops == pass_costs_row("cuda")->gflops);
  free(msg);
  char buf[64];
  ck_assert_str_eq(pass_costs_label(&pc, buf, sizeof buf), "cuda from t.costs");
  ck_assert_str_eq(pass_costs_label(cpu, buf, sizeof buf), "cpu (built-in)");
  arena_free(a);
}
END_TEST

/* Malformed files and the first message each must give. */
static const struct {
  const char *text, *msg;
} bad[] = {
    {"", "t.costs: error: empty cost file"},
    {"# only a comment\n\n", "t.costs: error: empty cost file"},
    {"family cpu\n", "t.costs:1: error: not a tdsl cost file"},
    {"tdsl-costs\n", "t.costs:1: error: tdsl-costs: expected a version number, got ''"},
    {"tdsl-costs1\n", "t.costs:1: error: not a tdsl cost file"},
    {"tdsl-costs 1.5\n", "t.costs:1: error: tdsl-costs: expected a version number"},
    {"tdsl-costs 0\nfamily cpu\n", "t.costs:1: error: cost file version 0; this tdslc reads version 1"},
    {"tdsl-costs 2\n", "t.costs:1: error: cost file version 2"},
    {"tdsl-costs 1\n", "t.costs: error: no 'family' line"},
    {"tdsl-costs 1\ngflops 3\n", "t.costs: error: no 'family' line"},
    {"tdsl-costs 1\nfamily gpu\n", "t.costs:2: error: family: expected cpu or cuda, got 'gpu'"},
    {"tdsl-costs 1\nfamily\n", "t.costs:2: error: family: expected cpu or cuda, got ''"},
    {"tdsl-costs 1\nfamily cpu\nfamily cpu\n", "t.costs:3: error: 'family' is given twice (first at line 2)"},
    {"tdsl-costs 1\nfamily cpu\ngflops\n", "t.costs:3: error: gflops needs a value"},
    {"tdsl-costs 1\nfamily cpu\ngflops 0\n", "t.costs:3: error: gflops must be greater than 0, got 0"},
    {"tdsl-costs 1\nfamily cpu\nbw_gbs -5\n", "t.costs:3: error: bw_gbs must be greater than 0"},
    {"tdsl-costs 1\nfamily cpu\nbw_gbs 5 GB/s\n", "t.costs:3: error: bw_gbs: '5 GB/s' is not a number"},
    {"tdsl-costs 1\nfamily cpu\nbw_gbs nan\n", "t.costs:3: error: bw_gbs: 'nan' is out of range"},
    {"tdsl-costs 1\nfamily cpu\nbw_gbs inf\n", "t.costs:3: error: bw_gbs: 'inf' is out of range"},
    {"tdsl-costs 1\nfamily cpu\nbw_gbs 1e400\n", "t.costs:3: error: bw_gbs: '1e400' is out of range"},
    {"tdsl-costs 1\nfamily cpu\nns_gather_kxk -0.1\n", "t.costs:3: error: ns_gather_kxk must be 0 or more"},
    {"tdsl-costs 1\nfamily cpu\nfew_channels 0\n", "t.costs:3: error: few_channels must be an integer from 1"},
    {"tdsl-costs 1\nfamily cpu\nfew_channels 2.5\n", "t.costs:3: error: few_channels must be an integer"},
    {"tdsl-costs 1\nfamily cpu\nfuse_multi_use_budget 1e9\n", "t.costs:3: error: fuse_multi_use_budget must be an integer from 0 to 1000"},
    {"tdsl-costs 1\nfamily cpu\nGFLOPS 3\n", "t.costs:3: error: unknown key 'GFLOPS'"},
    {"tdsl-costs 1\nfamily cpu\nname cuda\n", "t.costs:3: error: unknown key 'name'"},
    {"tdsl-costs 1\nfamily cpu\nsource x\n", "t.costs:3: error: unknown key 'source'"},
    {"tdsl-costs 1\n\nfamily cpu\n\ngflops 1\ngflops 2\n", "t.costs:6: error: 'gflops' is given twice (first at line 5)"},
    {"\xef\xbb\xbftdsl-costs 1\nfamily cpu\n", "t.costs:1: error: not a tdsl cost file"},
    {"tdsl-costs 1\nfamily cpu\n\xff\xfe 1\n", "t.costs:3: error: unknown key"},
};

START_TEST(parse_bad) {
  Arena *a = arena_new();
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    PassCosts pc;
    char *msg;
    ck_assert_msg(!parse(a, bad[i].text, &pc, &msg), "accepted: %s", bad[i].text);
    ck_assert_msg(!strncmp(msg, bad[i].msg, strlen(bad[i].msg)), "case %zu: got '%s', want '%s'",
                  i, msg, bad[i].msg);
    free(msg);
  }
  /* a long line, and many errors: a bounded list */
  char *text = malloc(5000);
  strcpy(text, "tdsl-costs 1\nfamily cpu\ngflops ");
  memset(text + strlen(text), '1', 1000);
  strcpy(text + strlen(text) - 1, "\n");
  PassCosts pc;
  char *msg;
  ck_assert(!parse(a, text, &pc, &msg));
  ck_assert_msg(strstr(msg, "t.costs:3: error: line too long"), "%s", msg);
  free(msg);
  strcpy(text, "tdsl-costs 1\nfamily cpu\n");
  for (int i = 0; i < 30; i++) strcat(text, "bogus 1\n");
  ck_assert(!parse(a, text, &pc, &msg));
  ck_assert_msg(strstr(msg, "t.costs: error: 22 more errors not shown"), "%s", msg);
  free(msg);
  free(text);
  arena_free(a);
}
END_TEST

START_TEST(parse_garbage) {
  /* Deterministic garbage: random bytes, and valid files with random
   * edits; each either parses or says why, never crashes. */
  Arena *a = arena_new();
  char valid[2048];
  FILE *f = fmemopen(valid, sizeof valid, "w");
  pass_costs_write(f, pass_costs_row("cpu"), "m", "d");
  fclose(f);
  size_t vn = strlen(valid);
  unsigned seed = 12345;
  char text[4096];
  for (int iter = 0; iter < 3000; iter++) {
    size_t n;
    if (iter % 2) {
      n = vn;
      memcpy(text, valid, n);
      for (int e = 0; e < 1 + iter % 5; e++) {
        seed = seed * 1103515245u + 12345u;
        size_t at = (seed >> 8) % n;
        seed = seed * 1103515245u + 12345u;
        text[at] = (char)(seed >> 16);
      }
    } else {
      seed = seed * 1103515245u + 12345u;
      n = (seed >> 8) % 300;
      for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        text[i] = " \n\t#.-e0123456789abcdefgilnostuw_\r\x80"[(seed >> 16) % 36];
      }
    }
    text[n] = '\0';
    PassCosts pc;
    char *msg;
    bool ok = parse(a, text, &pc, &msg);
    if (ok) {
      ck_assert(pc.gflops > 0 && pc.bw_gbs > 0 && isfinite(pc.gflops));
    } else {
      ck_assert_msg(!strncmp(msg, "t.costs", 7) && strstr(msg, "error: "), "%s", msg);
    }
    free(msg);
  }
  arena_free(a);
}
END_TEST

/* The text pass_costs_write writes for pc (malloc'd). */
static char *written(const PassCosts *pc, const char *machine) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  pass_costs_write(f, pc, machine, "2026-11-26T00:00:00Z");
  fclose(f);
  return text;
}

START_TEST(round_trip) {
  Arena *a = arena_new();
  PassCosts row = *pass_costs_row("cpu");
  row.gflops = 123.456789;
  row.ns_runs_1x1 = 0;
  row.conv_eff_nchw_fewc = 1.0 / 3;
  row.few_channels = 24;
  char *t1 = written(&row, "A CPU\nwith a newline");
  ck_assert_msg(strstr(t1, "\nmachine A CPU with a newline\n"), "%s", t1);
  PassCosts back;
  char *msg;
  ck_assert_msg(parse(a, t1, &back, &msg), "%s", msg);
  free(msg);
  ck_assert_str_eq(back.name, "cpu");
  double got[] = {back.gflops, back.bw_gbs, back.f_strided, back.conv_eff_nchw_fewc,
                  back.ns_gather_kxk, back.ns_runs_1x1};
  double want[] = {row.gflops, row.bw_gbs, row.f_strided, row.conv_eff_nchw_fewc,
                   row.ns_gather_kxk, row.ns_runs_1x1};
  for (int i = 0; i < 6; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * fabs(want[i]), "%d: %g != %g", i, got[i],
                  want[i]);
  ck_assert_int_eq(back.few_channels, 24);
  ck_assert_int_eq(back.fuse_multi_use_budget, row.fuse_multi_use_budget);
  char *t2 = written(&back, "A CPU\nwith a newline");
  ck_assert_str_eq(t1, t2); /* a second trip changes nothing */
  free(t1);
  free(t2);
  /* the cuda row too */
  t1 = written(pass_costs_row("cuda"), NULL);
  ck_assert(parse(a, t1, &back, &msg));
  free(msg);
  ck_assert(back.gflops == 50000 && back.fuse_multi_use_budget == 24);
  ck_assert_ptr_null(strstr(t1, "machine"));
  free(t1);
  arena_free(a);
}
END_TEST

/* ---- a calibrated row in choose-layout ---- */

typedef struct Prog {
  Arena *a;
  IrModule *m;
  Report *r;
} Prog;

static Prog compile(const char *src, const PassCosts *costs) {
  Prog p = {.a = arena_new()};
  Diag d;
  diag_init(&d, "t.tdsl", src, stderr);
  AstProgram *ast = parse_program(p.a, &d, src);
  ck_assert_ptr_nonnull(ast);
  p.m = sema_program(p.a, &d, ast, "t.tdsl");
  ck_assert_ptr_nonnull(p.m);
  PassOptions o = {.opt_level = 2, .target = "host", .costs = costs};
  p.r = report_new(p.a, "t.tdsl", "host");
  ck_assert_int_eq(pipeline_run(p.m, &o, p.r), 0);
  return p;
}

static bool conv_is_cl(const Prog *p) {
  const IrKernel *k = p->m->kernels[0];
  for (IrRef r = 0; r < k->nvalues; r++)
    if (k->values[r].op == OP_CONV2D)
      return sym_is(k->values[r].stride[1], 1) && !sym_is(k->values[r].stride[3], 1);
  ck_abort_msg("no conv");
  return false;
}

static char *report_text(const Prog *p, bool json) {
  char *text = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&text, &n);
  if (json) report_write_json(p->r, f);
  else report_write_text(p->r, f);
  fclose(f);
  return text;
}

static const char *conv_src(const char *layout, int ks) {
  static char buf[512];
  snprintf(buf, sizeof buf,
           "kernel c(x: f32[2, 16, 12, 12] %s, w: f32[16, 16, %d, %d]) -> f32[2, 16, 12, 12] %s {\n"
           "  return conv2d(relu(conv2d(x, w, padding=%d)), w, padding=%d)\n"
           "}\n", layout, ks, ks, layout, ks / 2, ks / 2);
  return buf;
}

START_TEST(calibrated_row_turns_layout) {
  Arena *a = arena_new();
  char *msg;
  /* NCHW in and out, 3x3 convs: the built-in row picks channels-last
   * (its NCHW direct kernel runs at 0.57 of the channels-last one, the
   * issue's case, which pays for transposing input and result); on a
   * machine where both layouts run the 3x3 conv at the same rate, a
   * calibrated row keeps NCHW (no transposes). */
  const char *src = conv_src("contiguous", 3);
  Prog p = compile(src, NULL);
  ck_assert(conv_is_cl(&p));
  char *text = report_text(&p, false);
  ck_assert_msg(strstr(text, "chose channels-last; cost model cpu (built-in): 22 GB/s, 55 GFLOP/s"),
                "%s", text);
  free(text);
  arena_free(p.a);
  PassCosts same_rate;
  ck_assert(parse(a, "tdsl-costs 1\nfamily cpu\nconv_eff_nchw_kxk 1\n", &same_rate, &msg));
  free(msg);
  p = compile(src, &same_rate);
  ck_assert(!conv_is_cl(&p));
  text = report_text(&p, false);
  ck_assert_msg(strstr(text, "chose NCHW; cost model cpu from t.costs: 22 GB/s, 55 GFLOP/s"), "%s",
                text);
  free(text);
  text = report_text(&p, true);
  ck_assert_msg(strstr(text, "\"chose\": \"nchw\", \"cost_model\": {\"row\": \"cpu\", "
                             "\"source\": \"t.costs\", \"bw_gbs\": 22, \"gflops\": 55}"),
                "%s", text);
  ck_assert_msg(strstr(text, "\"estimates\": {\"channels_last\": {\"bytes\": "), "%s", text);
  free(text);
  arena_free(p.a);
  /* channels_last in and out, 1x1 convs: channels-last with the built-in
   * row; NCHW when the channels-last 1x1 conv is slow and gathering from
   * a channels_last input is free. */
  src = conv_src("channels_last", 1);
  p = compile(src, NULL);
  ck_assert(conv_is_cl(&p));
  arena_free(p.a);
  PassCosts slow_cl;
  ck_assert(parse(a, "tdsl-costs 1\nfamily cpu\nconv_eff_nhwc_1x1 0.01\nns_gather_1x1 0\n"
                     "f_strided 1\n", &slow_cl, &msg));
  free(msg);
  p = compile(src, &slow_cl);
  ck_assert(!conv_is_cl(&p));
  arena_free(p.a);
  arena_free(a);
}
END_TEST

/* ---- tdslc --calibrate, --costs and TDSL_COSTS ---- */

/* Runs the shell command cmd; returns its exit status. */
static int sh(const char *cmd) {
  int s = system(cmd);
  return WIFEXITED(s) ? WEXITSTATUS(s) : -1;
}

START_TEST(calibrate_end_to_end) {
  char dir[] = "/tmp/test_costs.XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char cmd[2048], path[256], src[256], out[256];
  snprintf(path, sizeof path, "%s/machine.costs", dir);
  snprintf(src, sizeof src, "%s/c.tdsl", dir);
  snprintf(out, sizeof out, "%s/report.txt", dir);
  FILE *f = fopen(src, "w");
  fputs(conv_src("contiguous", 3), f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' --calibrate=quick -o '%s' 2>'%s/log'", TDSL_TDSLC, path, dir);
  ck_assert_int_eq(sh(cmd), 0);
  Arena *a = arena_new();
  PassCosts pc;
  ck_assert(pass_costs_load(a, path, &pc, stderr));
  ck_assert_str_eq(pc.name, "cpu");
  ck_assert_str_eq(pc.source, path);
  double pos[] = {pc.gflops, pc.bw_gbs, pc.f_strided, pc.conv_eff_nchw_1x1,
                  pc.conv_eff_nhwc_1x1, pc.conv_eff_nchw_kxk, pc.conv_eff_nhwc_kxk,
                  pc.conv_eff_nchw_fewc, pc.conv_eff_nhwc_fewc, pc.conv_eff_nchw_kxk_512};
  for (int i = 0; i < 10; i++) ck_assert_msg(pos[i] > 0 && isfinite(pos[i]), "field %d", i);
  /* gflops is the faster 3x3 layout's rate: one kxk efficiency is 1 (the
   * NCHW one measured is that of the host's vector width) */
  ck_assert(pc.conv_eff_nchw_kxk == 1 || pc.conv_eff_nchw_kxk_512 == 1 ||
            pc.conv_eff_nhwc_kxk == 1);
  /* --costs=FILE and TDSL_COSTS=FILE weigh with it and say so */
  const char *how[] = {"'%s' '%s' --costs='%s' --emit=report -o '%s'",
                       "TDSL_COSTS='%3$s' '%1$s' '%2$s' --emit=report -o '%4$s'"};
  for (int i = 0; i < 2; i++) {
    snprintf(cmd, sizeof cmd, how[i], TDSL_TDSLC, src, path, out);
    ck_assert_int_eq(sh(cmd), 0);
    char want[512];
    snprintf(want, sizeof want, "cost model cpu from %s: ", path);
    char report[8192] = {0};
    f = fopen(out, "r");
    ck_assert_uint_gt(fread(report, 1, sizeof report - 1, f), 0);
    fclose(f);
    ck_assert_msg(strstr(report, want), "%s", report);
  }
  /* TDSL_COSTS for another family is not used; --costs for one is an error */
  snprintf(cmd, sizeof cmd,
           "TDSL_COSTS='%s' '%s' '%s' --target=cuda --emit=report -o '%s' && "
           "grep -q 'cost model cuda (built-in)' '%s'", path, TDSL_TDSLC, src, out, out);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "'%s' '%s' --target=cuda --costs='%s' --emit=ir -o /dev/null 2>'%s'",
           TDSL_TDSLC, src, path, out);
  ck_assert_int_eq(sh(cmd), 1);
  /* a bad file: exit 1, its message, nothing compiled */
  f = fopen(path, "w");
  fputs("tdsl-costs 1\nfamily cpu\ngflops fast\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "'%s' '%s' --costs='%s' -o '%s/c.o' 2>'%s' ; s=$?; "
           "grep -q '^%s:3: error: gflops: .fast. is not a number$' '%s' && "
           "! test -e '%s/c.o' && exit $s", TDSL_TDSLC, src, path, dir, out, path, out, dir);
  ck_assert_int_eq(sh(cmd), 1);
  arena_free(a);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  ck_assert_int_eq(sh(cmd), 0);
}
END_TEST

START_TEST(load_errors) {
  Arena *a = arena_new();
  PassCosts pc;
  char *msg = NULL;
  size_t n = 0;
  FILE *err = open_memstream(&msg, &n);
  ck_assert(!pass_costs_load(a, "/nonexistent/x.costs", &pc, err));
  char path[] = "/tmp/test_costs_nul.XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  ck_assert_int_eq(write(fd, "tdsl-costs 1\nfamily cpu\ng\0flops 1\n", 34), 34);
  close(fd);
  ck_assert(!pass_costs_load(a, path, &pc, err));
  fclose(err);
  unlink(path);
  ck_assert_msg(strstr(msg, "/nonexistent/x.costs: error: cannot read the cost file: "), "%s", msg);
  char want[128];
  snprintf(want, sizeof want, "%s:3: error: the cost file contains a NUL byte", path);
  ck_assert_msg(strstr(msg, want), "%s", msg);
  free(msg);
  arena_free(a);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("costs");
  TCase *t = tcase_create("file");
  tcase_add_test(t, parse_good);
  tcase_add_test(t, parse_bad);
  tcase_add_test(t, parse_garbage);
  tcase_add_test(t, round_trip);
  tcase_add_test(t, load_errors);
  tcase_add_test(t, calibrated_row_turns_layout);
  suite_add_tcase(s, t);
  TCase *e = tcase_create("calibrate");
  tcase_set_timeout(e, 120);
  tcase_add_test(e, calibrate_end_to_end);
  suite_add_tcase(s, e);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
