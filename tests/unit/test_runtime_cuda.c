/* test_runtime_cuda.c — the CUDA part of libtdsl_runtime (runtime/cuda.c,
 * spec §7.3). Without a usable driver (this development machine has no
 * libcuda.so.1): every call fails with TDSL_E_NO_DEVICE and a clear
 * message, the driver is searched only once, prepare leaves fns untouched.
 * With a device: allocation, memset and copies round-trip, pinned memory,
 * a hand-written PTX module is loaded once per context and its kernels
 * run (default and user stream, large dynamic shared memory), errors for
 * bad PTX, missing entry points and absent devices, and an asynchronous
 * fault reported by tdsl_cuda_synchronize. Under TDSL_FAKE_CUDA=1 (ctest
 * test_runtime_cuda_fake) libcuda.so.1 is fake_libcuda.c's stand-in and
 * the loader, contexts, module cache, scratch and exact messages are
 * checked without a GPU. Tests that need another case return at once
 * (TDSL_TEST_CUDA=1 turns a missing real device into a failure). Check
 * forks each test, so every test initializes the driver in its own
 * process (the parent never touches CUDA). */
#include <check.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tdsl/runtime.h>

#include "rt_internal.h"

#define ASSERT_MSG_HAS(s)                                                 \
  ck_assert_msg(strstr(tdsl_last_error(), (s)) != NULL,                   \
                "message \"%s\" lacks \"%s\"", tdsl_last_error(), (s))

/* set42(int *p): *p = 42. iota(int *p): p[i] = i for the global x index. */
static const char test_ptx[] =
    ".version 7.0\n"
    ".target sm_50\n"
    ".address_size 64\n"
    "\n"
    ".visible .entry set42(.param .u64 set42_p)\n"
    "{\n"
    "  .reg .b32 %r<2>;\n"
    "  .reg .b64 %rd<3>;\n"
    "  ld.param.u64 %rd1, [set42_p];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mov.u32 %r1, 42;\n"
    "  st.global.u32 [%rd2], %r1;\n"
    "  ret;\n"
    "}\n"
    "\n"
    ".visible .entry iota(.param .u64 iota_p)\n"
    "{\n"
    "  .reg .b32 %r<5>;\n"
    "  .reg .b64 %rd<5>;\n"
    "  ld.param.u64 %rd1, [iota_p];\n"
    "  cvta.to.global.u64 %rd2, %rd1;\n"
    "  mov.u32 %r1, %ctaid.x;\n"
    "  mov.u32 %r2, %ntid.x;\n"
    "  mov.u32 %r3, %tid.x;\n"
    "  mad.lo.s32 %r4, %r1, %r2, %r3;\n"
    "  mul.wide.s32 %rd3, %r4, 4;\n"
    "  add.s64 %rd4, %rd2, %rd3;\n"
    "  st.global.u32 [%rd4], %r4;\n"
    "  ret;\n"
    "}\n";
static const char *const test_names[] = {"set42", "iota"};

static tdsl_cuda_module test_module(void) {
  tdsl_cuda_module m = {test_ptx, 2, test_names, NULL};
  return m;
}

/* True when the driver loads and reports a device; clears the error.
 * TDSL_TEST_CUDA=1 in the environment makes its absence a failure (for
 * runs on a GPU machine, where skipping would hide a broken loader). */
static int have_device(void) {
  int n = 0;
  int rc = tdsl_cuda_device_count(&n);
  const char *want = getenv("TDSL_TEST_CUDA");
  if (want && strcmp(want, "1") == 0)
    ck_assert_msg(rc == TDSL_OK && n > 0, "TDSL_TEST_CUDA=1 but: %s",
                  tdsl_last_error());
  tdsl_clear_error();
  return rc == TDSL_OK && n > 0;
}

/* Under ctest's test_runtime_cuda_fake, libcuda.so.1 is the stand-in of
 * fake_libcuda.c: the fake tests run, the others return. */
static int fake_driver(void) {
  const char *e = getenv("TDSL_FAKE_CUDA");
  return e && strcmp(e, "1") == 0;
}

/* A real device: the device tests run. */
static int have_real_device(void) { return !fake_driver() && have_device(); }

/* The message part that says why: libcuda.so.1 missing, or no device. */
static void assert_no_device(int rc) {
  ck_assert_int_eq(rc, TDSL_E_NO_DEVICE);
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_NO_DEVICE);
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib) {
    ASSERT_MSG_HAS("no CUDA");
    dlclose(lib);
  } else {
    ASSERT_MSG_HAS("no CUDA driver: libcuda.so.1 could not be loaded (");
  }
}

static DLTensor cuda_tensor(void *data, int32_t device_id, int64_t *shape) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCUDA;
  t.device.device_id = device_id;
  t.ndim = 2;
  t.dtype = TDSL_F32;
  t.shape = shape;
  return t;
}

/* ---- without a device -------------------------------------------------- */

