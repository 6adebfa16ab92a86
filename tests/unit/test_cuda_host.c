/* test_cuda_host.c — the host side of CUDA kernels (cuda/host.c) against
 * the stand-in driver tests/unit/fake_libcuda.c (ctest puts it first on
 * LD_LIBRARY_PATH; "device memory" is host memory and kernels do not
 * run).  Each kernel is compiled with tdslc --target=cuda --emit=so and
 * called with kDLCUDA descriptors; the fake records every launch: its
 * grid, its block, and its parameters as many as the PTX entry declares
 * (each read as 8 bytes), so these tests check that host and device agree
 * on the parameter list, that each launch unit is one launch sized as
 * cuda/cuda.h says, that empty work launches nothing, that scratch is
 * allocated and freed in stream order, that a long reduction to few
 * outputs is split (two launches sharing their partials), that device mismatches fail
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
    "kernel gat(x: f32[N], i: i64[M]) -> f32[M] {\n  return x.index_select(0, i) + 1.0\n}\n"
    "kernel big(x: f32[N]) -> f32[] {\n  return x.sum()\n}\n"
    "kernel am3(x: f32[3, N]) -> i64[3] {\n  return x.argmax(1)\n}\n"
    "kernel cs(x: f32[N, 64]) -> f32[64] {\n  return x.sum(0)\n}\n"
    "kernel sl(x: f32[N, 5]) -> f32[N, 4] {\n  return x[:, 1:] * 2.0\n}\n"
    "kernel bc(x: f32[R, C], b: f32[C]) -> f32[R, C] {\n  return x + b\n}\n"
    "kernel tr(x: f32[A, B]) -> f32[B, A] {\n  return x.permute(1, 0).contiguous()\n}\n"
    "kernel h8(x: f16[N]) -> f16[N] {\n  return x * 2.0\n}\n"
    "kernel rs(x: f32[R, N]) -> f32[R] {\n  return x.sum(1)\n}\n";

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

/* The library's own copy of the runtime's stream (NULL: legacy). */
static void set_stream(int lib, void *stream) {
  int (*f)(void *) = NULL;
  *(void **)&f = dlsym(so[lib], "tdsl_cuda_set_stream");
  ck_assert_ptr_nonnull(f);
  f(stream);
}

/* Whether v is among the launch's parameters. */
static int has_param(const uint64_t *p, int n, uint64_t v) {
  for (int i = 0; i < n; i++)
    if (p[i] == v) return 1;
  return 0;
}

static float xbuf[8192] __attribute__((aligned(16))), ybuf[8192] __attribute__((aligned(16))),
    zbuf[8192] __attribute__((aligned(16)));

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
  ck_assert_uint_eq(g[0], 1); /* the vector variant: ceil(1000 / (4 * 256)) */
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
    set_stream(lib, (void *)0x5150); /* allocated per call (legacy_stream_keeps_scratch) */
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
    set_stream(lib, NULL);
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

/* The tile shape follows the sizes (cuda/gemm.c): 128 x 128 once there
 * are CU_GEMM_BIG_TILES (256) of them, else 64 x 64. */
START_TEST(matmul_grid_tiles) {
  static const struct {
    int64_t m, n;
    unsigned gx, gy;
  } cases[] = {
      {2048, 2048, 16, 16}, /* 256 big tiles */
      {2048, 1900, 30, 32}, /* 16 x 15 = 240 big tiles: small ones */
      {1024, 1024, 16, 16}, /* 64 big tiles: small ones */
      {4096, 4000, 32, 32}, /* 1024 big tiles */
      {100, 5000, 79, 2},   /* M < 128 */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t as[2] = {cases[i].m, 30}, bs[2] = {30, cases[i].n}, cs[2] = {cases[i].m, cases[i].n};
    /* "device" addresses far apart (the fake runs no kernel): no overlap */
    DLTensor a = cuda_t((void *)(uintptr_t)(1ull << 40), 2, as, 0),
             b = cuda_t((void *)(uintptr_t)(2ull << 40), 2, bs, 0),
             c = cuda_t((void *)(uintptr_t)(3ull << 40), 2, cs, 0);
    ck_assert_int_eq(((K2)fn(0, "mm"))(&a, &b, &c), TDSL_OK);
    unsigned g[3], bl[3];
    uint64_t p[256];
    last_launch(g, bl, p, 256);
    ck_assert_uint_eq(g[0], cases[i].gx);
    ck_assert_uint_eq(g[1], cases[i].gy);
    ck_assert_uint_eq(g[2], 1);
    ck_assert_uint_eq(bl[0], 256);
  }
}
END_TEST

