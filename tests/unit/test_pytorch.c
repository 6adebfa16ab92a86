/* test_pytorch.c — differential test against PyTorch.
 *
 * tests/pytorch/manifest.txt lists kernels of the .tdsl files of tests/pytorch/cases
 * with inputs and the outputs PyTorch computed for them (made once by
 * tests/pytorch/gen.py; PyTorch is not needed here).  Each kernel is run
 * through tdsl_run(), the code behind `tdslc run`, and every output is
 * compared with PyTorch's within the tolerances of spec §9.  Kernels
 * PyTorch rejects must be rejected too (at compile time or at run time). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ast.h"
#include "driver/npy.h"
#include "driver/run.h"

#define DIR TDSL_SOURCE_DIR "/tests/pytorch"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = 0;
  fclose(f);
  return s;
}

/* Compares element i of a and b; tolerances from spec §9. */
static int close_enough(DType dt, bool reduce, Scalar a, Scalar b) {
  if (!dtype_is_float(dt)) return a.i == b.i;
  double x = a.f, y = b.f;
  if (isnan(x) || isnan(y)) return isnan(x) && isnan(y);
  if (isinf(x) || isinf(y)) return x == y;
  double rtol, atol;
  if (dt == DT_F64) rtol = 1e-10, atol = 1e-12;
  else if (dt == DT_F32) rtol = reduce ? 1e-4 : 1e-5, atol = reduce ? 1e-5 : 1e-6;
  else rtol = 1e-2, atol = 1e-2;
  return fabs(x - y) <= atol + rtol * fabs(y);
}

static int64_t elem_offset(const HostTensor *t, int64_t flat) {
  int64_t off = t->offset;
  for (int d = t->rank - 1; d >= 0; d--) {
    off += (flat % t->shape[d]) * t->stride[d];
    flat /= t->shape[d];
  }
  return off;
}

/* Reads a result file; <u2 data can only be bf16 bits (spec §8). */
static int read_any(const char *path, HostTensor *t, char *err, size_t n) {
  if (npy_read(path, DT_NONE, t, err, n) == 0) return 0;
  return npy_read(path, DT_BF16, t, err, n);
}

/* Returns a failure description or NULL. */
static char *compare(const char *got_path, const char *want_path, bool reduce) {
  static char msg[512];
  char err[256];
  HostTensor want, got;
  if (read_any(want_path, &want, err, sizeof err)) {
    snprintf(msg, sizeof msg, "reading expected: %s", err);
    return msg;
  }
  if (read_any(got_path, &got, err, sizeof err)) {
    snprintf(msg, sizeof msg, "reading result: %s", err);
    host_tensor_free(&want);
    return msg;
  }
  char *res = NULL;
  if (got.dtype != want.dtype || got.rank != want.rank) {
    snprintf(msg, sizeof msg, "%s: dtype/rank %s/%d, expected %s/%d", got_path,
             dtype_name(got.dtype), got.rank, dtype_name(want.dtype), want.rank);
    res = msg;
  }
  for (int d = 0; !res && d < got.rank; d++)
    if (got.shape[d] != want.shape[d]) {
      snprintf(msg, sizeof msg, "%s: dim %d is %lld, expected %lld", got_path, d,
               (long long)got.shape[d], (long long)want.shape[d]);
      res = msg;
    }
  DType dt = got.dtype;
  int64_t n = host_tensor_numel(&want);
  int sz = dtype_size(dt);
  for (int64_t i = 0; !res && i < n; i++) {
    Scalar a = scalar_load(dt, (char *)got.data + elem_offset(&got, i) * sz);
    Scalar b = scalar_load(dt, (char *)want.data + elem_offset(&want, i) * sz);
    if (!close_enough(dt, reduce, a, b)) {
      snprintf(msg, sizeof msg, "%s: element %lld is %.9g (%lld), expected %.9g (%lld)",
               got_path, (long long)i, a.f, (long long)a.i, b.f, (long long)b.i);
      res = msg;
    }
  }
  host_tensor_free(&got);
  host_tensor_free(&want);
  return res;
}

typedef struct Line {
  char file[256], kernel[128], tol[32];
  int nin, nout;
  char *in[16], *out[16];
} Line;