START_TEST(test_no_device_every_call) {
  if (fake_driver() || have_device())
    return;
  int n = 7;
  assert_no_device(tdsl_cuda_device_count(&n));
  ck_assert_int_eq(n, 0);
  void *p = (void *)&n;
  assert_no_device(tdsl_cuda_malloc(&p, 16, 0));
  ck_assert_ptr_null(p);
  ASSERT_MSG_HAS("tdsl_cuda_malloc: ");
  assert_no_device(tdsl_cuda_free((void *)0x1000));
  p = (void *)&n;
  assert_no_device(tdsl_cuda_malloc_host(&p, 16));
  ck_assert_ptr_null(p);
  assert_no_device(tdsl_cuda_free_host((void *)0x1000));
  char host[4];
  assert_no_device(tdsl_cuda_memcpy_htod((void *)0x1000, host, 4));
  assert_no_device(tdsl_cuda_memcpy_dtoh(host, (void *)0x1000, 4));
  assert_no_device(tdsl_cuda_memcpy_dtod((void *)0x1000, (void *)0x2000, 4));
  assert_no_device(tdsl_cuda_memset((void *)0x1000, 0, 4));
  assert_no_device(tdsl_cuda_synchronize());
  ASSERT_MSG_HAS("tdsl_cuda_synchronize: ");
  assert_no_device(tdsl_cuda_launch("k", (void *)0x1000, 1, 1, 1, 1, 1, 1, 0,
                                    NULL));
  ASSERT_MSG_HAS("kernel k: ");
  /* Freeing nothing needs no driver. */
  ck_assert_int_eq(tdsl_cuda_free(NULL), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free_host(NULL), TDSL_OK);
  tdsl_cuda_scratch_free(NULL);
}
END_TEST

START_TEST(test_no_device_scratch) {
  if (fake_driver() || have_device())
    return;
  ck_assert_ptr_null(tdsl_cuda_scratch("softmax", 1024));
  assert_no_device(tdsl_last_error_code());
  ASSERT_MSG_HAS("kernel softmax: no CUDA");
}
END_TEST

START_TEST(test_no_device_prepare) {
  if (fake_driver() || have_device())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2] = {(void *)0x11, (void *)0x22};
  assert_no_device(tdsl_cuda_prepare("gelu", &m, 0, fns));
  ASSERT_MSG_HAS("kernel gelu: no CUDA");
  ck_assert_ptr_eq(fns[0], (void *)0x11);
  ck_assert_ptr_eq(fns[1], (void *)0x22);
  ck_assert_ptr_null(m.state);
  /* Without a kernel name the function's name stands in. */
  assert_no_device(tdsl_cuda_prepare(NULL, &m, 0, fns));
  ASSERT_MSG_HAS("tdsl_cuda_prepare: no CUDA");
}
END_TEST

/* ---- either way ------------------------------------------------------- */

START_TEST(test_load_once) {
  int had = have_device();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int n;
  for (int i = 0; i < 200000; i++)
    tdsl_cuda_device_count(&n);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  ck_assert_int_eq(rt_cuda_load_count(), 1);
  /* A dlopen search per call would take tens of microseconds each. */
  ck_assert_msg(s < 2.0, "200000 calls took %.3f s", s);
  ck_assert_int_eq(have_device(), had);
}
END_TEST

typedef struct StreamArg {
  void *mine;            /* the stream this thread sets */
  pthread_barrier_t *both;
  void *seen_before;     /* get_stream before setting */
  void *seen_after;      /* get_stream after both threads set theirs */
} StreamArg;

static void *stream_thread(void *p) {
  StreamArg *a = p;
  a->seen_before = tdsl_cuda_get_stream();
  tdsl_cuda_set_stream(a->mine);
  pthread_barrier_wait(a->both);
  a->seen_after = tdsl_cuda_get_stream();
  return NULL;
}