START_TEST(scratch_in_stream_order) {
  typedef int (*KT)(const DLTensor *, DLTensor *, DLTensor *);
  int64_t n[1] = {500};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 0), s = cuda_t(zbuf, 0, NULL, 0);
  set_stream(0, (void *)0x5150); /* a stream of the application's: per call */
  int allocs = stat_of("async_allocs"), frees = stat_of("async_frees"), live = stat_of("live");
  int before = stat_of("launches");
  ck_assert_int_eq(((KT)fn(0, "two"))(&x, &y, &s), TDSL_OK);
  ck_assert_int_gt(stat_of("async_allocs"), allocs);
  ck_assert_int_eq(stat_of("async_frees") - frees, stat_of("async_allocs") - allocs);
  ck_assert_int_eq(stat_of("live"), live);
  ck_assert_int_eq(stat_of("launches"), before + 3);
  set_stream(0, NULL);
}
END_TEST

/* On the legacy default stream scratch blocks are kept (runtime/cuda.c):
 * after the first call, calls allocate and free nothing; a call that
 * needs more grows a block (freed and allocated in stream order) once. */
START_TEST(legacy_stream_keeps_scratch) {
  typedef int (*KT)(const DLTensor *, DLTensor *, DLTensor *);
  size_t (*kept)(void) = NULL;
  *(void **)&kept = dlsym(so[0], "rt_cuda_kept_bytes");
  ck_assert_ptr_nonnull(kept);
  int64_t n[1] = {500}, r[2] = {37, 100}, big[2] = {2000, 4};
  DLTensor x = cuda_t(xbuf, 1, n, 0), y = cuda_t(ybuf, 1, n, 0), s = cuda_t(zbuf, 0, NULL, 0);
  ck_assert_int_eq(((KT)fn(0, "two"))(&x, &y, &s), TDSL_OK);
  DLTensor a0 = cuda_t(xbuf, 2, r, 0), b0 = cuda_t(ybuf, 2, r, 0);
  ck_assert_int_eq(((K1)fn(0, "sm"))(&a0, &b0), TDSL_OK);
  ck_assert_uint_gt(kept(), 0);
  const char *names[] = {"async_allocs", "async_frees", "allocs", "frees", "syncs", "live"};
  int was[6];
  for (int i = 0; i < 6; i++) was[i] = stat_of(names[i]);
  int launches = stat_of("launches");
  for (int rep = 0; rep < 3; rep++) {
    ck_assert_int_eq(((KT)fn(0, "two"))(&x, &y, &s), TDSL_OK);
    DLTensor a = cuda_t(xbuf, 2, r, 0), b = cuda_t(ybuf, 2, r, 0);
    ck_assert_int_eq(((K1)fn(0, "sm"))(&a, &b), TDSL_OK);
  }
  for (int i = 0; i < 6; i++) ck_assert_msg(stat_of(names[i]) == was[i], "%s", names[i]);
  ck_assert_int_eq(stat_of("launches"), launches + 3 * 4);
  /* 2000 rows: the softmax's two statistics (8000 bytes each) grow their blocks */
  size_t before = kept();
  DLTensor a = cuda_t(xbuf, 2, big, 0), b = cuda_t(ybuf, 2, big, 0);
  ck_assert_int_eq(((K1)fn(0, "sm"))(&a, &b), TDSL_OK);
  ck_assert_uint_gt(kept(), before);
  ck_assert_int_eq(stat_of("async_allocs") - was[0], stat_of("async_frees") - was[1]);
  ck_assert_int_eq(stat_of("live"), was[5]);
  for (int i = 0; i < 6; i++) was[i] = stat_of(names[i]);
  ck_assert_int_eq(((K1)fn(0, "sm"))(&a, &b), TDSL_OK);
  for (int i = 0; i < 6; i++) ck_assert_msg(stat_of(names[i]) == was[i], "%s", names[i]);
}
END_TEST

/* What one call costs the driver: an elementwise kernel one
 * cuCtxGetCurrent and one launch; a softmax (two scratch buffers, kept on
 * the legacy stream) three cuCtxGetCurrent and one launch. */
