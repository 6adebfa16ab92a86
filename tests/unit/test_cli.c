/* test_cli.c — the tdslc command line, run as a process (TDSL_TDSLC):
 * --version/--help, one-line usage errors with status 2, unreadable and
 * NUL-containing files (status 1), the not-yet-available emits, --emit=ir,
 * --emit=loops and the HTML report's loop form, where -o puts each emit,
 * and `tdslc run` end to end (scalars and 0-dim tensors given inline
 * too): inputs written with npy_write, results read back with npy_read
 * and compared with values worked out by hand, plus the input errors of
 * spec §8 (status 1); --emit=so built, dlopened and called, and its link
 * errors; --time-passes' LLVM phases at one and two threads, and
 * TDSL_LLVM_PASSES.  Each test works in a fresh temporary directory, which is also the current directory of tdslc. */
#include <check.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tdsl/runtime.h>

#include "driver/npy.h"

#ifndef TDSL_TDSLC
#error "TDSL_TDSLC must name the tdslc binary"
#endif

static char dir[64];
static char out_text[8192], err_text[8192];
static char errbuf[512];

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/test_cli_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", dir);
}

static const char *path_in(const char *name) {
  static char p[4][160];
  static int turn;
  turn = (turn + 1) % 4;
  snprintf(p[turn], sizeof p[turn], "%s/%s", dir, name);
  return p[turn];
}

static void slurp(const char *name, char *buf, size_t cap) {
  FILE *f = fopen(path_in(name), "rb");
  size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
}

/* Runs `tdslc ARGS` in the temp dir; returns its exit status and leaves
 * its stdout and stderr in out_text and err_text. */
static int tdslc(const char *args) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s >stdout.txt 2>stderr.txt",
           dir, TDSL_TDSLC, args);
  int rc = system(cmd);
  ck_assert_msg(rc != -1 && WIFEXITED(rc), "tdslc did not exit: %s", cmd);
  slurp("stdout.txt", out_text, sizeof out_text);
  slurp("stderr.txt", err_text, sizeof err_text);
  return WEXITSTATUS(rc);
}

static void write_text(const char *name, const char *text, size_t n) {
  FILE *f = fopen(path_in(name), "wb");
  ck_assert_ptr_nonnull(f);
  ck_assert_uint_eq(fwrite(text, 1, n, f), n);
  fclose(f);
}