START_TEST(test_stream_per_thread) {
  ck_assert_ptr_null(tdsl_cuda_get_stream());
  ck_assert_int_eq(tdsl_cuda_set_stream((void *)0x1234), TDSL_OK);
  ck_assert_ptr_eq(tdsl_cuda_get_stream(), (void *)0x1234);
  pthread_barrier_t both;
  pthread_barrier_init(&both, NULL, 2);
  StreamArg a[2] = {{(void *)0xa0, &both, NULL, NULL},
                    {(void *)0xb0, &both, NULL, NULL}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    ck_assert_int_eq(pthread_create(&th[i], NULL, stream_thread, &a[i]), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(th[i], NULL);
  pthread_barrier_destroy(&both);
  for (int i = 0; i < 2; i++) {
    ck_assert_ptr_null(a[i].seen_before);
    ck_assert_ptr_eq(a[i].seen_after, a[i].mine);
  }
  ck_assert_ptr_eq(tdsl_cuda_get_stream(), (void *)0x1234);
  tdsl_cuda_set_stream(NULL);
  ck_assert_ptr_null(tdsl_cuda_get_stream());
}
END_TEST

START_TEST(test_check_device) {
  int64_t shape[2] = {2, 3};
  DLTensor x = cuda_tensor((void *)0x1000, 1, shape);
  DLTensor y = cuda_tensor((void *)0x2000, 1, shape);
  DLTensor z = cuda_tensor((void *)0x3000, 0, shape);
  int32_t dev = -1;
  ck_assert_int_eq(tdsl_cuda_check_device("k", "x", &x, &dev), TDSL_OK);
  ck_assert_int_eq(dev, 1);
  ck_assert_int_eq(tdsl_cuda_check_device("k", "y", &y, &dev), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_check_device("k", "out0", &z, &dev),
                   TDSL_E_DEVICE);
  ck_assert_int_eq(dev, 1);
  ASSERT_MSG_HAS("kernel k: argument 'out0': ");
  ASSERT_MSG_HAS("expected CUDA device 1");
  ASSERT_MSG_HAS("got device 0");
  ck_assert_int_eq(tdsl_cuda_check_device("k", "w", NULL, &dev), TDSL_E_NULL);
}
END_TEST

/* The entry checks read descriptors only: device pointers that would
 * fault if dereferenced on the host pass them. */
START_TEST(test_entry_checks_cuda_tensors) {
  int64_t shape[2] = {4, 8};
  DLTensor x = cuda_tensor((void *)(uintptr_t)0x7f0000001000ull, 0, shape);
  DLTensor out = cuda_tensor((void *)(uintptr_t)0x7f0000002000ull, 0, shape);
  ck_assert_int_eq(tdsl_check_tensor("k", "x", &x, TDSL_F32, 2, kDLCUDA),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_check_output("k", "out0", &out, TDSL_F32, 2, kDLCUDA),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_check_data("k", "x", &x), TDSL_OK);
  ck_assert_int_eq(tdsl_check_layout("k", "x", &x, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_check_align("k", "x", &x), TDSL_OK);
  ck_assert_int_eq(tdsl_check_extent("k", "x", &x), TDSL_OK);
  const DLTensor *outs[] = {&out}, *ins[] = {&x};
  ck_assert_int_eq(tdsl_check_overlap("k", outs, 1, ins, 1), TDSL_OK);
  ck_assert_int_eq(tdsl_check_tensor("k", "x", &x, TDSL_F32, 2, kDLCPU),
                   TDSL_E_DEVICE);
  ASSERT_MSG_HAS("expected device cpu, got cuda");
  DLTensor empty = cuda_tensor(NULL, 0, (int64_t[2]){0, 8});
  ck_assert_int_eq(tdsl_check_data("k", "e", &empty), TDSL_OK);
}
END_TEST

/* ---- with a device ---------------------------------------------------- */

START_TEST(test_memory_round_trip) {
  if (!have_real_device())
    return;
  enum { N = 1000 };
  unsigned char host[N], back[N];
  for (int i = 0; i < N; i++)
    host[i] = (unsigned char)(i * 7);
  void *a = NULL, *b = NULL, *z = NULL;
  ck_assert_int_eq(tdsl_cuda_malloc(&a, N, 0), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_malloc(&b, N, 0), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_malloc(&z, 0, 0), TDSL_OK);
  ck_assert_ptr_nonnull(a);
  ck_assert_ptr_nonnull(z);
  ck_assert_ptr_ne(a, z);
  ck_assert_int_eq(tdsl_cuda_memset(b, 0x5a, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, b, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(back[i], 0x5a);
  ck_assert_int_eq(tdsl_cuda_memcpy_htod(a, host, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtod(b, a, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, b, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  ck_assert_int_eq(memcmp(host, back, N), 0);
  ck_assert_int_eq(tdsl_cuda_memcpy_htod(a, NULL, 0), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_htod(a, NULL, 4), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_cuda_free(a), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(b), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(z), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(NULL), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(host), TDSL_E_INVALID);
  ASSERT_MSG_HAS("is not CUDA device memory");
  int n = 0;
  ck_assert_int_eq(tdsl_cuda_device_count(&n), TDSL_OK);
  void *p = (void *)host;
  ck_assert_int_eq(tdsl_cuda_malloc(&p, 16, n), TDSL_E_DEVICE);
  ck_assert_ptr_null(p);
  ASSERT_MSG_HAS("does not exist");
  /* More than any device has: the driver's out-of-memory is NOMEM. */
  ck_assert_int_eq(tdsl_cuda_malloc(&p, (size_t)1 << 50, 0), TDSL_E_NOMEM);
  ASSERT_MSG_HAS("cannot allocate");
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
}
END_TEST

START_TEST(test_pinned_memory) {
  if (!have_real_device())
    return;
  enum { N = 4096 };
  unsigned *h = NULL, *z = NULL;
  void *d = NULL;
  ck_assert_int_eq(tdsl_cuda_malloc_host((void **)&h, N * sizeof *h), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_malloc_host((void **)&z, 0), TDSL_OK);
  ck_assert_ptr_nonnull(z);
  ck_assert_int_eq(tdsl_cuda_malloc(&d, N * sizeof *h, 0), TDSL_OK);
  for (unsigned i = 0; i < N; i++)
    h[i] = i * 3u + 1u;
  ck_assert_int_eq(tdsl_cuda_memcpy_htod(d, h, N * sizeof *h), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  memset(h, 0, N * sizeof *h);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(h, d, N * sizeof *h), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  for (unsigned i = 0; i < N; i++)
    ck_assert_uint_eq(h[i], i * 3u + 1u);
  ck_assert_int_eq(tdsl_cuda_free(d), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free_host(h), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free_host(z), TDSL_OK);
}
END_TEST

START_TEST(test_prepare_launch) {
  if (!have_real_device())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2] = {NULL, NULL}, *again[2] = {NULL, NULL};
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, fns), TDSL_OK);
  ck_assert_ptr_nonnull(fns[0]);
  ck_assert_ptr_nonnull(fns[1]);
  ck_assert_ptr_ne(fns[0], fns[1]);
  ck_assert_ptr_nonnull(m.state);
  void *state = m.state;
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, again), TDSL_OK);
  ck_assert_ptr_eq(m.state, state);
  ck_assert_ptr_eq(again[0], fns[0]); /* cached: the same handles */
  ck_assert_ptr_eq(again[1], fns[1]);

  enum { B = 128, G = 8 };
  int *d = tdsl_cuda_scratch("t", G * B * (int64_t)sizeof(int));
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(tdsl_cuda_memset(d, 0xff, G * B * sizeof(int)), TDSL_OK);
  void *args[] = {&d};
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[0], 1, 1, 1, 1, 1, 1, 0, args),
                   TDSL_OK);
  int v = 0;
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(&v, d, sizeof v), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  ck_assert_int_eq(v, 42);
  /* 64 KiB of dynamic shared memory needs the opt-in the launch makes. */
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[1], G, 1, 1, B, 1, 1, 64 * 1024,
                                    args),
                   TDSL_OK);
  int back[G * B];
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, d, sizeof back), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  for (int i = 0; i < G * B; i++)
    ck_assert_int_eq(back[i], i);
  /* An empty grid launches nothing. */
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[0], 0, 1, 1, 1, 1, 1, 0, args),
                   TDSL_OK);
  /* A block larger than any device allows fails at the launch. */
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[0], 1, 1, 1, 4096, 1, 1, 0, args),
                   TDSL_E_CUDA);
  ASSERT_MSG_HAS("kernel t: cannot launch grid [1, 1, 1] of blocks [4096");
  tdsl_cuda_scratch_free(d);
  void *z = tdsl_cuda_scratch("t", 0);
  ck_assert_ptr_nonnull(z);
  tdsl_cuda_scratch_free(z);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
}
END_TEST