START_TEST(driver_calls_per_call) {
  const char *names[] = {"get_current", "get_device", "set_current", "launches",
                         "async_allocs", "async_frees", "allocs", "frees", "syncs"};
  int ew_calls[] = {1, 0, 0, 1, 0, 0, 0, 0, 0}, sm_calls[] = {3, 0, 0, 1, 0, 0, 0, 0, 0};
  int64_t n[1] = {1000}, r[2] = {37, 100};
  for (int k = 0; k < 2; k++) {
    DLTensor x = k ? cuda_t(xbuf, 2, r, 0) : cuda_t(xbuf, 1, n, 0);
    DLTensor y = k ? cuda_t(ybuf, 2, r, 0) : cuda_t(ybuf, 1, n, 0);
    K1 f = (K1)fn(0, k ? "sm" : "ew");
    ck_assert_int_eq(f(&x, &y), TDSL_OK); /* warm: module loaded, scratch kept */
    int was[9];
    for (int i = 0; i < 9; i++) was[i] = stat_of(names[i]);
    ck_assert_int_eq(f(&x, &y), TDSL_OK);
    for (int i = 0; i < 9; i++)
      ck_assert_msg(stat_of(names[i]) - was[i] == (k ? sm_calls : ew_calls)[i],
                    "%s: %s %d, expected %d", k ? "sm" : "ew", names[i],
                    stat_of(names[i]) - was[i], (k ? sm_calls : ew_calls)[i]);
  }
}
END_TEST

/* Split reductions (cuda/nest.c): each launch's kernel name, grid and
 * last parameter (the partials). */
static struct {
  char name[32];
  unsigned grid[2];
  uint64_t partials;
} split_seen[8];
static int split_n;
static void record_split(const char *name, const uint64_t *p, int n) {
  if (split_n >= 8 || n < 1) return;
  unsigned g[3], b[3];
  uint64_t q[256];
  last_launch(g, b, q, 256);
  snprintf(split_seen[split_n].name, sizeof split_seen[split_n].name, "%s", name);
  split_seen[split_n].grid[0] = g[0], split_seen[split_n].grid[1] = g[1];
  split_seen[split_n++].partials = p[n - 1];
}

/* The inputs of split_reduction_launches: as long as the extents they are
 * described with (never read: the stand-in driver runs no kernel), so that
 * they cannot overlap the outputs in the entry's overlap check. */
static float big_in[100000 * 64] __attribute__((aligned(16)));

/* A long reduction to few outputs or along columns: the partial kernel
 * on S blocks per output group (S from the shapes: at most 512 blocks in
 * all, 16 elements per thread at least), then the finish kernel on a
 * block per output, both given the same partials, allocated and freed in
 * stream order; a short one (S = 1) is one launch that stores the result
 * itself, with no partials. */