static void write_f32(const char *name, int rank, const int64_t *shape,
                      const float *v) {
  HostTensor t;
  ck_assert_int_eq(host_tensor_alloc(&t, DT_F32, rank, shape), 0);
  memcpy(t.data, v, (size_t)host_tensor_numel(&t) * sizeof *v);
  ck_assert_msg(npy_write(path_in(name), &t, errbuf, sizeof errbuf) == 0,
                "%s", errbuf);
  host_tensor_free(&t);
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static void expect_usage_error(const char *args, const char *fragment) {
  int rc = tdslc(args);
  ck_assert_msg(rc == 2, "'%s' gave %d, want 2; stderr: %s", args, rc,
                err_text);
  ck_assert_msg(count_lines(err_text) == 1 &&
                    strncmp(err_text, "tdslc: error: ", 14) == 0,
                "'%s': want one 'tdslc: error:' line, got: %s", args,
                err_text);
  ck_assert_msg(strstr(err_text, fragment), "'%s': '%s' not in: %s", args,
                fragment, err_text);
}

START_TEST(version_and_help) {
  ck_assert_int_eq(tdslc("--version"), 0);
  ck_assert_int_eq(strncmp(out_text, "tdslc ", 6), 0);
  ck_assert_int_eq(tdslc("--help"), 0);
  ck_assert_ptr_nonnull(strstr(out_text, "usage: tdslc"));
  ck_assert_ptr_nonnull(strstr(out_text, "tdslc run"));
  ck_assert_str_eq(err_text, "");
  size_t n = strlen(out_text);
  ck_assert_msg(n > 0 && out_text[n - 1] == '\n', "--help lacks a final newline");
  /* the CUDA processors the targets accept are listed */
  ck_assert_ptr_nonnull(strstr(out_text, "cuda: sm_80 PTX"));
  ck_assert_ptr_nonnull(strstr(out_text, "sm_90a"));
  ck_assert_ptr_nonnull(strstr(out_text, "so: a shared library"));
}
END_TEST

START_TEST(usage_errors) {
  write_text("k.tdsl", "\n", 1);
  expect_usage_error("", "no input file");
  expect_usage_error("k.tdsl --bogus", "unknown option '--bogus'");
  expect_usage_error("k.tdsl -x", "unknown option '-x'");
  expect_usage_error("k.tdsl -O4", "bad optimization level '-O4'");
  expect_usage_error("k.tdsl -O", "bad optimization level '-O'");
  expect_usage_error("k.tdsl --target=arm", "unknown target 'arm'");
  expect_usage_error("k.tdsl --target=cuda:sm_", "unknown target");
  /* only the processors LLVM 19's NVPTX backend knows, all of them named */
  expect_usage_error("k.tdsl --target=cuda:sm_99", "sm_50 sm_52");
  expect_usage_error("k.tdsl --target=cuda:sm_91", "unknown target 'cuda:sm_91'");
  expect_usage_error("k.tdsl --emit=ir,foo", "unknown kind 'foo'");
  expect_usage_error("k.tdsl --emit=", "unknown kind ''");
  expect_usage_error("k.tdsl --emit=ir,llvm -o -", "single emit");
  expect_usage_error("k.tdsl -o -", "single emit");
  expect_usage_error("k.tdsl --emit=obj -o -", "binary");
  expect_usage_error("k.tdsl --report-format=xml", "text or json");
  expect_usage_error("k.tdsl --dump-after=nothing", "unknown pass 'nothing'");
  expect_usage_error("k.tdsl --disable-pass=x", "unknown pass 'x'");
  expect_usage_error("k.tdsl other.tdsl", "more than one input file");
  expect_usage_error("k.tdsl -o", "-o needs a path");
  expect_usage_error("k.tdsl --emit", "--emit needs a value");
  expect_usage_error("k.tdsl --input x=1", "only for tdslc run");
  expect_usage_error("run k.tdsl", "exactly one --kernel");
  expect_usage_error("run k.tdsl --kernel=a --kernel=b", "exactly one");
  expect_usage_error("run k.tdsl --kernel=a -O2", "'-O2' cannot be used");
  expect_usage_error("run --kernel=a", "needs a .tdsl file");
}
END_TEST

START_TEST(unreadable_and_binary_files) {
  ck_assert_int_eq(tdslc("missing.tdsl --emit=ir"), 1);
  ck_assert_ptr_nonnull(strstr(err_text, "cannot read 'missing.tdsl'"));
  ck_assert_int_eq(tdslc(". --emit=ir"), 1);
  ck_assert_ptr_nonnull(strstr(err_text, "cannot read '.'"));
  write_text("nul.tdsl", "kernel f() -> f32[] {\0}\n", 24);
  ck_assert_int_eq(tdslc("nul.tdsl --emit=ir"), 1);
  ck_assert_ptr_nonnull(strstr(err_text, "NUL byte (at offset 21)"));
}
END_TEST

/* ---- with the front end --------------------------------------------- */

static const char add_src[] =
    "# elementwise add with a size symbol\n"
    "kernel add(x: f32[N, 3], y: f32[N, 3]) -> f32[N, 3] {\n"
    "    return x + y\n"
    "}\n"
    "kernel two(x: i32[4]) -> (i32[4], i64[]) {\n"
    "    return x * 2, x.sum()\n"
    "}\n"
    "kernel cl(x: f32[1, 2, 2, 3] channels_last) -> f32[1, 2, 2, 3] {\n"
    "    return x.contiguous()\n"
    "}\n"
    "kernel scale(x: f32[3], a: f32, n: i32, b: bool) -> f32[3] {\n"
    "    return where(b, x * a + n, x)\n"
    "}\n"
    "kernel zero_dim(x: f32[3], s: f32[], b: bool[]) -> f32[3] {\n"
    "    return where(b, x * s, x)\n"
    "}\n";

static void write_program(void) {
  write_text("k.tdsl", add_src, sizeof add_src - 1);
}

static HostTensor read_result(const char *name, DType dt, int rank) {
  HostTensor t;
  ck_assert_msg(npy_read(path_in(name), DT_NONE, &t, errbuf,
                         sizeof errbuf) == 0, "%s", errbuf);
  ck_assert_int_eq(t.dtype, dt);
  ck_assert_int_eq(t.rank, rank);
  return t;
}

START_TEST(emits) {
  write_program();
  /* obj,header by default (codegen/); ptx needs a CUDA target */
  ck_assert_int_eq(tdslc("k.tdsl"), 0);
  ck_assert_int_eq(access(path_in("k.o"), F_OK), 0);
  ck_assert_int_eq(access(path_in("k.h"), F_OK), 0);
  ck_assert_int_eq(tdslc("k.tdsl --emit=ir,ptx"), 2);
  ck_assert_ptr_nonnull(strstr(err_text, "--emit=ptx needs a CUDA target"));
  ck_assert_int_eq(tdslc("k.tdsl --emit=ptx --target=cuda:sm_90a -o k.ptx"), 0);
  slurp("k.ptx", out_text, sizeof out_text);
  ck_assert_ptr_nonnull(strstr(out_text, ".target sm_90a"));
  ck_assert_ptr_nonnull(strstr(out_text, ".entry add__n0"));
  /* a CUDA object and header: the same C function, a kDLCUDA K_info */
  ck_assert_int_eq(tdslc("k.tdsl --target=cuda -o kc.o"), 0);
  ck_assert_int_eq(access(path_in("kc.o"), F_OK), 0);
  ck_assert_int_eq(access(path_in("kc.h"), F_OK), 0);
  ck_assert_int_eq(tdslc("k.tdsl --emit=ir"), 0);
  slurp("k.ir", out_text, sizeof out_text);
  ck_assert_ptr_nonnull(strstr(out_text, "add"));
  ck_assert_int_eq(tdslc("k.tdsl --emit=ir,header -o sub.o"), 0);
  ck_assert_int_eq(access(path_in("sub.ir"), F_OK), 0);
  ck_assert_int_eq(access(path_in("sub.h"), F_OK), 0);
  /* the loop form: k.loops, and in the HTML report's "Loop form" */
  ck_assert_int_eq(tdslc("k.tdsl --emit=loops -O1"), 0);
  slurp("k.loops", out_text, sizeof out_text);
  ck_assert_ptr_nonnull(strstr(out_text, "kernel add -O1: "));
  ck_assert_ptr_nonnull(strstr(out_text, "nest 0: "));
  static char page[1 << 17];
  ck_assert_int_eq(tdslc("k.tdsl --emit=report-html"), 0);
  slurp("k.report.html", page, sizeof page);
  ck_assert_ptr_nonnull(strstr(page, "<pre>kernel add -O2: "));
}
END_TEST

/* With a single emit -o names the file exactly (spec §8), so a Makefile
 * rule gets the path it expects; with several, OUT's extension gives way
 * to each emit's own. */
START_TEST(output_paths) {
  write_program();
  static const char *single[][2] = {
      {"--emit=obj -o foo", "foo"},          {"--emit=obj -o foo.obj", "foo.obj"},
      {"--emit=header -o k.hpp", "k.hpp"},   {"--emit=ir -o sub.o", "sub.o"},
      {"--emit=llvm -o x.txt", "x.txt"},     {"--emit=asm -o a.S", "a.S"},
      {"--emit=report -o r", "r"},           {"--emit=report-json -o r.js", "r.js"},
  };
  for (size_t i = 0; i < sizeof single / sizeof *single; i++) {
    char args[128];
    snprintf(args, sizeof args, "k.tdsl %s", single[i][0]);
    ck_assert_msg(tdslc(args) == 0, "%s: %s", args, err_text);
    ck_assert_msg(access(path_in(single[i][1]), F_OK) == 0, "%s did not write %s",
                  args, single[i][1]);
  }
  char text[8192];
  slurp("k.hpp", text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "int add("));
  slurp("sub.o", text, sizeof text);
  ck_assert_ptr_nonnull(strstr(text, "kernel add"));
  ck_assert_int_eq(access(path_in("foo.o"), F_OK), -1);
  ck_assert_int_eq(access(path_in("sub.ir"), F_OK), -1);
  /* several emits: the stem rule */
  ck_assert_int_eq(tdslc("k.tdsl -o two.obj"), 0);
  ck_assert_int_eq(access(path_in("two.o"), F_OK), 0);
  ck_assert_int_eq(access(path_in("two.h"), F_OK), 0);
  ck_assert_int_eq(access(path_in("two.obj"), F_OK), -1);
  ck_assert_int_eq(tdslc("k.tdsl --emit=ir -o - --kernel=two"), 0);
  ck_assert_ptr_nonnull(strstr(out_text, "two"));
  ck_assert_ptr_null(strstr(out_text, "scale"));
  ck_assert_int_eq(tdslc("k.tdsl --emit=ir --kernel=nope"), 1);
  ck_assert_ptr_nonnull(strstr(err_text, "no kernel named 'nope'"));
  static const char bad[] = "kernel f(x: f32[3]) -> f32[3] {\n  return y\n}\n";
  write_text("bad.tdsl", bad, sizeof bad - 1);
  ck_assert_int_eq(tdslc("bad.tdsl --emit=ir"), 1);
  ck_assert_ptr_nonnull(strstr(err_text, "bad.tdsl:2:"));
}
END_TEST