typedef int (*CuStreamCreate)(void **s, unsigned flags);
typedef int (*CuStreamDestroy)(void *s);

START_TEST(test_user_stream) {
  if (!have_real_device())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, fns), TDSL_OK);
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  ck_assert_ptr_nonnull(lib);
  CuStreamCreate create;
  CuStreamDestroy destroy;
  void *sym = dlsym(lib, "cuStreamCreate");
  ck_assert_ptr_nonnull(sym);
  memcpy(&create, &sym, sizeof sym);
  sym = dlsym(lib, "cuStreamDestroy_v2");
  ck_assert_ptr_nonnull(sym);
  memcpy(&destroy, &sym, sizeof sym);
  void *stream = NULL;
  ck_assert_int_eq(create(&stream, 1 /* CU_STREAM_NON_BLOCKING */), 0);
  tdsl_cuda_set_stream(stream);
  int *d = tdsl_cuda_scratch("t", 256 * sizeof(int));
  ck_assert_ptr_nonnull(d);
  void *args[] = {&d};
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[1], 2, 1, 1, 128, 1, 1, 0, args),
                   TDSL_OK);
  int back[256];
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, d, sizeof back), TDSL_OK);
  tdsl_cuda_scratch_free(d);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  for (int i = 0; i < 256; i++)
    ck_assert_int_eq(back[i], i);
  tdsl_cuda_set_stream(NULL);
  ck_assert_int_eq(destroy(stream), 0);
  dlclose(lib);
}
END_TEST

typedef struct PrepArg {
  tdsl_cuda_module *m;
  void *fns[2];
  int rc;
} PrepArg;

static void *prepare_thread(void *p) {
  PrepArg *a = p;
  a->rc = tdsl_cuda_prepare("t", a->m, 0, a->fns);
  return NULL;
}

START_TEST(test_prepare_threads) {
  if (!have_real_device())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  enum { T = 4 };
  PrepArg a[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    a[i] = (PrepArg){&m, {NULL, NULL}, -1};
    ck_assert_int_eq(pthread_create(&th[i], NULL, prepare_thread, &a[i]), 0);
  }
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(a[i].rc, TDSL_OK);
    ck_assert_ptr_nonnull(a[i].fns[0]);
    ck_assert_ptr_eq(a[i].fns[0], a[0].fns[0]); /* one module per context */
    ck_assert_ptr_eq(a[i].fns[1], a[0].fns[1]);
  }
}
END_TEST

START_TEST(test_prepare_errors) {
  if (!have_real_device())
    return;
  void *fns[2] = {(void *)0x11, (void *)0x22};
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  int n = 0;
  ck_assert_int_eq(tdsl_cuda_device_count(&n), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, n, fns), TDSL_E_DEVICE);
  char want[96];
  snprintf(want, sizeof want, "kernel t: device %d does not exist (%d CUDA device", n,
           n);
  ASSERT_MSG_HAS(want);
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, -1, fns), TDSL_E_DEVICE);
  static tdsl_cuda_module bad;
  bad = (tdsl_cuda_module){".version 7.0\n.target sm_50\n.address_size 64\n"
                          ".visible .entry broken() { bogus.instruction; }\n",
                          1, (const char *const[]){"broken"}, NULL};
  ck_assert_int_eq(tdsl_cuda_prepare("b", &bad, 0, fns), TDSL_E_CUDA);
  ASSERT_MSG_HAS("kernel b: cannot load the PTX module on CUDA device 0");
  ASSERT_MSG_HAS("JIT log: ");
  static tdsl_cuda_module missing;
  missing = (tdsl_cuda_module){test_ptx, 1, (const char *const[]){"nope"}, NULL};
  ck_assert_int_eq(tdsl_cuda_prepare("c", &missing, 0, fns), TDSL_E_CUDA);
  ASSERT_MSG_HAS("kernel c: the PTX module has no entry point 'nope'");
  ck_assert_ptr_eq(fns[0], (void *)0x11);
  ck_assert_ptr_eq(fns[1], (void *)0x22);
  ck_assert_int_eq(tdsl_cuda_prepare("t", NULL, 0, fns), TDSL_E_INVALID);
}
END_TEST

/* An illegal address in a kernel surfaces at the next synchronization, not
 * at the launch. It spoils the context for the process, so it runs in a
 * child forked before any CUDA call. */