START_TEST(split_reduction_launches) {
  for (int lib = 0; lib < 2; lib++) {
    set_stream(lib, (void *)0x5150); /* allocated per call (legacy_stream_keeps_scratch) */
    int64_t n[1] = {1 << 22};
    DLTensor x = cuda_t(big_in, 1, n, 0), s = cuda_t(zbuf, 0, NULL, 0);
    int allocs = stat_of("async_allocs"), frees = stat_of("async_frees"), live = stat_of("live");
    int before = stat_of("launches");
    split_n = 0;
    set_launch_hook(record_split);
    ck_assert_int_eq(((K1)fn(lib, "big"))(&x, &s), TDSL_OK);
    ck_assert_int_eq(stat_of("launches"), before + 2 + lib); /* -O0: and a result copy */
    ck_assert_int_eq(split_n, 2 + lib);
    ck_assert_str_eq(split_seen[0].name, "big__n0");
    ck_assert_str_eq(split_seen[1].name, "big__n0_fin");
    ck_assert_uint_eq(split_seen[0].grid[0], 512); /* min(512 / 1, 2^22 / 4096) */
    ck_assert_uint_eq(split_seen[0].grid[1], 1);
    ck_assert_uint_eq(split_seen[1].grid[0], 1);
    ck_assert(split_seen[0].partials != 0 && split_seen[0].partials == split_seen[1].partials);
    ck_assert_int_eq(stat_of("async_allocs") - allocs, 1 + lib); /* -O0: and the sum's scratch */
    ck_assert_int_eq(stat_of("async_frees") - frees, 1 + lib);
    ck_assert_int_eq(stat_of("live"), live);
    /* short: S = 1, one launch, no partials */
    n[0] = 1000;
    split_n = 0;
    before = stat_of("launches");
    allocs = stat_of("async_allocs");
    ck_assert_int_eq(((K1)fn(lib, "big"))(&x, &s), TDSL_OK);
    ck_assert_int_eq(stat_of("launches"), before + 1 + lib);
    ck_assert_uint_eq(split_seen[0].grid[0], 1);
    ck_assert_uint_eq(split_seen[0].partials, 0);
    ck_assert_int_eq(stat_of("async_allocs") - allocs, lib);
    /* three outputs: S = min(512 / 3, ceil(100000 / 4096)) = 25 */
    int64_t s2[2] = {3, 100000}, s1[1] = {3};
    DLTensor x2 = cuda_t(big_in, 2, s2, 0), y = cuda_t(ybuf, 1, s1, 0);
    y.dtype = (DLDataType){kDLInt, 64, 1};
    split_n = 0;
    ck_assert_int_eq(((K1)fn(lib, "am3"))(&x2, &y), TDSL_OK);
    ck_assert_int_eq(split_n, 2 + lib);
    ck_assert_uint_eq(split_seen[0].grid[0], 25);
    ck_assert_uint_eq(split_seen[0].grid[1], 3);
    ck_assert_str_eq(split_seen[1].name, "am3__n0_fin");
    ck_assert_uint_eq(split_seen[1].grid[0], 3);
    /* along columns: 32 outputs a block, 8 row lanes: S = min(512 / 2,
     * ceil(100000 / 128)) */
    int64_t s3[2] = {100000, 64}, s4[1] = {64};
    DLTensor x3 = cuda_t(big_in, 2, s3, 0), y3 = cuda_t(ybuf, 1, s4, 0);
    split_n = 0;
    ck_assert_int_eq(((K1)fn(lib, "cs"))(&x3, &y3), TDSL_OK);
    ck_assert_int_eq(split_n, 2 + lib);
    ck_assert_uint_eq(split_seen[0].grid[0], 256);
    ck_assert_uint_eq(split_seen[0].grid[1], 2);
    ck_assert_str_eq(split_seen[1].name, "cs__n0_fin");
    ck_assert_uint_eq(split_seen[1].grid[0], 64);
    /* a symbolic output count: split below 2048 outputs, else a warp
     * per output (8 a block) in one launch without partials */
    int64_t s5[2] = {3, 100000}, s6[1] = {3};
    DLTensor x5 = cuda_t(big_in, 2, s5, 0), y5 = cuda_t(ybuf, 1, s6, 0);
    split_n = 0;
    ck_assert_int_eq(((K1)fn(lib, "rs"))(&x5, &y5), TDSL_OK);
    ck_assert_int_eq(split_n, 2 + lib);
    ck_assert_uint_eq(split_seen[0].grid[0], 25);
    ck_assert_uint_eq(split_seen[0].grid[1], 3);
    ck_assert_str_eq(split_seen[1].name, "rs__n0_fin");
    s5[0] = s6[0] = 3000, s5[1] = 10;
    split_n = 0;
    ck_assert_int_eq(((K1)fn(lib, "rs"))(&x5, &y5), TDSL_OK);
    ck_assert_int_eq(split_n, 1 + lib);
    ck_assert_str_eq(split_seen[0].name, "rs__n0");
    ck_assert_uint_eq(split_seen[0].grid[0], 375);
    ck_assert_uint_eq(split_seen[0].grid[1], 1);
    ck_assert_uint_eq(split_seen[0].partials, 0);
    set_launch_hook(NULL);
    ck_assert_int_eq(stat_of("live"), live);
    set_stream(lib, NULL);
  }
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

/* The name of the last kernel launched. */
static char launched[128];
static void record_name(const char *name, const uint64_t *p, int n) {
  (void)p, (void)n;
  snprintf(launched, sizeof launched, "%s", name);
}

/* Launches k1 on (x, y) and checks the kernel the host picked and its
 * grid. */
static void expect1(K1 k, const DLTensor *x, DLTensor *y, const char *name, unsigned grid) {
  launched[0] = 0;
  set_launch_hook(record_name);
  int before = stat_of("launches");
  int rc = k(x, y);
  set_launch_hook(NULL);
  ck_assert_msg(rc == TDSL_OK, "%s: %d %s", name, rc, tdsl_last_error_of(so[0]));
  ck_assert_int_eq(stat_of("launches"), before + 1);
  ck_assert_str_eq(launched, name);
  unsigned g[3], b[3];
  uint64_t p[256];
  last_launch(g, b, p, 256);
  ck_assert_uint_eq(g[0], grid);
  ck_assert_uint_eq(b[0], 256);
}

/* Variants chosen at launch (cuda/variant.c): the vector kernel when
 * pointers, offsets, strides and the innermost extent allow it, the
 * 32-bit scalar one when they do not, the general 64-bit one when the
 * sizes need it; the tile kernel for a wide transposing copy, the untiled
 * ones for a narrow one. */
START_TEST(variants_chosen_at_launch) {
  static float big[4096] __attribute__((aligned(16)));
  K1 ew = (K1)fn(0, "ew");
  int64_t n[1] = {1000};
  DLTensor x = cuda_t(big, 1, n, 0), y = cuda_t(ybuf, 1, n, 0);
  expect1(ew, &x, &y, "ew__n0_v4", 1); /* 250 threads */
  int64_t n1[1] = {1001};
  DLTensor x1 = cuda_t(big, 1, n1, 0), y1 = cuda_t(ybuf, 1, n1, 0);
  expect1(ew, &x1, &y1, "ew__n0_i32", 4); /* the extent is not a multiple of 4 */
  DLTensor xo = x;
  xo.byte_offset = 4; /* element 0 not 16-byte aligned */
  expect1(ew, &xo, &y, "ew__n0_i32", 4);
  DLTensor yo = cuda_t(ybuf + 2, 1, n, 0); /* the output misaligned */
  expect1(ew, &x, &yo, "ew__n0_i32", 4);
  int64_t huge[1] = {(int64_t)3 << 30}; /* over 2^31 - 2^28 elements: 64-bit indices */
  /* (no kernel runs: far-apart stand-in addresses, 12 GiB each) */
  DLTensor xh = cuda_t((void *)(uintptr_t)(1ULL << 44), 1, huge, 0),
           yh = cuda_t((void *)(uintptr_t)(2ULL << 44), 1, huge, 0);
  expect1(ew, &xh, &yh, "ew__n0", 1u << 20);
  /* f16: 8 elements per vector */
  DLTensor h = cuda_t(big, 1, n, 0), hy = cuda_t(ybuf, 1, n, 0);
  h.dtype = hy.dtype = (DLDataType){kDLFloat, 16, 1};
  expect1((K1)fn(0, "h8"), &h, &hy, "h8__n0_v8", 1); /* 125 threads */
  /* a slice: offset 1 and row stride 5 are not multiples of 4 */
  int64_t s5[2] = {100, 5}, s4[2] = {100, 4};
  DLTensor xs = cuda_t(big, 2, s5, 0), ys = cuda_t(ybuf, 2, s4, 0);
  expect1((K1)fn(0, "sl"), &xs, &ys, "sl__n0_i32", 2);
  /* a broadcast row b (unit stride along the row: a vector load too) */
  K2 bc = (K2)fn(0, "bc");
  int64_t r8[2] = {64, 8}, c8[1] = {8}, r6[2] = {64, 6}, c6[1] = {6};
  DLTensor xb = cuda_t(big, 2, r8, 0), bb = cuda_t(zbuf, 1, c8, 0), yb = cuda_t(ybuf, 2, r8, 0);
  launched[0] = 0;
  set_launch_hook(record_name);
  ck_assert_int_eq(bc(&xb, &bb, &yb), TDSL_OK);
  ck_assert_str_eq(launched, "bc__n0_v4");
  DLTensor bo = cuda_t(zbuf + 1, 1, c8, 0); /* b misaligned */
  ck_assert_int_eq(bc(&xb, &bo, &yb), TDSL_OK);
  ck_assert_str_eq(launched, "bc__n0_i32");
  DLTensor x6 = cuda_t(big, 2, r6, 0), b6 = cuda_t(zbuf, 1, c6, 0), y6 = cuda_t(ybuf, 2, r6, 0);
  ck_assert_int_eq(bc(&x6, &b6, &y6), TDSL_OK); /* rows of 6: not whole vectors */
  ck_assert_str_eq(launched, "bc__n0_i32");
  set_launch_hook(NULL);
  /* transposing copies: x[A, B] -> [B, A] */
  K1 tr = (K1)fn(0, "tr");
  int64_t a64[2] = {100, 64}, t64[2] = {64, 100}, a3[2] = {100, 3}, t3[2] = {3, 100},
          b3[2] = {101, 3}, u3[2] = {3, 101};
  DLTensor xt = cuda_t(big, 2, a64, 0), yt = cuda_t(ybuf, 2, t64, 0);
  expect1(tr, &xt, &yt, "tr__n0_t32", 7); /* ceil(6400 / 1024) tiles at most */
  DLTensor x3 = cuda_t(big, 2, a3, 0), y3 = cuda_t(ybuf, 2, t3, 0);
  expect1(tr, &x3, &y3, "tr__n0_v4", 1); /* 3 rows: untiled, 75 threads */
  DLTensor x31 = cuda_t(big, 2, b3, 0), y31 = cuda_t(ybuf, 2, u3, 0);
  expect1(tr, &x31, &y31, "tr__n0_i32", 2);
}
END_TEST

/* The body of `.entry name(` in ptx (up to its closing brace), malloc'd. */
static char *ptx_entry(const char *ptx, const char *name) {
  char head[128];
  snprintf(head, sizeof head, ".entry %s(", name);
  const char *p = strstr(ptx, head);
  ck_assert_msg(p != NULL, "no entry %s", name);
  const char *e = strstr(p, "\n}");
  ck_assert_ptr_nonnull(e);
  return strndup(p, (size_t)(e - p));
}

/* What the variants are made of, in the PTX: ew's vector kernel loads and
 * stores 4 x f32 at once, the 32-bit kernels divide (and index) in 32
 * bits only, the general kernel keeps its 64-bit path; bc's broadcast
 * row is a vector load too. */
START_TEST(variant_ptx) {
  char cmd[512], path[128];
  snprintf(path, sizeof path, "%s/k.ptx", dir);
  snprintf(cmd, sizeof cmd, "%s %s/k.tdsl --target=cuda:sm_90 --emit=ptx -o %s", TDSL_TDSLC, dir,
           path);
  ck_assert_int_eq(system(cmd), 0);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  static char ptx[1 << 22];
  size_t n = fread(ptx, 1, sizeof ptx - 1, f);
  fclose(f);
  ptx[n] = 0;
  char *v4 = ptx_entry(ptx, "ew__n0_v4"), *i32 = ptx_entry(ptx, "ew__n0_i32");
  char *gen = ptx_entry(ptx, "ew__n0"), *bc = ptx_entry(ptx, "bc__n0_v4");
  ck_assert_ptr_nonnull(strstr(v4, "ld.global.v4.f32"));
  ck_assert_ptr_nonnull(strstr(v4, "st.global.v4.f32"));
  ck_assert_ptr_null(strstr(i32, ".v4."));
  ck_assert_ptr_nonnull(strstr(gen, "setp.ge.s64")); /* 64-bit loop bound */
  ck_assert_ptr_null(strstr(i32, "setp.ge.s64")); /* the 32-bit loop: no 64-bit bounds */
  ck_assert_ptr_null(strstr(i32, "setp.lt.s64"));
  ck_assert_ptr_nonnull(strstr(i32, "setp.ge.u32"));
  ck_assert_ptr_null(strstr(bc, "div.u64"));
  ck_assert_ptr_null(strstr(bc, "rem.u64"));
  ck_assert_int_eq(!!strstr(bc, "ld.global.v4.f32") + !!strstr(strstr(bc, "ld.global.v4.f32") + 1,
                                                                 "ld.global.v4.f32"),
                   2); /* x and the broadcast row b */
  free(v4), free(i32), free(gen), free(bc);
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
  tcase_add_test(t, matmul_grid_tiles);
  tcase_add_test(t, scratch_in_stream_order);
  tcase_add_test(t, split_reduction_launches);
  tcase_add_test(t, legacy_stream_keeps_scratch);
  tcase_add_test(t, driver_calls_per_call);
  tcase_add_test(t, devices_must_agree);
  tcase_add_test(t, shape_query_launches_nothing);
  tcase_add_test(t, variants_chosen_at_launch);
  tcase_add_test(t, variant_ptx);
  suite_add_tcase(s, t);
  SRunner *r = srunner_create(s);
  srunner_set_fork_status(r, CK_NOFORK);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
