/* test_codegen_index.c — indexing by tensors in compiled code (loops.h
 * "Indexing by tensors"): an index out of range fails the kernel with
 * TDSL_E_INDEX and a message naming the kernel, the op, the tensor, the
 * dim, the index and the size, before any output is written — for index
 * parameters and for indices the kernel computes (whose check runs after
 * other values were computed: plan-memory must not have placed them in
 * outputs) — at -O0 and -O2; the interpreter reports the same message;
 * in-range indices (negative ones where PyTorch wraps them) give the
 * interpreter's values.
 * Needs: codegen_util.h. */
#include "codegen_util.h"

static void set_index(Ten *t, const int64_t *v, int n) {
  for (int i = 0; i < n; i++) ((int64_t *)t->store)[i] = v[i];
}

/* Calls `name` on ins/outs expecting TDSL_E_INDEX with message msg, every
 * output untouched; the interpreter fails with the same message. */
static void expect_index_error(Lib *L, const char *name, Ten *ins, int nin, Ten *outs,
                               int nout, const char *msg) {
  void *a[16];
  for (int i = 0; i < nin; i++) a[i] = &ins[i].t;
  for (int i = 0; i < nout; i++) a[nin + i] = &outs[i].t, reset_out(&outs[i]);
  int rc = call(sym(L, name), a, nin + nout);
  const char *(*last)(void) = (const char *(*)(void))sym(L, "tdsl_last_error");
  ck_assert_int_eq(rc, TDSL_E_INDEX);
  ck_assert_str_eq(last(), msg);
  for (int i = 0; i < nout; i++) ck_assert_msg(untouched(&outs[i]), "%s: out%d written", name, i);
  InterpArg ia[16];
  HostTensor ref[16];
  memset(ia, 0, sizeof ia);
  for (int i = 0; i < nin; i++) ia[i].t = ins[i].h;
  char err[512];
  ck_assert_int_eq(interp_run(L->m, kernel_of(L, name), ia, ref, err, sizeof err), -1);
  ck_assert_str_eq(err, msg);
}

static const char *const SRC =
    "kernel sel(x: f32[5, 3], idx: i64[4]) -> f32[4, 3] {\n"
    "  return x.index_select(0, idx)\n"
    "}\n"
    "kernel adv(x: f32[3, N], idx: i64[4]) -> f32[3, 4] {\n"
    "  return x[:, idx]\n"
    "}\n"
    "kernel computed(x: f32[5, 3], idx: i64[4]) -> (f32[5, 3], i64[4], f32[4, 3]) {\n"
    "  y = x * 2.0\n"
    "  j = idx * 2 + 1\n"
    "  return y, j, x.index_select(0, j)\n"
    "}\n"
    "kernel gat(x: f32[4, 6], idx: i64[4, 2]) -> f32[4, 2] {\n"
    "  return x.gather(1, idx)\n"
    "}\n";