static int fault_child(void) {
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  if (tdsl_cuda_prepare("t", &m, 0, fns) != TDSL_OK)
    return 10;
  int *bad = (int *)(uintptr_t)8;
  void *args[] = {&bad};
  if (tdsl_cuda_launch("t", fns[0], 1, 1, 1, 1, 1, 1, 0, args) != TDSL_OK)
    return 11;
  if (tdsl_cuda_synchronize() != TDSL_E_CUDA)
    return 12;
  if (!strstr(tdsl_last_error(), "tdsl_cuda_synchronize: ") ||
      !strstr(tdsl_last_error(), "CUDA_ERROR_"))
    return 13;
  return 0;
}

START_TEST(test_async_fault) {
  const char *fork_mode = getenv("CK_FORK");
  if (fork_mode && strcmp(fork_mode, "no") == 0)
    return; /* an earlier test may have initialized CUDA before the fork */
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0)
    _exit(have_real_device() ? fault_child() : 0);
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  ck_assert(WIFEXITED(status));
  ck_assert_int_eq(WEXITSTATUS(status), 0);
}
END_TEST


/* ---- with the stand-in driver (fake_libcuda.c) ------------------------- */

/* The fake tests count driver calls from a process's start and set the
 * stand-in's environment before the first call: they need Check's fork
 * per test (CK_FORK=no skips them). */
static int fake_fresh(void) {
  const char *fork_mode = getenv("CK_FORK");
  return fake_driver() && !(fork_mode && strcmp(fork_mode, "no") == 0);
}

/* fake_cuda_*() of the stand-in, found in the libcuda.so.1 cuda.c loaded
 * (device_count loads it and changes no context). */
static void *fake_sym(const char *name) {
  int n;
  tdsl_cuda_device_count(&n);
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  ck_assert_msg(lib != NULL, "libcuda.so.1 is not loaded");
  void *sym = dlsym(lib, name);
  ck_assert_msg(sym != NULL, "%s: not the stand-in driver", name);
  dlclose(lib);
  return sym;
}

static int fake_stat(const char *name) {
  int (*f)(const char *);
  void *sym = fake_sym("fake_cuda_stat");
  memcpy(&f, &sym, sizeof sym);
  int v = f(name);
  ck_assert_int_ge(v, 0);
  return v;
}

static int fake_current_device(void) {
  int (*f)(void);
  void *sym = fake_sym("fake_cuda_current_device");
  memcpy(&f, &sym, sizeof sym);
  return f();
}

static void *fake_last_stream(void) {
  void *(*f)(void);
  void *sym = fake_sym("fake_cuda_last_stream");
  memcpy(&f, &sym, sizeof sym);
  return f();
}

static void fake_fail_next_sync(int code) {
  void (*f)(int);
  void *sym = fake_sym("fake_cuda_fail_next_sync");
  memcpy(&f, &sym, sizeof sym);
  f(code);
}


START_TEST(test_fake_loader) {
  if (!fake_fresh())
    return;
  int n = 0;
  ck_assert_int_eq(tdsl_cuda_device_count(&n), TDSL_OK);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(tdsl_cuda_device_count(&n), TDSL_OK);
  ck_assert_int_eq(rt_cuda_load_count(), 1);
  ck_assert_int_eq(fake_stat("inits"), 1);
  /* Every entry point came through cuGetProcAddress_v2 asking for the
   * CUDA 12.0 versions with the default flags. */
  ck_assert_int_ge(fake_stat("proc_lookups"), 25);
  ck_assert_int_eq(fake_stat("bad_version"), 0);
  ck_assert_int_eq(fake_stat("retains"), 0); /* contexts: on first use */
}
END_TEST

START_TEST(test_fake_prepare_contexts) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *f0[2], *f1[2], *again[2];
  ck_assert_int_eq(fake_current_device(), -1);
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, f0), TDSL_OK);
  ck_assert_int_eq(fake_current_device(), 0);
  ck_assert_int_eq(fake_stat("module_loads"), 1);
  ck_assert_int_eq(fake_stat("set_current"), 1);
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, again), TDSL_OK);
  ck_assert_int_eq(fake_stat("module_loads"), 1); /* cached */
  ck_assert_int_eq(fake_stat("set_current"), 1);  /* already current */
  ck_assert_ptr_eq(again[0], f0[0]);
  ck_assert_ptr_eq(again[1], f0[1]);
  /* Another device: its own context, its own module. */
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 1, f1), TDSL_OK);
  ck_assert_int_eq(fake_current_device(), 1);
  ck_assert_int_eq(fake_stat("module_loads"), 2);
  ck_assert_ptr_ne(f1[0], f0[0]);
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, again), TDSL_OK);
  ck_assert_int_eq(fake_stat("module_loads"), 2);
  ck_assert_ptr_eq(again[0], f0[0]);
  ck_assert_int_eq(fake_stat("retains"), 2); /* once per device */
  void *keep[2] = {(void *)0x11, (void *)0x22};
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 2, keep), TDSL_E_DEVICE);
  ck_assert_str_eq(tdsl_last_error(),
                   "kernel t: device 2 does not exist (2 CUDA devices)");
  ck_assert_ptr_eq(keep[0], (void *)0x11);
  ck_assert_ptr_eq(keep[1], (void *)0x22);
  ck_assert_int_eq(fake_current_device(), 0);
}
END_TEST

