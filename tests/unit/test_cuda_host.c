/* test_cuda_host.c — the host side of CUDA kernels (cuda/host.c) against
 * the stand-in driver tests/unit/fake_libcuda.c (ctest puts it first on
 * LD_LIBRARY_PATH; "device memory" is host memory and kernels do not
 * run).  Each kernel is compiled with tdslc --target=cuda --emit=so and
 * called with kDLCUDA descriptors; the fake records every launch: its
 * grid, its block, and its parameters as many as the PTX entry declares
 * (each read as 8 bytes), so these tests check that host and device agree
 * on the parameter list, that each launch unit is one launch sized as
 * cuda/cuda.h says, that empty work launches nothing, that scratch is
 * allocated and freed in stream order, that device mismatches fail
 * before anything is launched, and that an index check's verdict comes
 * back before later nests launch (a launch hook plays the check kernel
 * finding a bad index: TDSL_E_INDEX, the CPU's message).
 * Needs: TDSL_TDSLC, the fake driver, dlopen. */
#include <check.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tdsl/runtime.h>

static const char *SRC =
    "kernel ew(x: f32[N]) -> f32[N] {\n  return x * 2.0 + 1.0\n}\n"
    "kernel sm(x: f32[R, C]) -> f32[R, C] {\n  return softmax(x, dim=-1)\n}\n"
    "kernel mm(a: f32[M, K], b: f32[K, N]) -> f32[M, N] {\n  return a @ b\n}\n"
    "kernel two(x: f32[N]) -> (f32[N], f32[]) {\n"
    "  y = x.exp()\n  return y, (y - y.mean()).abs().sum()\n}\n"
    "kernel sc(x: f32[N], a: f32) -> f32[N] {\n  return x * a\n}\n"
    "kernel gat(x: f32[N], i: i64[M]) -> f32[M] {\n  return x.index_select(0, i) + 1.0\n}\n";

static void *so[2]; /* -O2, -O0 */
static int (*stat_of)(const char *);
static void (*set_launch_hook)(void (*)(const char *, const uint64_t *, int));
static int (*last_launch)(unsigned *, unsigned *, uint64_t *, int);
static char dir[64];

static void build(int i, const char *opt) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s/k.tdsl --target=cuda %s --emit=so -o %s/k%d.so",
           TDSL_TDSLC, dir, opt, dir, i);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "%s/k%d.so", dir, i);
  so[i] = dlopen(cmd, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(so[i] != NULL, "%s", dlerror());
}

static void setup(void) {
  snprintf(dir, sizeof dir, "/tmp/tdsl_cuhost_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(dir));
  char path[128];
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(SRC, f);
  fclose(f);
  build(0, "-O2");
  build(1, "-O0");
  /* the driver the runtime loaded (the fake, through LD_LIBRARY_PATH) */
  void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(drv != NULL, "the fake libcuda.so.1 is not on LD_LIBRARY_PATH: %s", dlerror());
  *(void **)&stat_of = dlsym(drv, "fake_cuda_stat");
  *(void **)&last_launch = dlsym(drv, "fake_cuda_last_launch");
  *(void **)&set_launch_hook = dlsym(drv, "fake_cuda_set_launch_hook");
  ck_assert_ptr_nonnull(set_launch_hook);
  ck_assert_ptr_nonnull(stat_of);
  ck_assert_ptr_nonnull(last_launch);
}

static void teardown(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
}

static DLTensor cuda_t(void *data, int ndim, int64_t *shape, int dev) {
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCUDA;
  t.device.device_id = dev;
  t.ndim = ndim;
  t.dtype = (DLDataType){kDLFloat, 32, 1};
  t.shape = shape;
  return t;
}

typedef int (*K1)(const DLTensor *, DLTensor *);
typedef int (*K2)(const DLTensor *, const DLTensor *, DLTensor *);

static void *fn(int lib, const char *name) {
  void *f = dlsym(so[lib], name);
  ck_assert_msg(f != NULL, "%s", name);
  return f;
}

/* tdsl_last_error() of the library's own copy of the runtime. */
static const char *tdsl_last_error_of(void *lib) {
  const char *(*f)(void) = NULL;
  *(void **)&f = dlsym(lib, "tdsl_last_error");
  ck_assert_ptr_nonnull(f);
  return f();
}

/* Whether v is among the launch's parameters. */
static int has_param(const uint64_t *p, int n, uint64_t v) {
  for (int i = 0; i < n; i++)
    if (p[i] == v) return 1;
  return 0;
}

static float xbuf[8192], ybuf[8192], zbuf[8192];

START_TEST(elementwise_one_launch) {
  K1 ew = (K1)fn(0, "ew");
  int64_t n[1] = {1000};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 0);
  int before = stat_of("launches");
  ck_assert_int_eq(ew(&x, &y), TDSL_OK);
  ck_assert_int_eq(stat_of("launches"), before + 1);
  unsigned g[3], b[3];
  uint64_t p[256];
  int np = last_launch(g, b, p, 256);
  ck_assert_int_gt(np, 2);
  ck_assert_uint_eq(g[0], 4); /* ceil(1000 / 256) */
  ck_assert_uint_eq(g[1], 1);
  ck_assert_uint_eq(b[0], 256);
  ck_assert(has_param(p, np, (uint64_t)(uintptr_t)xbuf));
  ck_assert(has_param(p, np, (uint64_t)(uintptr_t)ybuf));
  ck_assert(has_param(p, np, 1000)); /* N */
  /* nothing to do: no launch */
  int64_t z[1] = {0};
  DLTensor x0 = cuda_t(xbuf, 1, z, 0), y0 = cuda_t(ybuf, 1, z, 0);
  ck_assert_int_eq(ew(&x0, &y0), TDSL_OK);
  ck_assert_int_eq(stat_of("launches"), before + 1);
}
END_TEST