START_TEST(run_add) {
  write_program();
  int64_t shape[2] = {2, 3};
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {0.5f, -1, 10, 0, 0.25f, -6};
  write_f32("x.npy", 2, shape, x);
  write_f32("y.npy", 2, shape, y);
  int rc = tdslc("run k.tdsl --kernel=add --input x=x.npy --input=y=y.npy "
                 "--output out0=sum.npy");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  HostTensor r = read_result("sum.npy", DT_F32, 2);
  ck_assert_int_eq(r.shape[0], 2);
  for (int i = 0; i < 6; i++)
    ck_assert_float_eq(((float *)r.data)[i], x[i] + y[i]);
  host_tensor_free(&r);
}
END_TEST

/* Two results: out0 named, out1 defaulting to out1.npy in the cwd. */
START_TEST(run_default_output_names) {
  write_program();
  HostTensor x;
  int64_t shape[1] = {4};
  ck_assert_int_eq(host_tensor_alloc(&x, DT_I32, 1, shape), 0);
  int32_t v[4] = {3, -7, 100, 2147483647};
  memcpy(x.data, v, sizeof v);
  ck_assert_int_eq(npy_write(path_in("x.npy"), &x, errbuf, sizeof errbuf), 0);
  host_tensor_free(&x);
  int rc = tdslc("run k.tdsl --kernel=two --input x=x.npy");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  HostTensor a = read_result("out0.npy", DT_I32, 1);
  HostTensor s = read_result("out1.npy", DT_I64, 0);
  /* i32 * 2 wraps in two's complement (spec §5.4); sum of i32 is i64 */
  int32_t twice[4] = {6, -14, 200, -2};
  ck_assert_mem_eq(a.data, twice, sizeof twice);
  ck_assert_int_eq(*(int64_t *)s.data, 3 - 7 + 100 + 2147483647LL);
  host_tensor_free(&a);
  host_tensor_free(&s);
}
END_TEST