START_TEST(test_fake_prepare_threads) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  enum { T = 8 };
  PrepArg a[T];
  pthread_t th[T];
  for (int i = 0; i < T; i++) {
    a[i] = (PrepArg){&m, {NULL, NULL}, -1};
    ck_assert_int_eq(pthread_create(&th[i], NULL, prepare_thread, &a[i]), 0);
  }
  for (int i = 0; i < T; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < T; i++) {
    ck_assert_int_eq(a[i].rc, TDSL_OK);
    ck_assert_ptr_eq(a[i].fns[0], a[0].fns[0]);
    ck_assert_ptr_eq(a[i].fns[1], a[0].fns[1]);
  }
  ck_assert_int_eq(fake_stat("module_loads"), 1);
  ck_assert_int_eq(fake_stat("retains"), 1);
  ck_assert_int_eq(fake_current_device(), -1); /* other threads' contexts */
}
END_TEST

START_TEST(test_fake_prepare_errors) {
  if (!fake_fresh())
    return;
  void *fns[2] = {(void *)0x11, (void *)0x22};
  static tdsl_cuda_module bad;
  bad = (tdsl_cuda_module){".entry broken { bogus; }", 1,
                          (const char *const[]){"broken"}, NULL};
  ck_assert_int_eq(tdsl_cuda_prepare("b", &bad, 0, fns), TDSL_E_CUDA);
  ck_assert_str_eq(tdsl_last_error(),
                   "kernel b: cannot load the PTX module on CUDA device 0 "
                   "(CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed); "
                   "JIT log: fake ptxas: unknown instruction 'bogus'");
  static tdsl_cuda_module missing;
  missing = (tdsl_cuda_module){test_ptx, 2, (const char *const[]){"set42", "nope"},
                              NULL};
  ck_assert_int_eq(tdsl_cuda_prepare("c", &missing, 0, fns), TDSL_E_CUDA);
  ck_assert_str_eq(tdsl_last_error(),
                   "kernel c: the PTX module has no entry point 'nope' "
                   "(CUDA_ERROR_NOT_FOUND: named symbol not found)");
  ck_assert_ptr_eq(fns[0], (void *)0x11);
  ck_assert_ptr_eq(fns[1], (void *)0x22);
  ck_assert_int_eq(fake_stat("module_loads"), 1); /* and unloaded */
  ck_assert_int_eq(tdsl_cuda_prepare("d", NULL, 0, fns), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_cuda_launch("d", NULL, 1, 1, 1, 1, 1, 1, 0, NULL),
                   TDSL_E_INVALID);
}
END_TEST

START_TEST(test_fake_launch_stream) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, fns), TDSL_OK);
  void *stream = (void *)0x5150;
  tdsl_cuda_set_stream(stream);
  int *d = tdsl_cuda_scratch("t", 0); /* device 0 has memory pools */
  ck_assert_ptr_nonnull(d);
  ck_assert_int_eq(fake_stat("async_allocs"), 1);
  ck_assert_ptr_eq(fake_last_stream(), stream);
  void *args[] = {&d};
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[0], 3, 2, 1, 32, 4, 1, 0, args),
                   TDSL_OK);
  ck_assert_int_eq(fake_stat("launches"), 1);
  ck_assert_int_eq(fake_stat("shmem_optins"), 0);
  ck_assert_ptr_eq(fake_last_stream(), stream);
  int v = 0;
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(&v, d, sizeof v), TDSL_OK);
  ck_assert_int_eq(v, 42);
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[1], 1, 1, 1, 64, 1, 1, 100000,
                                    args),
                   TDSL_OK);
  ck_assert_int_eq(fake_stat("shmem_optins"), 1);
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[1], 1, 0, 1, 64, 1, 1, 0, args),
                   TDSL_OK);
  ck_assert_int_eq(fake_stat("launches"), 2); /* the empty grid ran nothing */
  ck_assert_int_eq(tdsl_cuda_launch("t", fns[1], 5, 1, 1, 2048, 1, 1, 0, args),
                   TDSL_E_CUDA);
  ck_assert_str_eq(tdsl_last_error(),
                   "kernel t: cannot launch grid [5, 1, 1] of blocks [2048, 1, "
                   "1] with 0 bytes of shared memory (CUDA_ERROR_INVALID_VALUE: "
                   "invalid argument)");
  tdsl_cuda_scratch_free(d);
  ck_assert_int_eq(fake_stat("async_frees"), 1);
  ck_assert_int_eq(fake_stat("syncs"), 0); /* stream-ordered: no wait */
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  ck_assert_int_eq(fake_stat("syncs"), 1);
  ck_assert_ptr_eq(fake_last_stream(), stream);
  ck_assert_int_eq(fake_stat("live"), 0);
  tdsl_cuda_set_stream(NULL);
}
END_TEST

START_TEST(test_fake_scratch_without_pools) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 1, fns), TDSL_OK);
  tdsl_cuda_set_stream((void *)0x5150); /* the legacy stream keeps blocks */
  void *p = tdsl_cuda_scratch("t", 1000);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(fake_stat("allocs"), 1);
  ck_assert_int_eq(fake_stat("async_allocs"), 0);
  tdsl_cuda_scratch_free(p);
  ck_assert_int_eq(fake_stat("syncs"), 1); /* before cuMemFree */
  ck_assert_int_eq(fake_stat("live"), 0);
  tdsl_cuda_set_stream(NULL);
  ck_assert_ptr_null(tdsl_cuda_scratch("t", (int64_t)1 << 50));
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_NOMEM);
  ck_assert_str_eq(tdsl_last_error(),
                   "kernel t: cannot allocate 1125899906842624 bytes of "
                   "scratch on CUDA device 1 (CUDA_ERROR_OUT_OF_MEMORY: out of "
                   "memory)");
  ck_assert_ptr_null(tdsl_cuda_scratch("t", -1));
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_INVALID);
}
END_TEST