static int parse_line(char *s, Line *l) {
  memset(l, 0, sizeof *l);
  char *save = NULL, *tok = strtok_r(s, " \n", &save);
  if (!tok || tok[0] == '#') return 0;
  snprintf(l->file, sizeof l->file, "%s", tok);
  snprintf(l->kernel, sizeof l->kernel, "%s", strtok_r(NULL, " \n", &save));
  snprintf(l->tol, sizeof l->tol, "%s", strtok_r(NULL, " \n", &save));
  bool outs = false;
  while ((tok = strtok_r(NULL, " \n", &save))) {
    if (strcmp(tok, "--") == 0) outs = true;
    else if (outs) l->out[l->nout++] = tok;
    else l->in[l->nin++] = tok;
  }
  return 1;
}

/* Runs one manifest line; returns a failure description or NULL. */
static char *run_line(Line *l, const char *tmpdir) {
  static char msg[1024];
  char *src = slurp(l->file);
  if (!src) {
    snprintf(msg, sizeof msg, "cannot read %s", l->file);
    return msg;
  }
  bool want_error = strcmp(l->tol, "error") == 0;
  Arena *a = arena_new();
  Diag d;
  FILE *diagout = tmpfile();
  diag_init(&d, l->file, src, diagout);
  AstProgram *p = parse_program(a, &d, src);
  IrModule *m = p ? sema_program(a, &d, p, l->file) : NULL;
  char *res = NULL;
  if (!m) {
    if (!want_error) {
      char buf[600] = "";
      rewind(diagout);
      size_t k = fread(buf, 1, sizeof buf - 1, diagout);
      buf[k] = 0;
      snprintf(msg, sizeof msg, "%s: %s does not compile:\n%s", l->file, l->kernel, buf);
      res = msg;
    }
    goto done;
  }
  const char *outspecs[16];
  char outbuf[16][512];
  for (int i = 0; i < l->nout; i++) {
    char *eq = strchr(l->out[i], '=');
    snprintf(outbuf[i], sizeof outbuf[i], "%.*s=%s/%s.%d.npy", (int)(eq - l->out[i]),
             l->out[i], tmpdir, l->kernel, i);
    outspecs[i] = outbuf[i];
  }
  int st = tdsl_run(m, l->kernel, l->nin, (const char **)l->in, l->nout, outspecs, diagout);
  if (want_error) {
    if (st == 0) {
      snprintf(msg, sizeof msg, "%s: %s: PyTorch rejects it, tdsl accepted it", l->file, l->kernel);
      res = msg;
    }
    goto done;
  }
  if (st != 0) {
    char buf[600] = "";
    rewind(diagout);
    size_t k = fread(buf, 1, sizeof buf - 1, diagout);
    buf[k] = 0;
    snprintf(msg, sizeof msg, "%s: %s: run failed (%d): %s", l->file, l->kernel, st, buf);
    res = msg;
    goto done;
  }
  for (int i = 0; i < l->nout && !res; i++) {
    char *c = compare(strchr(outbuf[i], '=') + 1, strchr(l->out[i], '=') + 1,
                      strcmp(l->tol, "reduce") == 0);
    if (c) {
      snprintf(msg, sizeof msg, "%s: %s: out%d: %s", l->file, l->kernel, i, c);
      res = msg;
    }
  }
done:
  fclose(diagout);
  arena_free(a);
  free(src);
  return res;
}

START_TEST(test_manifest) {
  ck_assert_int_eq(chdir(DIR), 0);
  char tmpl[] = "/tmp/tdsl_pytorch_XXXXXX";
  ck_assert_ptr_nonnull(mkdtemp(tmpl));
  FILE *f = fopen("manifest.txt", "r");
  ck_assert_ptr_nonnull(f);
  char line[8192];
  int total = 0, failed = 0;
  while (fgets(line, sizeof line, f)) {
    Line l;
    if (!parse_line(line, &l)) continue;
    total++;
    char *err = run_line(&l, tmpl);
    if (err) {
      failed++;
      fprintf(stderr, "FAIL %s\n", err);
    }
  }
  fclose(f);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
  ck_assert_int_eq(system(cmd), 0);
  fprintf(stderr, "pytorch differential: %d kernels, %d failed\n", total, failed);
  ck_assert_int_gt(total, 90);
  ck_assert_int_eq(failed, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("pytorch");
  TCase *tc = tcase_create("manifest");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_manifest);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
