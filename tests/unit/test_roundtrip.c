/* test_roundtrip.c — every program in the tree that compiles gives IR
 * that passes the verifier, and whose printed form reads back (ir_read)
 * and prints identically: what --emit=ir shows is the whole IR. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "frontend/ast.h"

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

static char *print_module(const IrModule *m) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  ir_print_module(f, m);
  fclose(f);
  return buf;
}

/* Returns 1 when the file compiled and round-tripped, 0 when it does not
 * compile (an error program), and fails the test otherwise. */
static int roundtrip(const char *path) {
  char *src = slurp(path);
  ck_assert_ptr_nonnull(src);
  Arena *a = arena_new();
  FILE *sink = fopen("/dev/null", "w");
  Diag d;
  diag_init(&d, path, src, sink);
  AstProgram *p = parse_program(a, &d, src);
  IrModule *m = p ? sema_program(a, &d, p, path) : NULL;
  int ok = 0;
  if (m) {
    ck_assert_msg(ir_verify(m, stderr) == 0, "%s: verifier failed", path);
    char *text = print_module(m);
    Diag d2;
    diag_init(&d2, "<ir>", text, stderr);
    IrModule *back = ir_read(a, &d2, "<ir>", text);
    ck_assert_msg(back != NULL, "%s: printed IR does not read back", path);
    ck_assert_msg(ir_verify(back, stderr) == 0, "%s: read-back IR fails the verifier", path);
    char *again = print_module(back);
    ck_assert_msg(strcmp(text, again) == 0, "%s: IR differs after a round trip", path);
    free(text);
    free(again);
    ok = 1;
  }
  fclose(sink);
  arena_free(a);
  free(src);
  return ok;
}

static int roundtrip_dir(const char *dir) {
  DIR *dp = opendir(dir);
  ck_assert_ptr_nonnull(dp);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(dp))) {
    size_t l = strlen(e->d_name);
    if (l < 6 || strcmp(e->d_name + l - 5, ".tdsl") != 0) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    n += roundtrip(path);
  }
  closedir(dp);
  return n;
}

START_TEST(test_all_programs) {
  int n = roundtrip_dir(TDSL_SOURCE_DIR "/tests/pytorch/cases");
  n += roundtrip_dir(TDSL_SOURCE_DIR "/examples");
  n += roundtrip_dir(TDSL_SOURCE_DIR "/tests/golden");
  ck_assert_int_ge(n, 10);
}
END_TEST

int main(void) {
  Suite *s = suite_create("roundtrip");
  TCase *tc = tcase_create("programs");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_all_programs);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