/* Scratch on the legacy default stream comes from blocks kept per primary
 * context: taken and given back without a driver allocation once there;
 * a second buffer of the same call gets its own block; a larger need
 * grows one in stream order (cuMemFreeAsync, or a synchronization and
 * cuMemFree without pools); more than RT_SCRATCH_MAX bytes, or another
 * stream, is allocated per call. */
START_TEST(test_fake_kept_scratch) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  for (int dev = 0; dev < 2; dev++) { /* device 0 has pools, device 1 not */
    const char *alloc = dev ? "allocs" : "async_allocs";
    ck_assert_int_eq(tdsl_cuda_prepare("t", &m, dev, fns), TDSL_OK);
    int a0 = fake_stat(alloc), f0 = fake_stat("frees"), s0 = fake_stat("syncs");
    size_t k0 = rt_cuda_kept_bytes();
    void *p = tdsl_cuda_scratch("t", 1000), *q = tdsl_cuda_scratch("t", 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    ck_assert_ptr_ne(p, q);
    ck_assert_int_eq(fake_stat(alloc), a0 + 2);
    ck_assert_uint_eq(rt_cuda_kept_bytes(), k0 + 2 * 4096);
    tdsl_cuda_scratch_free(q);
    tdsl_cuda_scratch_free(p);
    ck_assert_int_eq(fake_stat("frees"), f0);
    for (int rep = 0; rep < 3; rep++) { /* the same blocks again, no driver */
      void *p2 = tdsl_cuda_scratch("t", 4000), *q2 = tdsl_cuda_scratch("t", 16);
      ck_assert((p2 == p && q2 == q) || (p2 == q && q2 == p));
      tdsl_cuda_scratch_free(p2);
      tdsl_cuda_scratch_free(q2);
    }
    ck_assert_int_eq(fake_stat(alloc), a0 + 2);
    ck_assert_int_eq(fake_stat("frees"), f0);
    ck_assert_int_eq(fake_stat("syncs"), s0);
    void *g = tdsl_cuda_scratch("t", 5000); /* grows one block to 8192 */
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(fake_stat(alloc), a0 + 3);
    ck_assert_int_eq(fake_stat("frees"), f0 + 1);
    ck_assert_int_eq(fake_stat("syncs"), s0 + (dev ? 1 : 0));
    ck_assert_uint_eq(rt_cuda_kept_bytes(), k0 + 4096 + 8192);
    tdsl_cuda_scratch_free(g);
    void *h = tdsl_cuda_scratch("t", 5 << 20); /* over RT_SCRATCH_MAX: per call */
    ck_assert_ptr_nonnull(h);
    tdsl_cuda_scratch_free(h);
    ck_assert_int_eq(fake_stat(alloc), a0 + 4);
    ck_assert_int_eq(fake_stat("frees"), f0 + 2);
    ck_assert_uint_eq(rt_cuda_kept_bytes(), k0 + 4096 + 8192);
    tdsl_cuda_set_stream((void *)0x5150); /* another stream: per call */
    void *o = tdsl_cuda_scratch("t", 100);
    tdsl_cuda_scratch_free(o);
    ck_assert_int_eq(fake_stat(alloc), a0 + 5);
    ck_assert_int_eq(fake_stat("frees"), f0 + 3);
    tdsl_cuda_set_stream(NULL);
  }
  ck_assert_int_eq(fake_stat("live"), 4); /* two blocks per device, kept */
}
END_TEST

static void *free_thread(void *p) {
  return (void *)(intptr_t)tdsl_cuda_free(p);
}

START_TEST(test_fake_malloc_contexts) {
  if (!fake_fresh())
    return;
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2];
  ck_assert_int_eq(tdsl_cuda_prepare("t", &m, 0, fns), TDSL_OK);
  void *p = NULL, *z = NULL;
  ck_assert_int_eq(tdsl_cuda_malloc(&p, 64, 1), TDSL_OK);
  ck_assert_int_eq(fake_current_device(), 0); /* the caller's, unchanged */
  ck_assert_int_eq(tdsl_cuda_malloc(&z, 0, 0), TDSL_OK);
  ck_assert_ptr_nonnull(z);
  ck_assert_int_eq(fake_stat("live"), 2);
  /* Freed in its own context from a thread that has none current. */
  pthread_t th;
  void *rc = NULL;
  ck_assert_int_eq(pthread_create(&th, NULL, free_thread, p), 0);
  pthread_join(th, &rc);
  ck_assert_int_eq((int)(intptr_t)rc, TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(z), TDSL_OK);
  ck_assert_int_eq(fake_stat("live"), 0);
  ck_assert_int_eq(tdsl_cuda_free(z), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_cuda_malloc(&p, (size_t)1 << 50, 1), TDSL_E_NOMEM);
  ck_assert_ptr_null(p);
  ck_assert_str_eq(tdsl_last_error(),
                   "tdsl_cuda_malloc: cannot allocate 1125899906842624 bytes on "
                   "CUDA device 1 (CUDA_ERROR_OUT_OF_MEMORY: out of memory)");
  ck_assert_int_eq(tdsl_cuda_malloc(&p, 4, 2), TDSL_E_DEVICE);
  ck_assert_str_eq(tdsl_last_error(),
                   "tdsl_cuda_malloc: device 2 does not exist (2 CUDA devices)");
  ck_assert_int_eq(tdsl_cuda_malloc(NULL, 4, 0), TDSL_E_INVALID);
}
END_TEST