static void run_all(const char *flags) {
  Lib L;
  build_flags(&L, SRC, "sel", flags);
  int64_t s53[2] = {5, 3}, s4[1] = {4}, s43[2] = {4, 3}, s3n[2] = {3, 7}, s34[2] = {3, 4};
  int64_t s46[2] = {4, 6}, s42[2] = {4, 2};
  Ten in[2], out[3];
  /* index_select: 7 and -1 are out of range for dim 0 of size 5 */
  ten(&in[0], DT_F32, 2, s53, NULL, 0, false);
  ten(&in[1], DT_I64, 1, s4, NULL, 0, false);
  out_ten(&out[0], DT_F32, 2, s43);
  set_index(&in[1], (int64_t[]){0, 2, 7, 1}, 4);
  expect_index_error(&L, "sel", in, 2, out, 1,
                     "kernel 'sel': index at 2:12: index 7 is out of range for dim 0 of 'x' "
                     "(size 5)");
  set_index(&in[1], (int64_t[]){0, -1, 4, 1}, 4);
  expect_index_error(&L, "sel", in, 2, out, 1,
                     "kernel 'sel': index at 2:12: index -1 is out of range for dim 0 of 'x' "
                     "(size 5)");
  set_index(&in[1], (int64_t[]){4, 0, 4, 2}, 4);
  run_and_compare(&L, "sel", in, 2, out, 1, false);
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  /* advanced indexing wraps negatives: -7 is x[:, 0]; -8 and 7 fail */
  ten(&in[0], DT_F32, 2, s3n, NULL, 0, false);
  ten(&in[1], DT_I64, 1, s4, NULL, 0, false);
  out_ten(&out[0], DT_F32, 2, s34);
  set_index(&in[1], (int64_t[]){-7, 6, -1, 0}, 4);
  run_and_compare(&L, "adv", in, 2, out, 1, false);
  ck_assert(memcmp(&((float *)out[0].store)[0], &((float *)in[0].store)[0], 4) == 0);
  set_index(&in[1], (int64_t[]){-7, 6, -8, 0}, 4);
  expect_index_error(&L, "adv", in, 2, out, 1,
                     "kernel 'adv': index at 5:15: index -8 is out of range for dim 1 of 'x' "
                     "(size 7)");
  set_index(&in[1], (int64_t[]){7, 6, 1, 0}, 4);
  expect_index_error(&L, "adv", in, 2, out, 1,
                     "kernel 'adv': index at 5:15: index 7 is out of range for dim 1 of 'x' "
                     "(size 7)");
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  /* an index computed in the kernel, after other results: 2*2+1 = 5 */
  ten(&in[0], DT_F32, 2, s53, NULL, 0, false);
  ten(&in[1], DT_I64, 1, s4, NULL, 0, false);
  out_ten(&out[0], DT_F32, 2, s53);
  out_ten(&out[1], DT_I64, 1, s4);
  out_ten(&out[2], DT_F32, 2, s43);
  set_index(&in[1], (int64_t[]){0, 1, 2, 1}, 4);
  expect_index_error(&L, "computed", in, 2, out, 3,
                     "kernel 'computed': index at 10:18: index 5 is out of range for dim 0 of "
                     "'x' (size 5)");
  set_index(&in[1], (int64_t[]){0, 1, 1, -1}, 4);
  expect_index_error(&L, "computed", in, 2, out, 3,
                     "kernel 'computed': index at 10:18: index -1 is out of range for dim 0 "
                     "of 'x' (size 5)");
  set_index(&in[1], (int64_t[]){0, 1, 1, 0}, 4);
  run_and_compare(&L, "computed", in, 2, out, 3, false);
  for (int i = 0; i < 3; i++) ten_free(&out[i]);
  ten_free(&in[0]), ten_free(&in[1]);
  /* gather: index 6 in dim 1 of size 6 */
  ten(&in[0], DT_F32, 2, s46, NULL, 0, false);
  ten(&in[1], DT_I64, 2, s42, NULL, 0, false);
  out_ten(&out[0], DT_F32, 2, s42);
  set_index(&in[1], (int64_t[]){0, 5, 1, 2, 3, 6, 4, 4}, 8);
  expect_index_error(&L, "gat", in, 2, out, 1,
                     "kernel 'gat': gather at 13:12: index 6 is out of range for dim 1 of 'x' "
                     "(size 6)");
  set_index(&in[1], (int64_t[]){0, 5, 1, 2, 3, 5, 4, 4}, 8);
  run_and_compare(&L, "gat", in, 2, out, 1, false);
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&out[0]);
  unbuild(&L);
}

START_TEST(index_errors_O2) { run_all("-O2"); }
END_TEST

START_TEST(index_errors_O0) { run_all("-O0"); }
END_TEST

/* The check of a large index runs vectorized over every element; the
 * first bad one (in row-major order) is the one reported. */
START_TEST(index_check_large) {
  Lib L;
  build_flags(&L,
              "kernel big(w: f32[100, 16], ids: i64[300, 70]) -> f32[300, 70, 16] {\n"
              "  return embedding(ids, w)\n}\n",
              "big", "-O2");
  int64_t sw[2] = {100, 16}, si[2] = {300, 70}, so[3] = {300, 70, 16};
  Ten in[2], out;
  ten(&in[0], DT_F32, 2, sw, NULL, 0, false);
  ten(&in[1], DT_I64, 2, si, NULL, 0, false);
  out_ten(&out, DT_F32, 3, so);
  int64_t *ids = (int64_t *)in[1].store;
  for (int i = 0; i < 300 * 70; i++) ids[i] = (i * 37) % 100;
  run_and_compare(&L, "big", in, 2, &out, 1, false);
  ids[12345] = 100;
  ids[20000] = -3;
  expect_index_error(&L, "big", in, 2, &out, 1,
                     "kernel 'big': index at 2:10: index 100 is out of range for dim 0 of 'w' "
                     "(size 100)");
  ten_free(&in[0]), ten_free(&in[1]), ten_free(&out);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_index");
  TCase *t = tcase_create("index");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, index_errors_O2);
  tcase_add_test(t, index_errors_O0);
  tcase_add_test(t, index_check_large);
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