/* The file holds logical NCHW values; the parameter gets them with
 * channels-last strides and contiguous() gives them back unchanged. */
START_TEST(run_channels_last) {
  write_program();
  int64_t shape[4] = {1, 2, 2, 3};
  float v[12];
  for (int i = 0; i < 12; i++) v[i] = (float)(i * i) - 5;
  write_f32("x.npy", 4, shape, v);
  int rc = tdslc("run k.tdsl --kernel=cl --input x=x.npy");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  HostTensor r = read_result("out0.npy", DT_F32, 4);
  ck_assert_mem_eq(r.data, v, sizeof v);
  host_tensor_free(&r);
}
END_TEST

START_TEST(run_scalars) {
  write_program();
  int64_t shape[1] = {3};
  float x[3] = {1, -2, 0.5f};
  write_f32("x.npy", 1, shape, x);
  int rc = tdslc("run k.tdsl --kernel=scale --input x=x.npy --input a=0.5 "
                 "--input n=-3 --input b=true");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  HostTensor r = read_result("out0.npy", DT_F32, 1);
  for (int i = 0; i < 3; i++)
    ck_assert_float_eq(((float *)r.data)[i], x[i] * 0.5f - 3);
  host_tensor_free(&r);
  rc = tdslc("run k.tdsl --kernel=scale --input x=x.npy --input a=0.5 "
             "--input n=-3 --input b=0");
  ck_assert_int_eq(rc, 0);
  r = read_result("out0.npy", DT_F32, 1);
  ck_assert_mem_eq(r.data, x, sizeof x);
  host_tensor_free(&r);
  /* a number where a 0-dim tensor is expected makes that tensor */
  rc = tdslc("run k.tdsl --kernel=zero_dim --input x=x.npy --input s=2.0 "
             "--input b=true");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  r = read_result("out0.npy", DT_F32, 1);
  for (int i = 0; i < 3; i++) ck_assert_float_eq(((float *)r.data)[i], x[i] * 2);
  host_tensor_free(&r);
}
END_TEST

