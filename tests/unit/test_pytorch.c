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
#include "npy_compare.h"

#define DIR TDSL_SOURCE_DIR "/tests/pytorch"

/* Compares a result file with PyTorch's; returns a failure description or
 * NULL. */
static char *compare(const char *got_path, const char *want_path, bool reduce) {
  static char msg[512];
  char err[256];
  HostTensor want, got;
  if (npyc_read_any(want_path, &want, err, sizeof err)) {
    snprintf(msg, sizeof msg, "reading expected: %s", err);
    return msg;
  }
  if (npyc_read_any(got_path, &got, err, sizeof err)) {
    snprintf(msg, sizeof msg, "reading result: %s", err);
    host_tensor_free(&want);
    return msg;
  }
  char *res = NULL;
  if (npyc_compare(&got, &want, reduce, err, sizeof err)) {
    snprintf(msg, sizeof msg, "%s: %s", got_path, err);
    res = msg;
  }
  host_tensor_free(&got);
  host_tensor_free(&want);
  return res;
}

typedef ManifestLine Line;

/* Runs one manifest line; returns a failure description or NULL. */
static char *run_line(Line *l, const char *tmpdir) {
  static char msg[1024];
  char *src = npyc_slurp(l->file);
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
    if (!manifest_parse_line(line, &l) || l.opt[0]) continue; /* @O0: compiled only */
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
