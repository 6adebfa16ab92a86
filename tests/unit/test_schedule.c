/* test_schedule.c — loops/schedule.c on its own, with no code generator:
 * the schedules (lf_schedule) of kernels lowered from source: collapsed
 * loops, reduction loops, the tile of a transposing copy (blocked or
 * not), the parallel loops, and the target table.
 * Needs: the front end, loops/ (lf_lower, lf_schedule). */
#include <check.h>
#include <stdio.h>

#include "frontend/ast.h"
#include "loops/loops.h"

/* The arenas of the kernels a test lowered, freed after each test. */
static Arena *arenas[8];
static int narenas;

static void free_arenas(void) {
  while (narenas > 0) arena_free(arenas[--narenas]);
}

/* Kernel 0 of src lowered at opt_level 0; *st: its symbol table. */
static LfKernel *lower(const char *src, SymTab **st) {
  ck_assert_int_lt(narenas, 8);
  Arena *a = arenas[narenas++] = arena_new();
  FILE *sink = tmpfile();
  ck_assert_ptr_nonnull(sink);
  Diag d;
  diag_init(&d, "t.tdsl", src, sink);
  AstProgram *ast = parse_program(a, &d, src);
  IrModule *m = ast ? sema_program(a, &d, ast, "t.tdsl") : NULL;
  fclose(sink);
  ck_assert_ptr_nonnull(m);
  ck_assert_int_eq(d.nerrors, 0);
  *st = m->st;
  return lf_lower(m, m->kernels[0], 0);
}

static LfSchedule schedule(const char *src, int nest) {
  SymTab *st;
  LfKernel *lk = lower(src, &st);
  ck_assert_int_gt(lk->nnests, nest);
  return lf_schedule(st, &lk->nests[nest], lf_target_params("cpu"));
}

START_TEST(elementwise_collapses) {
  LfSchedule s = schedule("kernel k(x: f32[N, C, H, W], y: f32[N, C, H, W]) -> f32[N, C, H, W] {\n"
                          "  return x + y\n}\n", 0);
  ck_assert_int_eq(s.n, 1);
  ck_assert_int_eq(s.nouter, 1);
  ck_assert_int_eq(s.count[0], 4);
  ck_assert_int_eq(lf_schedule_var(&s, 0), 3);
  ck_assert_int_eq(s.tile_var, -1);
  ck_assert_int_eq(s.par, 1);
}
END_TEST

START_TEST(reduction_loops) {
  LfSchedule s = schedule("kernel k(x: f32[M, K]) -> f32[M] {\n  return x.sum(1)\n}\n", 0);
  ck_assert_int_eq(s.nouter, 1);
  ck_assert_int_eq(s.n, 2);
  ck_assert_int_eq(lf_schedule_var(&s, 0), 0);
  ck_assert_int_eq(lf_schedule_var(&s, 1), 1);
  ck_assert_int_eq(s.tile_var, -1);
}
END_TEST

START_TEST(transpose_tiles) {
  /* symbolic extents, a plain copy: the tile loop runs over the target's
   * copy tiles (cpu/transpose.c's register blocks walk 256 of them) */
  LfSchedule s = schedule("kernel k(x: f32[A, B]) -> f32[B, A] {\n"
                          "  return x.t().contiguous()\n}\n", 0);
  ck_assert_int_eq(s.nouter, 2);
  ck_assert_int_ge(s.tile_var, 0);
  ck_assert_int_eq(s.tile, lf_target_params("cpu")->tile_copy);
  ck_assert_int_eq(s.tile, 256);
  ck_assert(s.blocked);
  ck_assert_int_eq(s.par, 1);
  /* a constant extent within one tile: its loop disappears */
  s = schedule("kernel k(x: f32[A, 3]) -> f32[3, A] {\n  return x.t().contiguous()\n}\n", 0);
  ck_assert_int_ge(s.tile_var, 0);
  ck_assert(!s.blocked);
  ck_assert_int_eq(s.par, 1);
}
END_TEST

START_TEST(target_table) {
  const LfTarget *t = lf_target_params("cpu");
  ck_assert_str_eq(t->name, "cpu");
  ck_assert_int_gt(t->par_min_elems, 0);
  ck_assert_int_gt(t->tile, 0);
}
END_TEST

int main(void) {
  Suite *s = suite_create("schedule");
  TCase *tc = tcase_create("schedule");
  tcase_add_checked_fixture(tc, NULL, free_arenas);
  tcase_add_test(tc, elementwise_collapses);
  tcase_add_test(tc, reduction_loops);
  tcase_add_test(tc, transpose_tiles);
  tcase_add_test(tc, target_table);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