/* `tdslc run ARGS` must fail with status 1 and say `fragment`. */
static void expect_run_error(const char *args, const char *fragment) {
  int rc = tdslc(args);
  ck_assert_msg(rc == 1, "'%s' gave %d, want 1; stderr: %s", args, rc,
                err_text);
  ck_assert_msg(strstr(err_text, fragment), "'%s': '%s' not in: %s", args,
                fragment, err_text);
}

START_TEST(run_input_errors) {
  write_program();
  int64_t s23[2] = {2, 3}, s33[2] = {3, 3}, s6[1] = {6};
  float v[9] = {0};
  write_f32("x.npy", 2, s23, v);
  write_f32("y3.npy", 2, s33, v);
  write_f32("flat.npy", 1, s6, v);
  HostTensor d;
  ck_assert_int_eq(host_tensor_alloc(&d, DT_F64, 2, s23), 0);
  memset(d.data, 0, 48);
  ck_assert_int_eq(npy_write(path_in("d.npy"), &d, errbuf, sizeof errbuf), 0);
  host_tensor_free(&d);

  expect_run_error("run k.tdsl --kernel=add --input x=x.npy",
                   "missing input for parameter 'y' (f32[N, 3])");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=d.npy",
                   "parameter 'y' is f32 but d.npy holds f64");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy "
                   "--input y=flat.npy", "parameter 'y' is f32[N, 3] "
                   "(rank 2) but flat.npy has shape (6,) (rank 1)");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=x.npy "
                   "--input z=x.npy", "no parameter named 'z'");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=x.npy "
                   "--input x=x.npy", "input 'x' is given twice");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=x.npy "
                   "--output out1=o.npy", "no result named 'out1'");
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=no.npy",
                   "no.npy: cannot open");
  expect_run_error("run k.tdsl --kernel=nope", "no kernel named 'nope'");
  /* N is bound to 2 by x and 3 by y: the interpreter refuses */
  expect_run_error("run k.tdsl --kernel=add --input x=x.npy --input y=y3.npy",
                   "kernel 'add': ");
  ck_assert_int_eq(access(path_in("out0.npy"), F_OK), -1);
  expect_run_error("run k.tdsl --kernel=scale --input x=flat.npy "
                   "--input a=abc --input n=1 --input b=true",
                   "parameter 'a' is a f32 scalar: expected a number");
  expect_run_error("run k.tdsl --kernel=scale --input x=flat.npy "
                   "--input a=1 --input n=3000000000 --input b=true",
                   "parameter 'n' is a i32 scalar");
  expect_run_error("run k.tdsl --kernel=scale --input x=flat.npy "
                   "--input a=1 --input n=1 --input b=yes",
                   "expected true, false, 1 or 0");
  expect_run_error("run k.tdsl --kernel=add --input x=2.0 --input y=x.npy",
                   "parameter 'x' is f32[N, 3] (rank 2): a number (2.0) "
                   "only makes a 0-dim tensor; give a .npy file");
  expect_run_error("run k.tdsl --kernel=zero_dim --input x=flat.npy "
                   "--input s=2.0 --input b=maybe", "maybe: cannot open");
  /* a view outside its storage: PyTorch's error, at kernel entry, with
   * the symbol's value */
  static const char st[] = "kernel st(x: f32[N]) -> (f32[2, 2], f32[2, 2]) {\n"
                           "    y = x.as_strided([2, 2], [1, 1])\n"
                           "    return y, (x + 1.0).as_strided([2, 2], [2, 1])\n}\n";
  write_text("st.tdsl", st, sizeof st - 1);
  write_f32("two.npy", 1, (int64_t[]){3}, v);
  expect_run_error("run st.tdsl --kernel=st --input x=two.npy",
                   "kernel 'st': as_strided(): sizes [2, 2], strides [2, 1] and "
                   "storage offset 0 require a storage of 4 elements, out of bounds "
                   "for the input's storage of N (= 3) elements");
  write_f32("two.npy", 1, (int64_t[]){2}, v);
  expect_run_error("run st.tdsl --kernel=st --input x=two.npy",
                   "kernel 'st': as_strided(): sizes [2, 2], strides [1, 1] and "
                   "storage offset 0 require a storage of 3 elements, out of bounds "
                   "for the input's storage of N (= 2) elements");
  ck_assert_int_eq(tdslc("run k.tdsl --kernel=add --input x"), 2);
  ck_assert_ptr_nonnull(strstr(err_text, "--input expects NAME=VALUE"));
}
END_TEST