/* The index check's device kernel (nest 0 of gat) as if index 9 at
 * position 2 were out of range: it lowers flags[0] and records the index
 * (cuda/check.c); the flags are its last parameter. */
static int check_launches, after_check;
static void good_index(const char *name, const uint64_t *p, int n) {
  (void)p, (void)n;
  if (strcmp(name, "gat__n0") == 0) check_launches++;
  else after_check += check_launches > 0;
}
static void bad_index(const char *name, const uint64_t *p, int n) {
  if (strcmp(name, "gat__n0") != 0 || n < 1) return;
  int64_t *flags = (int64_t *)(uintptr_t)p[n - 1];
  check_launches++;
  flags[0] = 2, flags[1] = 9;
}

/* Index checks: a launch of the check kernel whose verdict comes back
 * (memset, launch, copy, synchronize) before the indexing nest launches;
 * a failed check launches it once more for the first bad index, returns
 * TDSL_E_INDEX with the CPU's message and launches nothing else; the
 * flags are freed either way. */
START_TEST(index_check_verdict) {
  typedef int (*KI)(const DLTensor *, const DLTensor *, DLTensor *);
  static int64_t ibuf[16];
  for (int lib = 0; lib < 2; lib++) {
    KI gat = (KI)fn(lib, "gat");
    int64_t n[1] = {5}, m[1] = {4};
    DLTensor x = cuda_t(xbuf, 1, n, 0), i = cuda_t(ibuf, 1, m, 0), y = cuda_t(ybuf, 1, m, 0);
    i.dtype = (DLDataType){kDLInt, 64, 1};
    int launches = stat_of("launches"), syncs = stat_of("syncs"), live = stat_of("live");
    check_launches = after_check = 0;
    set_launch_hook(good_index);
    ck_assert_int_eq(gat(&x, &i, &y), TDSL_OK);
    set_launch_hook(NULL);
    ck_assert_int_eq(check_launches, 1);
    ck_assert_int_eq(after_check, stat_of("launches") - launches - 1); /* the check first */
    if (!lib) ck_assert_int_eq(stat_of("launches") - launches, 2); /* -O2: check, one nest */
    ck_assert_int_ge(stat_of("syncs") - syncs, 1);
    ck_assert_int_eq(stat_of("live"), live);
    set_launch_hook(bad_index);
    check_launches = 0;
    launches = stat_of("launches");
    ck_assert_int_eq(gat(&x, &i, &y), TDSL_E_INDEX);
    set_launch_hook(NULL);
    ck_assert_int_eq(check_launches, 2);
    ck_assert_int_eq(stat_of("launches") - launches, 2); /* the check, twice; nothing else */
    ck_assert_str_eq(tdsl_last_error_of(so[lib]), "kernel 'gat': index at 18:12: index 9 is out "
                     "of range for dim 0 of 'x' (size 5)");
    ck_assert_int_eq(stat_of("live"), live);
  }
}
END_TEST

START_TEST(scalars_by_bits) {
  typedef int (*KS)(const DLTensor *, float, DLTensor *);
  KS sc = (KS)fn(0, "sc");
  int64_t n[1] = {10};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 0);
  ck_assert_int_eq(sc(&x, 1.5f, &y), TDSL_OK);
  unsigned g[3], b[3];
  uint64_t p[256];
  int np = last_launch(g, b, p, 256);
  uint32_t bits;
  float a = 1.5f;
  memcpy(&bits, &a, 4);
  ck_assert_msg(has_param(p, np, bits), "the scalar's bits are not a parameter");
}
END_TEST