START_TEST(test_fake_copies_default_context) {
  if (!fake_fresh())
    return;
  enum { N = 300 };
  unsigned char *h = NULL, back[N];
  void *a = NULL, *b = NULL;
  ck_assert_int_eq(fake_current_device(), -1);
  ck_assert_int_eq(tdsl_cuda_malloc(&a, N, 1), TDSL_OK);
  ck_assert_int_eq(fake_current_device(), -1); /* malloc sets none */
  ck_assert_int_eq(tdsl_cuda_malloc_host((void **)&h, N), TDSL_OK);
  ck_assert_int_eq(fake_current_device(), 0); /* device 0's primary */
  ck_assert_int_eq(tdsl_cuda_malloc(&b, N, 0), TDSL_OK);
  for (int i = 0; i < N; i++)
    h[i] = (unsigned char)(i ^ 0x3c);
  ck_assert_int_eq(tdsl_cuda_memcpy_htod(a, h, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtod(b, a, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, b, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  ck_assert_int_eq(memcmp(h, back, N), 0);
  ck_assert_int_eq(tdsl_cuda_memset(b, 7, N), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtoh(back, b, N), TDSL_OK);
  for (int i = 0; i < N; i++)
    ck_assert_int_eq(back[i], 7);
  ck_assert_int_eq(tdsl_cuda_memcpy_dtod(b, NULL, N), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_cuda_memset(NULL, 0, 0), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(a), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free(b), TDSL_OK);
  ck_assert_int_eq(tdsl_cuda_free_host(h), TDSL_OK);
}
END_TEST

START_TEST(test_fake_async_fault) {
  if (!fake_fresh())
    return;
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_OK);
  fake_fail_next_sync(700);
  ck_assert_int_eq(tdsl_cuda_synchronize(), TDSL_E_CUDA);
  ASSERT_MSG_HAS("tdsl_cuda_synchronize: work on the current stream failed");
  ASSERT_MSG_HAS("(CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was "
                 "encountered)");
}
END_TEST

START_TEST(test_fake_init_fails) {
  if (!fake_fresh())
    return;
  setenv("FAKE_CUDA_INIT", "100", 1);
  int n = 5;
  ck_assert_int_eq(tdsl_cuda_device_count(&n), TDSL_E_NO_DEVICE);
  ck_assert_int_eq(n, 0);
  ck_assert_str_eq(tdsl_last_error(),
                   "tdsl_cuda_device_count: no CUDA device: cuInit failed "
                   "(CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected)");
  static tdsl_cuda_module m; /* static: the runtime's cache hangs off it */
  m = test_module();
  void *fns[2] = {(void *)0x11, (void *)0x22};
  ck_assert_int_eq(tdsl_cuda_prepare("g", &m, 0, fns), TDSL_E_NO_DEVICE);
  ASSERT_MSG_HAS("kernel g: no CUDA device: cuInit failed");
  ck_assert_ptr_eq(fns[0], (void *)0x11);
  ck_assert_ptr_null(m.state);
  ck_assert_ptr_null(tdsl_cuda_scratch("g", 16));
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_NO_DEVICE);
  ck_assert_int_eq(fake_stat("inits"), 1); /* not retried */
}
END_TEST

START_TEST(test_fake_zero_devices) {
  if (!fake_fresh())
    return;
  setenv("FAKE_CUDA_DEVICES", "0", 1);
  void *p = NULL;
  ck_assert_int_eq(tdsl_cuda_malloc(&p, 16, 0), TDSL_E_NO_DEVICE);
  ck_assert_str_eq(tdsl_last_error(),
                   "tdsl_cuda_malloc: no CUDA device: the driver reports 0 "
                   "devices");
}
END_TEST

static Suite *cuda_suite(void) {
  Suite *s = suite_create("runtime_cuda");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_no_device_every_call);
  tcase_add_test(tc, test_no_device_scratch);
  tcase_add_test(tc, test_no_device_prepare);
  tcase_add_test(tc, test_load_once);
  tcase_add_test(tc, test_stream_per_thread);
  tcase_add_test(tc, test_check_device);
  tcase_add_test(tc, test_entry_checks_cuda_tensors);
  tcase_add_test(tc, test_memory_round_trip);
  tcase_add_test(tc, test_pinned_memory);
  tcase_add_test(tc, test_prepare_launch);
  tcase_add_test(tc, test_user_stream);
  tcase_add_test(tc, test_prepare_threads);
  tcase_add_test(tc, test_prepare_errors);
  tcase_add_test(tc, test_async_fault);
  tcase_add_test(tc, test_fake_loader);
  tcase_add_test(tc, test_fake_prepare_contexts);
  tcase_add_test(tc, test_fake_prepare_threads);
  tcase_add_test(tc, test_fake_prepare_errors);
  tcase_add_test(tc, test_fake_launch_stream);
  tcase_add_test(tc, test_fake_scratch_without_pools);
  tcase_add_test(tc, test_fake_kept_scratch);
  tcase_add_test(tc, test_fake_malloc_contexts);
  tcase_add_test(tc, test_fake_copies_default_context);
  tcase_add_test(tc, test_fake_async_fault);
  tcase_add_test(tc, test_fake_init_fails);
  tcase_add_test(tc, test_fake_zero_devices);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(cuda_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