/* as_strided over a symbolic storage: PyTorch's storage bound becomes a
 * kernel-entry check (2 + 3 + 1 + 1 = 7 elements needed, 3*N held). */
START_TEST(run_as_strided_bound) {
  static const char src[] =
      "kernel k(x: f32[N, 3]) -> f32[2, 2] {\n"
      "    return x.as_strided([2, 2], [3, 1], 2) + 0.0\n"
      "}\n";
  write_text("s.tdsl", src, sizeof src - 1);
  int64_t s23[2] = {2, 3}, s33[2] = {3, 3};
  float v[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  write_f32("x2.npy", 2, s23, v);
  write_f32("x3.npy", 2, s33, v);
  expect_run_error("run s.tdsl --kernel=k --input x=x2.npy",
                   "require a storage of 7 elements, out of bounds for the "
                   "input's storage of 3*N (N = 2) elements");
  int rc = tdslc("run s.tdsl --kernel=k --input x=x3.npy");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  HostTensor r = read_result("out0.npy", DT_F32, 2);
  float want[4] = {2, 3, 5, 6};
  ck_assert_mem_eq(r.data, want, sizeof want);
  host_tensor_free(&r);
  /* a view with a symbolic size is empty when N is 0, and needs no
   * storage then (PyTorch's computeStorageNbytes) */
  static const char empty[] =
      "kernel e(x: f32[N, 3]) -> f32[N, 3] {\n"
      "    return x.as_strided([N, 3], [3, 1], 1) + 0.0\n"
      "}\n";
  write_text("e.tdsl", empty, sizeof empty - 1);
  write_f32("x0.npy", 2, (int64_t[]){0, 3}, v);
  rc = tdslc("run e.tdsl --kernel=e --input x=x0.npy");
  ck_assert_msg(rc == 0, "stderr: %s", err_text);
  expect_run_error("run e.tdsl --kernel=e --input x=x2.npy",
                   "require a storage of 3*N + 1 elements");
}
END_TEST

/* --emit=so: the library holds the kernels, their index and the runtime;
 * a call through dlsym computes, and a bad one fails with the runtime's
 * message read through the library's own tdsl_last_error. */
START_TEST(emit_so) {
  write_program();
  ck_assert_msg(tdslc("k.tdsl --emit=so") == 0, "%s", err_text);
  void *so = dlopen(path_in("k.so"), RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so, "%s", dlerror());
  int (*count)(void) = (int (*)(void))dlsym(so, "tdsl_so_kernel_count");
  const tdsl_kernel_info *(*info)(int) =
      (const tdsl_kernel_info *(*)(int))dlsym(so, "tdsl_so_kernel_info");
  int (*add)(const DLTensor *, const DLTensor *, DLTensor *) =
      (int (*)(const DLTensor *, const DLTensor *, DLTensor *))dlsym(so, "add");
  const char *(*last_error)(void) =
      (const char *(*)(void))dlsym(so, "tdsl_last_error");
  ck_assert(count && info && add && last_error);
  ck_assert_int_eq(count(), 5);
  ck_assert_str_eq(info(0)->name, "add");
  ck_assert_str_eq(info(4)->name, "zero_dim");
  ck_assert_ptr_null(info(5));
  ck_assert_int_eq(info(3)->nparams, 4);
  float xv[6] = {1, 2, 3, 4, 5, 6}, yv[6] = {10, 20, 30, 40, 50, 60}, ov[6];
  int64_t shape[2] = {2, 3}, oshape[2] = {2, 3};
  DLTensor x = {.data = xv, .device = {kDLCPU, 0}, .ndim = 2,
                .dtype = {kDLFloat, 32, 1}, .shape = shape};
  DLTensor y = x, out = x;
  y.data = yv;
  out.data = ov;
  out.shape = oshape;
  ck_assert_int_eq(add(&x, &y, &out), 0);
  for (int i = 0; i < 6; i++) ck_assert_float_eq(ov[i], xv[i] + yv[i]);
  y.dtype.bits = 64;
  ck_assert_int_eq(add(&x, &y, &out), TDSL_E_DTYPE);
  ck_assert_msg(strstr(last_error(), "add"), "%s", last_error());
  dlclose(so);
  /* with obj: the object written is the one linked; -o names a lone so */
  ck_assert_int_eq(tdslc("k.tdsl --emit=obj,so -o both"), 0);
  ck_assert_int_eq(access(path_in("both.o"), F_OK), 0);
  ck_assert_int_eq(access(path_in("both.so"), F_OK), 0);
  ck_assert_int_eq(tdslc("k.tdsl --emit=so -o libk.so.1 --kernel=two"), 0);
  so = dlopen(path_in("libk.so.1"), RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so, "%s", dlerror());
  ck_assert_ptr_null(dlsym(so, "add"));
  ck_assert_ptr_nonnull(dlsym(so, "two"));
  dlclose(so);
  expect_usage_error("k.tdsl --emit=so -o -", "binary");
}
END_TEST

START_TEST(emit_so_errors) {
  write_program();
  ck_assert_int_eq(tdslc("k.tdsl --emit=so -o a.so"), 0);
  setenv("CC", "/nonexistent/cc", 1);
  int rc = tdslc("k.tdsl --emit=so -o b.so");
  unsetenv("CC");
  ck_assert_int_eq(rc, 1);
  ck_assert_msg(strstr(err_text, "tdslc: error: --emit=so needs a C compiler"
                       " to link: cannot run '/nonexistent/cc'"), "%s", err_text);
  setenv("CC", "cc -Wl,--no-such-linker-option", 1);
  rc = tdslc("k.tdsl --emit=so -o b.so");
  unsetenv("CC");
  ck_assert_int_eq(rc, 1);
  ck_assert_msg(strstr(err_text, "tdslc: error: --emit=so: linking 'b.so' with"
                       " 'cc' failed"), "%s", err_text);
  setenv("TDSL_RUNTIME_LIB", "/nonexistent.a", 1);
  rc = tdslc("k.tdsl --emit=so -o b.so");
  unsetenv("TDSL_RUNTIME_LIB");
  ck_assert_int_eq(rc, 1);
  ck_assert_ptr_nonnull(strstr(err_text, "TDSL_RUNTIME_LIB names '/nonexistent.a'"));
}
END_TEST

/* --time-passes (spec §8): the LLVM phases after the front end's; a
 * build split across threads (TDSL_JOBS=2) reports its wall time, each
 * module's steps, each step's CPU time summed over the modules, and the
 * merge.
 * TDSL_LLVM_PASSES replaces -O2's pipeline; one LLVM cannot parse is a
 * one-line usage error. */
START_TEST(time_passes_and_pipeline) {
  write_program(); /* five kernels: split in two at two threads */
  ck_assert_int_eq(setenv("TDSL_JOBS", "1", 1), 0);
  ck_assert_int_eq(tdslc("k.tdsl --time-passes"), 0);
  static const char *const one[] = {"tdslc: parse ", "tdslc: lower ", "tdslc: llvm-build ",
                                    "tdslc: llvm-opt ", "tdslc: llvm-codegen "};
  for (size_t i = 0; i < sizeof one / sizeof *one; i++)
    ck_assert_msg(strstr(err_text, one[i]), "'%s' not in: %s", one[i], err_text);
  ck_assert_ptr_null(strstr(err_text, "merge"));
  ck_assert_int_eq(setenv("TDSL_JOBS", "2", 1), 0);
  ck_assert_int_eq(tdslc("k.tdsl --time-passes -o k2.o"), 0);
  static const char *const two[] = {"tdslc: llvm-split ", "tdslc: llvm-threads ",
                                    " modules on 2 threads (largest ", "tdslc:   module 0 (",
                                    "tdslc:   llvm-opt ",
                                    "tdslc:   llvm-codegen ", "tdslc: merge "};
  for (size_t i = 0; i < sizeof two / sizeof *two; i++)
    ck_assert_msg(strstr(err_text, two[i]), "'%s' not in: %s", two[i], err_text);
  ck_assert_int_eq(access(path_in("k2.o"), F_OK), 0);
  ck_assert_int_eq(setenv("TDSL_LLVM_PASSES", "default<O2>", 1), 0);
  ck_assert_int_eq(tdslc("k.tdsl -o k3.o"), 0);
  ck_assert_int_eq(access(path_in("k3.o"), F_OK), 0);
  ck_assert_int_eq(setenv("TDSL_LLVM_PASSES", "no-such-pass", 1), 0);
  int rc = tdslc("k.tdsl -o k4.o");
  unsetenv("TDSL_LLVM_PASSES");
  unsetenv("TDSL_JOBS");
  ck_assert_int_eq(rc, 2);
  ck_assert_msg(count_lines(err_text) == 1 &&
                    strstr(err_text, "tdslc: error: TDSL_LLVM_PASSES='no-such-pass': "),
                "got: %s", err_text);
}
END_TEST

static Suite *cli_suite(void) {
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("usage");
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, version_and_help);
  tcase_add_test(tc, usage_errors);
  tcase_add_test(tc, unreadable_and_binary_files);
  suite_add_tcase(s, tc);
  TCase *run = tcase_create("program");
  tcase_add_checked_fixture(run, setup, teardown);
  tcase_add_test(run, emits);
  tcase_add_test(run, output_paths);
  tcase_add_test(run, run_add);
  tcase_add_test(run, run_default_output_names);
  tcase_add_test(run, run_channels_last);
  tcase_add_test(run, run_scalars);
  tcase_add_test(run, run_input_errors);
  tcase_add_test(run, run_as_strided_bound);
  tcase_add_test(run, emit_so);
  tcase_add_test(run, emit_so_errors);
  tcase_add_test(run, time_passes_and_pipeline);
  suite_add_tcase(s, run);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(cli_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