START_TEST(row_group_is_one_launch) {
  int64_t s[2] = {37, 100};
  DLTensor x = cuda_t(xbuf, 2, s, 0), y = cuda_t(ybuf, 2, s, 0);
  int before = stat_of("launches");
  ck_assert_int_eq(((K1)fn(0, "sm"))(&x, &y), TDSL_OK);
  ck_assert_int_eq(stat_of("launches"), before + 1); /* -O2: one kernel */
  unsigned g[3], b[3];
  uint64_t p[256];
  last_launch(g, b, p, 256);
  ck_assert_uint_eq(g[0], 5); /* rows of 100 in registers, a warp per row: 8 rows per block */
  ck_assert_uint_eq(b[0], 256);
  /* a warp per row (8 per block) up to 1024 elements, then a block; rows
   * that are not a multiple of 4, or a misaligned x, take the general
   * kernel (a block per row) */
  int64_t rows[5][2] = {{37, 1024}, {37, 1025}, {37, 4097}, {37, 1023}, {37, 1024}};
  unsigned want[5] = {5, 37, 37, 37, 37};
  for (int i = 0; i < 5; i++) {
    /* device addresses the stand-in never touches, apart by more than a tensor */
    DLTensor xl = cuda_t((void *)(uintptr_t)(i == 4 ? 0x10000004 : 0x10000000), 2, rows[i], 0);
    DLTensor yl = cuda_t((void *)(uintptr_t)0x20000000, 2, rows[i], 0);
    ck_assert_int_eq(((K1)fn(0, "sm"))(&xl, &yl), TDSL_OK);
    last_launch(g, b, p, 256);
    ck_assert_uint_eq(g[0], want[i]);
  }
  int64_t none[2] = {37, 0}; /* empty rows: the general kernel, a block per row */
  DLTensor xe = cuda_t(xbuf, 2, none, 0), ye = cuda_t(ybuf, 2, none, 0);
  ck_assert_int_eq(((K1)fn(0, "sm"))(&xe, &ye), TDSL_OK);
  last_launch(g, b, p, 256);
  ck_assert_uint_eq(g[0], 37);
  before = stat_of("launches");
  ck_assert_int_eq(((K1)fn(1, "sm"))(&x, &y), TDSL_OK);
  ck_assert_int_eq(stat_of("launches"), before + 4); /* -O0: max, sum, divide, result copy */
}
END_TEST

START_TEST(matmul_grid) {
  int64_t as[2] = {100, 30}, bs[2] = {30, 70}, cs[2] = {100, 70};
  DLTensor a = cuda_t(xbuf, 2, as, 0), b = cuda_t(ybuf, 2, bs, 0), c = cuda_t(zbuf, 2, cs, 0);
  ck_assert_int_eq(((K2)fn(0, "mm"))(&a, &b, &c), TDSL_OK);
  unsigned g[3], bl[3];
  uint64_t p[256];
  last_launch(g, bl, p, 256);
  ck_assert_uint_eq(g[0], 2); /* ceil(70 / 64) column blocks */
  ck_assert_uint_eq(g[1], 2); /* ceil(100 / 64) row blocks */
  ck_assert_uint_eq(g[2], 1);
  ck_assert_uint_eq(bl[0], 256);
}
END_TEST

START_TEST(scratch_in_stream_order) {
  typedef int (*KT)(const DLTensor *, DLTensor *, DLTensor *);
  int64_t n[1] = {500};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 0), s = cuda_t(zbuf, 0, NULL, 0);
  int allocs = stat_of("async_allocs"), frees = stat_of("async_frees"), live = stat_of("live");
  int before = stat_of("launches");
  ck_assert_int_eq(((KT)fn(0, "two"))(&x, &y, &s), TDSL_OK);
  ck_assert_int_gt(stat_of("async_allocs"), allocs);
  ck_assert_int_eq(stat_of("async_frees") - frees, stat_of("async_allocs") - allocs);
  ck_assert_int_eq(stat_of("live"), live);
  ck_assert_int_eq(stat_of("launches"), before + 3);
}
END_TEST

START_TEST(devices_must_agree) {
  K1 ew = (K1)fn(0, "ew");
  int64_t n[1] = {8};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 1);
  int before = stat_of("launches");
  ck_assert_int_eq(ew(&x, &y), TDSL_E_DEVICE);
  ck_assert_ptr_nonnull(strstr(tdsl_last_error_of(so[0]), "device"));
  DLTensor h = x;
  h.device.device_type = kDLCPU;
  ck_assert_int_eq(ew(&h, &y), TDSL_E_DEVICE);
  ck_assert_int_eq(stat_of("launches"), before);
}
END_TEST

START_TEST(shape_query_launches_nothing) {
  int64_t n[1] = {77}, out[1] = {-1};
  DLTensor x = cuda_t(xbuf, 1, n, 0), q = cuda_t(NULL, 1, out, 0);
  int before = stat_of("launches");
  ck_assert_int_eq(((K1)fn(0, "ew"))(&x, &q), TDSL_OK);
  ck_assert_int_eq(out[0], 77);
  ck_assert_int_eq(stat_of("launches"), before);
}
END_TEST

int main(void) {
  if (!getenv("TDSL_FAKE_CUDA")) {
    printf("test_cuda_host: skipped: needs the stand-in driver (ctest sets TDSL_FAKE_CUDA)\n");
    return 77;
  }
  Suite *s = suite_create("cuda_host");
  TCase *t = tcase_create("host");
  tcase_add_unchecked_fixture(t, setup, teardown);
  tcase_set_timeout(t, 120);
  tcase_add_test(t, elementwise_one_launch);
  tcase_add_test(t, scalars_by_bits);
  tcase_add_test(t, index_check_verdict);
  tcase_add_test(t, row_group_is_one_launch);
  tcase_add_test(t, matmul_grid);
  tcase_add_test(t, scratch_in_stream_order);
  tcase_add_test(t, devices_must_agree);
  tcase_add_test(t, shape_query_launches_nothing);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_NOFORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
