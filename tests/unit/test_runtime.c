/* test_runtime.c — libtdsl_runtime (runtime/, spec §7.2–7.4): error codes
 * and thread-local messages, the thread pool (coverage, chunking,
 * determinism, nesting, real concurrency, TDSL_NUM_THREADS), aligned
 * allocation and its hook, tensor helpers (strides as PyTorch gives them),
 * the allocation cache and its huge-page advice, and every entry check
 * with its exact code and message contents. The binary re-executes
 * itself (--probe-threads, --probe-alloc-cache-on/off, --probe-pool-spin)
 * where a setting read once from the environment must be fresh. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS, madvise */
#endif
#include <check.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tdsl/runtime.h>

#include "rt_internal.h"

static const char *self_exe;

#define ASSERT_MSG_HAS(s)                                                 \
  ck_assert_msg(strstr(tdsl_last_error(), (s)) != NULL,                   \
                "message \"%s\" lacks \"%s\"", tdsl_last_error(), (s))

/* A descriptor over caller-owned arrays. */
static DLTensor mk(void *data, DLDataType dt, int ndim, int64_t *shape,
                   int64_t *strides) {
  DLTensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  t.strides = strides;
  return t;
}

/* ---- errors ---------------------------------------------------------- */

START_TEST(test_error_codes) {
  static const int codes[] = {
      TDSL_OK,         TDSL_E_NULL,    TDSL_E_RANK,     TDSL_E_DTYPE,
      TDSL_E_DEVICE,   TDSL_E_SHAPE,   TDSL_E_SYMBOL,   TDSL_E_OVERFLOW,
      TDSL_E_LAYOUT,   TDSL_E_ALIGN,   TDSL_E_OVERLAP,  TDSL_E_SCALAR,
      TDSL_E_CHECK,    TDSL_E_NO_DEVICE, TDSL_E_CUDA,   TDSL_E_NOMEM,
      TDSL_E_INVALID,  TDSL_E_INDEX,   TDSL_E_ISA};
  static const char *const names[] = {
      "TDSL_OK",         "TDSL_E_NULL",      "TDSL_E_RANK",
      "TDSL_E_DTYPE",    "TDSL_E_DEVICE",    "TDSL_E_SHAPE",
      "TDSL_E_SYMBOL",   "TDSL_E_OVERFLOW",  "TDSL_E_LAYOUT",
      "TDSL_E_ALIGN",    "TDSL_E_OVERLAP",   "TDSL_E_SCALAR",
      "TDSL_E_CHECK",    "TDSL_E_NO_DEVICE", "TDSL_E_CUDA",
      "TDSL_E_NOMEM",    "TDSL_E_INVALID",   "TDSL_E_INDEX",
      "TDSL_E_ISA"};
  int n = (int)(sizeof codes / sizeof codes[0]);
  ck_assert_int_eq(codes[0], 0);
  for (int i = 0; i < n; i++) {
    if (i > 0)
      ck_assert_int_lt(codes[i], 0);
    for (int j = 0; j < i; j++)
      ck_assert_int_ne(codes[i], codes[j]);
    ck_assert_str_eq(tdsl_strerror(codes[i]), names[i]);
  }
  ck_assert_str_eq(tdsl_strerror(-999), "TDSL_E_UNKNOWN");
  ck_assert_str_eq(tdsl_strerror(5), "TDSL_E_UNKNOWN");
}
END_TEST

START_TEST(test_error_message) {
  ck_assert_str_eq(tdsl_last_error(), "");
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_OK);
  ck_assert_int_eq(tdsl_set_error(TDSL_E_CHECK, "index %d out of range", 7),
                   TDSL_E_CHECK);
  ck_assert_str_eq(tdsl_last_error(), "index 7 out of range");
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_CHECK);
  tdsl_clear_error();
  ck_assert_str_eq(tdsl_last_error(), "");
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_OK);
  ck_assert_int_eq(tdsl_set_error(TDSL_E_CUDA, NULL), TDSL_E_CUDA);
  ck_assert_str_eq(tdsl_last_error(), "TDSL_E_CUDA");
  /* A message longer than the buffer is truncated, not overrun. */
  char big[4000];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  tdsl_set_error(TDSL_E_CHECK, "%s", big);
  ck_assert_uint_gt(strlen(tdsl_last_error()), 100);
  ck_assert_uint_lt(strlen(tdsl_last_error()), sizeof big - 1);
}
END_TEST

static pthread_barrier_t err_barrier;

static void *error_thread(void *arg) {
  const char *word = arg;
  char got[64] = "";
  ck_assert_str_eq(tdsl_last_error(), ""); /* fresh thread: no failure */
  tdsl_set_error(TDSL_E_CHECK, "thread %s", word);
  pthread_barrier_wait(&err_barrier); /* both have set their message */
  pthread_barrier_wait(&err_barrier);
  snprintf(got, sizeof got, "%s", tdsl_last_error());
  return strcmp(got + 7, word) == 0 ? arg : NULL;
}

START_TEST(test_error_thread_local) {
  pthread_t a, b;
  pthread_barrier_init(&err_barrier, NULL, 2);
  tdsl_set_error(TDSL_E_NOMEM, "main");
  pthread_create(&a, NULL, error_thread, "alpha");
  pthread_create(&b, NULL, error_thread, "beta");
  void *ra, *rb;
  /* barrier has 2 slots: the two threads meet each other twice. */
  pthread_join(a, &ra);
  pthread_join(b, &rb);
  ck_assert_ptr_nonnull(ra);
  ck_assert_ptr_nonnull(rb);
  ck_assert_str_eq(tdsl_last_error(), "main");
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_NOMEM);
  pthread_barrier_destroy(&err_barrier);
}
END_TEST

/* ---- thread pool ----------------------------------------------------- */

#define MAXN 20000
#define MAXCHUNKS 64

typedef struct Cover {
  atomic_int hits[MAXN];
  pthread_mutex_t lock;
  int nchunks;
  int64_t chunk[MAXCHUNKS][2];
} Cover;

static void cover_body(void *ctx, int64_t begin, int64_t end) {
  Cover *c = ctx;
  for (int64_t i = begin; i < end; i++)
    atomic_fetch_add(&c->hits[i], 1);
  pthread_mutex_lock(&c->lock);
  if (c->nchunks < MAXCHUNKS) {
    c->chunk[c->nchunks][0] = begin;
    c->chunk[c->nchunks][1] = end;
  }
  c->nchunks++;
  pthread_mutex_unlock(&c->lock);
}

static int cmp_chunk(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  return (x[0] > y[0]) - (x[0] < y[0]);
}

/* Runs one parallel_for and checks coverage and chunk sizes; leaves the
 * sorted chunk list in c. */
static void run_cover(Cover *c, int64_t n, int64_t grain, int threads) {
  memset(c->hits, 0, sizeof c->hits);
  c->nchunks = 0;
  tdsl_parallel_for(n, grain, cover_body, c);
  /* One assertion per call: Check's per-assertion bookkeeping would
   * dominate the run time. */
  int64_t bad = -1;
  for (int64_t i = 0; i < n && bad < 0; i++)
    if (c->hits[i] != 1)
      bad = i;
  ck_assert_msg(bad < 0, "n=%lld grain=%lld threads=%d: index %lld ran %d "
                "times", (long long)n, (long long)grain, threads,
                (long long)bad, bad < 0 ? 1 : (int)c->hits[bad]);
  if (n <= 0) {
    ck_assert_int_eq(c->nchunks, 0);
    return;
  }
  int64_t g = grain > 0 ? grain : 1;
  int64_t want = n / g < threads ? n / g : threads;
  if (want < 1)
    want = 1;
  ck_assert_int_eq(c->nchunks, want);
  qsort(c->chunk, (size_t)c->nchunks, sizeof c->chunk[0], cmp_chunk);
  for (int k = 0; k < c->nchunks; k++) {
    ck_assert_int_eq(c->chunk[k][0], k ? c->chunk[k - 1][1] : 0);
    if (c->nchunks > 1)
      ck_assert_int_ge(c->chunk[k][1] - c->chunk[k][0], g);
  }
  ck_assert_int_eq(c->chunk[c->nchunks - 1][1], n);
}

START_TEST(test_parallel_cover) {
  static const int threads[] = {1, 2, 3, 7, 16, 3};
  static const int64_t ns[] = {0, 1, 2, 5, 7, 64, 100, 1000, 12345};
  static const int64_t grains[] = {-1, 0, 1, 3, 10, 64, 1000, 100000};
  Cover *c = calloc(1, sizeof *c), *d = calloc(1, sizeof *d);
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&d->lock, NULL);
  for (size_t ti = 0; ti < sizeof threads / sizeof threads[0]; ti++) {
    tdsl_set_num_threads(threads[ti]);
    ck_assert_int_eq(tdsl_get_num_threads(), threads[ti]);
    for (size_t ni = 0; ni < sizeof ns / sizeof ns[0]; ni++)
      for (size_t gi = 0; gi < sizeof grains / sizeof grains[0]; gi++) {
        run_cover(c, ns[ni], grains[gi], threads[ti]);
        run_cover(d, ns[ni], grains[gi], threads[ti]);
        /* Deterministic chunking: the same bounds both times. */
        ck_assert_int_eq(c->nchunks, d->nchunks);
        for (int k = 0; k < c->nchunks && k < MAXCHUNKS; k++) {
          ck_assert_int_eq(c->chunk[k][0], d->chunk[k][0]);
          ck_assert_int_eq(c->chunk[k][1], d->chunk[k][1]);
        }
      }
  }
  free(c);
  free(d);
}
END_TEST

START_TEST(test_parallel_n_below_grain) {
  Cover *c = calloc(1, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  tdsl_set_num_threads(7);
  run_cover(c, 9, 10, 7);
  ck_assert_int_eq(c->nchunks, 1);
  ck_assert_int_eq(c->chunk[0][0], 0);
  ck_assert_int_eq(c->chunk[0][1], 9);
  /* 7 threads, n = 100, grain 1: 7 chunks of 15 or 14. */
  run_cover(c, 100, 1, 7);
  ck_assert_int_eq(c->nchunks, 7);
  for (int k = 0; k < 7; k++)
    ck_assert_int_le(labs((long)(c->chunk[k][1] - c->chunk[k][0]) - 14), 1);
  free(c);
}
END_TEST

#define OUTER 16
#define INNER 50

typedef struct Nest {
  atomic_int hits[OUTER * INNER];
  atomic_int inner_calls[OUTER];
  int64_t row;
} Nest;

typedef struct NestRow {
  Nest *nest;
  int64_t row;
} NestRow;

static void nest_inner(void *ctx, int64_t begin, int64_t end) {
  NestRow *r = ctx;
  atomic_fetch_add(&r->nest->inner_calls[r->row], 1);
  for (int64_t j = begin; j < end; j++)
    atomic_fetch_add(&r->nest->hits[r->row * INNER + j], 1);
}

static void nest_outer(void *ctx, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; i++) {
    NestRow r = {ctx, i};
    tdsl_parallel_for(INNER, 1, nest_inner, &r);
  }
}

START_TEST(test_parallel_nested) {
  static Nest nest;
  tdsl_set_num_threads(7);
  tdsl_parallel_for(OUTER, 1, nest_outer, &nest);
  for (int i = 0; i < OUTER * INNER; i++)
    ck_assert_int_eq(nest.hits[i], 1);
  /* Nested calls run serially: one call covering the whole inner range. */
  for (int i = 0; i < OUTER; i++)
    ck_assert_int_eq(nest.inner_calls[i], 1);
}
END_TEST

static atomic_int arrived;

/* Each chunk waits (up to 20 s) until all four chunks are running at once,
 * which only happens if four threads really run them concurrently. */
static void rendezvous_body(void *ctx, int64_t begin, int64_t end) {
  atomic_int *ok = ctx;
  atomic_fetch_add(&arrived, 1);
  struct timespec t0, now, nap = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (atomic_load(&arrived) < 4) {
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - t0.tv_sec > 20)
      return;
  }
  atomic_fetch_add(ok, (int)(end - begin));
}

START_TEST(test_parallel_concurrent_chunks) {
  atomic_int ok = 0;
  tdsl_set_num_threads(4);
  atomic_store(&arrived, 0);
  tdsl_parallel_for(4, 1, rendezvous_body, &ok);
  ck_assert_int_eq(ok, 4);
}
END_TEST

static void *caller_thread(void *arg) {
  Cover *c = arg;
  for (int k = 0; k < 100; k++)
    run_cover(c, 1000 + k, 7, 3);
  return arg;
}

START_TEST(test_parallel_shutdown) {
  Cover *c = calloc(1, sizeof *c);
  pthread_mutex_init(&c->lock, NULL);
  tdsl_set_num_threads(4);
  run_cover(c, 1000, 1, 4);
  tdsl_shutdown();
  tdsl_shutdown(); /* idempotent */
  run_cover(c, 1000, 1, 4); /* a new pool is started on demand */
  atomic_int ok = 0;
  atomic_store(&arrived, 0);
  tdsl_parallel_for(4, 1, rendezvous_body, &ok);
  ck_assert_int_eq(ok, 4);
  tdsl_shutdown();
  free(c);
}
END_TEST

START_TEST(test_parallel_two_callers) {
  Cover *c = calloc(1, sizeof *c), *d = calloc(1, sizeof *d);
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&d->lock, NULL);
  tdsl_set_num_threads(3);
  pthread_t a, b;
  pthread_create(&a, NULL, caller_thread, c);
  pthread_create(&b, NULL, caller_thread, d);
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  free(c);
  free(d);
}
END_TEST

/* Runs this binary with flag and the environment variable var set to
 * value (NULL: unset) in a process that never used the runtime before,
 * and returns its exit status. */
static int probe(const char *flag, const char *var, const char *value) {
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (value)
      setenv(var, value, 1);
    else
      unsetenv(var);
    execl(self_exe, self_exe, flag, (char *)NULL);
    _exit(255);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ck_assert(WIFEXITED(status));
  return WEXITSTATUS(status);
}

/* The thread count a fresh process reports for TDSL_NUM_THREADS=value. */
static int probe_threads(const char *value) {
  return probe("--probe-threads", "TDSL_NUM_THREADS", value);
}

START_TEST(test_num_threads_env) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int want_default = cores > 0 ? (int)(cores > 200 ? 200 : cores) : 1;
  ck_assert_int_eq(probe_threads("3"), 3);
  ck_assert_int_eq(probe_threads("11"), 11);
  if (cores <= 200) {
    ck_assert_int_eq(probe_threads(NULL), want_default);
    ck_assert_int_eq(probe_threads("0"), want_default);
    ck_assert_int_eq(probe_threads("-2"), want_default);
    ck_assert_int_eq(probe_threads("4x"), want_default);
    ck_assert_int_eq(probe_threads(""), want_default);
  }
}
END_TEST

START_TEST(test_set_num_threads) {
  tdsl_set_num_threads(0);
  int def = tdsl_get_num_threads();
  ck_assert_int_ge(def, 1);
  tdsl_set_num_threads(5);
  ck_assert_int_eq(tdsl_get_num_threads(), 5);
  tdsl_set_num_threads(-3);
  ck_assert_int_eq(tdsl_get_num_threads(), def);
}
END_TEST

/* ---- allocation ------------------------------------------------------ */

START_TEST(test_alloc_alignment) {
  static const size_t aligns[] = {0, 1, 2, 8, 16, 64, 128, 4096};
  for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++) {
    size_t a = aligns[i] ? aligns[i] : 64;
    for (size_t bytes = 0; bytes < 300; bytes += 97) {
      unsigned char *p = tdsl_alloc(bytes, aligns[i]);
      ck_assert_ptr_nonnull(p);
      ck_assert_uint_eq((uintptr_t)p % a, 0);
      memset(p, 0xab, bytes);
      tdsl_free(p);
    }
  }
  tdsl_clear_error();
  ck_assert_ptr_null(tdsl_alloc(10, 3));
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_INVALID);
  ASSERT_MSG_HAS("3");
  ck_assert_ptr_null(tdsl_alloc(10, 48));
  tdsl_free(NULL);
}
END_TEST

typedef struct Hook {
  int allocs, frees;
  size_t last_bytes, last_align;
  void *last_ptr;
  int fail;
} Hook;

static void *hook_alloc(size_t bytes, size_t align, void *user) {
  Hook *h = user;
  h->allocs++;
  h->last_bytes = bytes;
  h->last_align = align;
  if (h->fail)
    return NULL;
  void *p = NULL;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align,
                     bytes ? bytes : 1))
    return NULL;
  h->last_ptr = p;
  return p;
}

static void hook_free(void *p, void *user) {
  Hook *h = user;
  h->frees++;
  ck_assert_ptr_eq(p, h->last_ptr);
  free(p);
}

START_TEST(test_alloc_hook) {
  Hook h = {0};
  tdsl_set_allocator(hook_alloc, hook_free, &h);
  void *p = tdsl_alloc(100, 32);
  ck_assert_ptr_eq(p, h.last_ptr);
  ck_assert_int_eq(h.allocs, 1);
  ck_assert_uint_eq(h.last_bytes, 100);
  ck_assert_uint_eq(h.last_align, 32);
  tdsl_free(p);
  ck_assert_int_eq(h.frees, 1);
  p = tdsl_alloc(8, 0);
  ck_assert_uint_eq(h.last_align, 64);
  tdsl_free(p);
  h.fail = 1;
  ck_assert_ptr_null(tdsl_alloc(8, 0));
  ck_assert_int_eq(tdsl_last_error_code(), TDSL_E_NOMEM);
  /* Tensor helpers go through the hook too and report TDSL_E_NOMEM. */
  DLTensor t;
  int64_t shape[2] = {2, 3};
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, 2, shape), TDSL_E_NOMEM);
  ck_assert_ptr_null(t.data);
  ck_assert_ptr_null(t.shape);
  h.fail = 0;
  tdsl_set_allocator(NULL, NULL, NULL);
  int before = h.allocs;
  p = tdsl_alloc(16, 0);
  ck_assert_ptr_nonnull(p);
  tdsl_free(p);
  ck_assert_int_eq(h.allocs, before);
}
END_TEST

/* The cache of freed large blocks (alloc.c), in a fresh process whose
 * $TDSL_ALLOC_CACHE is value: returns 0 when every check held, else the
 * number of the first that failed. */
/* An allocator hook without Check's assertions, which need a running
 * test: counts calls in user[0] (allocations) and user[1] (frees). */
static void *counting_alloc(size_t bytes, size_t align, void *user) {
  ((int *)user)[0]++;
  void *p = NULL;
  return posix_memalign(&p, align, bytes) ? NULL : p;
}

static void counting_free(void *p, void *user) {
  ((int *)user)[1]++;
  free(p);
}

/* Says which check failed (the probe's exit status says only its number). */
static int cache_fail(int n, int line) {
  fprintf(stderr, "allocation cache check %d (line %d) failed: %zu bytes kept\n",
          n, line, rt_alloc_cached_bytes());
  return n;
}

static int alloc_cache_checks(bool on) {
  size_t big = (size_t)1 << 20;
  unsigned char *p = tdsl_alloc(big, 0);
  if (!p)
    return cache_fail(1, __LINE__);
  memset(p, 1, big);
  tdsl_free(p);
  if (rt_alloc_cached_bytes() != (on ? big : 0))
    return cache_fail(2, __LINE__);
  if (!on)
    return 0;
  /* The same block comes back for a request it fits... */
  unsigned char *q = tdsl_alloc(big - 100, 0);
  if (q != p || rt_alloc_cached_bytes() != 0)
    return cache_fail(3, __LINE__);
  memset(q, 2, big - 100);
  tdsl_free(q); /* kept with its whole capacity */
  if (rt_alloc_cached_bytes() != big)
    return cache_fail(4, __LINE__);
  /* ...but not for one of less than half its size, nor for a larger one. */
  void *small = tdsl_alloc(big / 2 - 1, 0), *large = tdsl_alloc(big + 1, 0);
  if (small == p || large == p || rt_alloc_cached_bytes() != big)
    return cache_fail(5, __LINE__);
  tdsl_free(small);
  tdsl_free(large);
  /* Alignment is honoured when a kept block is reused. */
  for (int i = 0; i < 4; i++) {
    void *a = tdsl_alloc(big, 4096);
    if (!a || (uintptr_t)a % 4096 != 0)
      return cache_fail(6, __LINE__);
    memset(a, 3, big);
    tdsl_free(a);
  }
  /* Blocks below 64 KiB are not kept. */
  size_t before = rt_alloc_cached_bytes();
  tdsl_free(tdsl_alloc(1000, 0));
  if (rt_alloc_cached_bytes() != before)
    return cache_fail(7, __LINE__);
  /* At most 32 blocks are kept, the oldest given back first. */
  void *blk[40];
  for (int i = 0; i < 40; i++)
    blk[i] = tdsl_alloc((size_t)(64 << 10) + (size_t)i * 4096, 0);
  for (int i = 0; i < 40; i++)
    tdsl_free(blk[i]);
  size_t kept = 0;
  for (int i = 8; i < 40; i++)
    kept += (size_t)(64 << 10) + (size_t)i * 4096;
  if (rt_alloc_cached_bytes() != kept)
    return cache_fail(8, __LINE__);
  /* A kept block over 256 MiB in all: the oldest go. */
  void *huge = tdsl_alloc((size_t)255 << 20, 0);
  if (!huge)
    return cache_fail(9, __LINE__);
  tdsl_free(huge);
  if (rt_alloc_cached_bytes() > ((size_t)256 << 20) ||
      rt_alloc_cached_bytes() < ((size_t)255 << 20))
    return cache_fail(10, __LINE__);
  /* Too large to keep at all. */
  void *toolarge = tdsl_alloc((size_t)257 << 20, 0);
  if (!toolarge)
    return cache_fail(11, __LINE__);
  before = rt_alloc_cached_bytes();
  tdsl_free(toolarge);
  if (rt_alloc_cached_bytes() != before)
    return cache_fail(12, __LINE__);
  tdsl_alloc_release_cache();
  if (rt_alloc_cached_bytes() != 0)
    return cache_fail(13, __LINE__);
  /* Installing an allocator gives the kept blocks back. */
  tdsl_free(tdsl_alloc(big, 0));
  int calls[2] = {0, 0};
  tdsl_set_allocator(counting_alloc, counting_free, calls);
  if (rt_alloc_cached_bytes() != 0)
    return cache_fail(14, __LINE__);
  tdsl_free(tdsl_alloc(big, 0)); /* the hook's, not kept */
  tdsl_set_allocator(NULL, NULL, NULL);
  if (rt_alloc_cached_bytes() != 0 || calls[0] != 1 || calls[1] != 1)
    return cache_fail(15, __LINE__);
  /* tdsl_shutdown gives them back too. */
  tdsl_free(tdsl_alloc(big, 0));
  tdsl_shutdown();
  if (rt_alloc_cached_bytes() != 0)
    return cache_fail(16, __LINE__);
  return 0;
}

START_TEST(test_alloc_cache) {
  ck_assert_int_eq(probe("--probe-alloc-cache-on", "TDSL_ALLOC_CACHE", "1"), 0);
  ck_assert_int_eq(probe("--probe-alloc-cache-off", "TDSL_ALLOC_CACHE", "0"), 0);
}
END_TEST

/* Whether the mapping holding p has the huge-page advice (VmFlags "hg"
 * in /proc/self/smaps); -1 when that cannot be read. */
static int huge_advised(const void *p) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f)
    return -1;
  char line[512];
  int in = 0, found = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi; /* a mapping's first line: "lo-hi perms ..." */
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2) {
      in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    } else if (in && strncmp(line, "VmFlags:", 8) == 0) {
      found = strstr(line, " hg") != NULL;
      break;
    }
  }
  fclose(f);
  return found;
}

START_TEST(test_alloc_huge_pages) {
  /* Only where the kernel marks advised mappings: a control mapping of
   * our own, advised directly, must show the flag first. */
  size_t len = (size_t)4 << 20;
  void *ctl = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ck_assert(ctl != MAP_FAILED);
  int marks = madvise(ctl, len, MADV_HUGEPAGE) == 0 && huge_advised(ctl) == 1;
  munmap(ctl, len);
  if (!marks)
    return;
  void *big = tdsl_alloc((size_t)8 << 20, 0);
  ck_assert_ptr_nonnull(big);
  memset(big, 1, (size_t)8 << 20);
  ck_assert_int_eq(huge_advised((char *)big + ((size_t)4 << 20)), 1);
  tdsl_free(big);
}
END_TEST

/* Many short jobs back to back, as a kernel's nests run, at a spin of
 * TDSL_SPIN_US: every index runs once in each; 0 when all held. */
static int pool_spin_checks(void) {
  static Cover c;
  for (int threads = 2; threads <= 4; threads++) {
    tdsl_set_num_threads(threads);
    for (int job = 0; job < 3000; job++) {
      int64_t n = 1 + job % 97;
      for (int64_t i = 0; i < n; i++)
        atomic_store(&c.hits[i], 0);
      tdsl_parallel_for(n, 1, cover_body, &c);
      for (int64_t i = 0; i < n; i++)
        if (atomic_load(&c.hits[i]) != 1)
          return 1;
      if (job % 500 == 0)
        nanosleep(&(struct timespec){0, 300000}, NULL); /* workers sleep */
    }
  }
  return 0;
}

START_TEST(test_pool_spin) {
  ck_assert_int_eq(probe("--probe-pool-spin", "TDSL_SPIN_US", "0"), 0);
  ck_assert_int_eq(probe("--probe-pool-spin", "TDSL_SPIN_US", "50"), 0);
  ck_assert_int_eq(probe("--probe-pool-spin", "TDSL_SPIN_US", NULL), 0);
}
END_TEST

/* ---- dtypes and tensors ---------------------------------------------- */

START_TEST(test_dtypes) {
  const DLDataType all[] = {TDSL_BOOL, TDSL_I8,  TDSL_U8,   TDSL_I16,
                            TDSL_I32,  TDSL_I64, TDSL_F16,  TDSL_BF16,
                            TDSL_F32,  TDSL_F64};
  static const char *const names[] = {"bool", "i8",  "u8",   "i16", "i32",
                                      "i64",  "f16", "bf16", "f32", "f64"};
  static const size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  for (int i = 0; i < 10; i++) {
    ck_assert_str_eq(tdsl_dtype_name(all[i]), names[i]);
    ck_assert_uint_eq(tdsl_dtype_size(all[i]), sizes[i]);
    ck_assert_int_eq(all[i].lanes, 1);
  }
  ck_assert_int_eq(kDLBool, 6);
  ck_assert_int_eq(TDSL_BOOL.code, 6);
  ck_assert_int_eq(TDSL_BF16.code, kDLBfloat);
  ck_assert_int_eq(TDSL_F16.code, kDLFloat);
  ck_assert_int_eq(TDSL_U8.code, kDLUInt);
  DLDataType v = TDSL_F32;
  v.lanes = 4;
  ck_assert_ptr_null(tdsl_dtype_name(v));
  ck_assert_uint_eq(tdsl_dtype_size(v), 16);
  ck_assert(!tdsl_dtype_equal(v, TDSL_F32));
  ck_assert(tdsl_dtype_equal(TDSL_F32, tdsl_dtype_f32()));
}
END_TEST

static void assert_dims(const int64_t *got, const int64_t *want, int n) {
  for (int i = 0; i < n; i++)
    ck_assert_int_eq(got[i], want[i]);
}

START_TEST(test_tensor_alloc) {
  DLTensor t;
  int64_t shape[3] = {2, 3, 4}, want[3] = {12, 4, 1};
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, 3, shape), TDSL_OK);
  ck_assert_int_eq(t.ndim, 3);
  ck_assert(tdsl_dtype_equal(t.dtype, TDSL_F32));
  ck_assert_int_eq(t.device.device_type, kDLCPU);
  ck_assert_ptr_ne(t.shape, shape);
  assert_dims(t.shape, shape, 3);
  assert_dims(t.strides, want, 3);
  ck_assert_int_eq(tdsl_tensor_numel(&t), 24);
  ck_assert_uint_eq((uintptr_t)t.data % 64, 0);
  for (int i = 0; i < 24; i++)
    ck_assert(((float *)t.data)[i] == 0.0f);
  ck_assert_int_eq(t.byte_offset, 0);
  tdsl_tensor_free(&t);
  ck_assert_ptr_null(t.data);
  ck_assert_ptr_null(t.shape);
  ck_assert_int_eq(t.ndim, 0);
  tdsl_tensor_free(&t); /* freeing a zeroed descriptor is harmless */
  tdsl_tensor_free(NULL);

  /* torch.empty(2, 0, 3).stride() == (3, 3, 1) */
  int64_t eshape[3] = {2, 0, 3}, estr[3] = {3, 3, 1};
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_I64, 3, eshape), TDSL_OK);
  assert_dims(t.strides, estr, 3);
  ck_assert_int_eq(tdsl_tensor_numel(&t), 0);
  ck_assert_ptr_nonnull(t.data);
  tdsl_tensor_free(&t);

  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F64, 0, NULL), TDSL_OK);
  ck_assert_int_eq(tdsl_tensor_numel(&t), 1);
  ck_assert_ptr_nonnull(t.data);
  *(double *)t.data = 1.5;
  tdsl_tensor_free(&t);
}
END_TEST

START_TEST(test_tensor_alloc_layouts) {
  DLTensor t;
  /* torch.empty(2,3,4,5, memory_format=torch.channels_last).stride() */
  int64_t shape[4] = {2, 3, 4, 5}, cl[4] = {60, 1, 15, 3};
  ck_assert_int_eq(tdsl_tensor_alloc_channels_last(&t, TDSL_BF16, 4, shape),
                   TDSL_OK);
  assert_dims(t.strides, cl, 4);
  assert_dims(t.shape, shape, 4);
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CHANNELS_LAST),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_tensor_numel(&t), 120);
  memset(t.data, 1, 120 * 2); /* the buffer holds every element */
  tdsl_tensor_free(&t);

  int64_t s2[2] = {2, 3}, st[2] = {1, 2};
  ck_assert_int_eq(tdsl_tensor_alloc_strided(&t, TDSL_F32, 2, s2, st),
                   TDSL_OK);
  assert_dims(t.strides, st, 2);
  ((float *)t.data)[1 * 1 + 2 * 2] = 1.0f; /* last element: offset 5 */
  tdsl_tensor_free(&t);

  /* Errors leave *t zeroed. */
  int64_t neg[2] = {2, -1}, negst[2] = {-1, 1};
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, 2, neg), TDSL_E_INVALID);
  ck_assert_ptr_null(t.data);
  ASSERT_MSG_HAS("dim 1");
  ck_assert_int_eq(tdsl_tensor_alloc_strided(&t, TDSL_F32, 2, s2, negst),
                   TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_tensor_alloc_channels_last(&t, TDSL_F32, 3, shape),
                   TDSL_E_INVALID);
  ck_assert_ptr_null(t.shape);
  ck_assert_int_eq(tdsl_tensor_alloc(NULL, TDSL_F32, 2, s2), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, -1, s2), TDSL_E_INVALID);
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, 2, NULL), TDSL_E_INVALID);
  int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
  ck_assert_int_eq(tdsl_tensor_alloc(&t, TDSL_F32, 2, huge), TDSL_E_OVERFLOW);
  ck_assert_ptr_null(t.shape);
}
END_TEST

START_TEST(test_numel) {
  int64_t shape[3] = {2, 3, 4};
  DLTensor t = mk(NULL, TDSL_F32, 3, shape, NULL);
  ck_assert_int_eq(tdsl_tensor_numel(&t), 24);
  t.ndim = 0;
  ck_assert_int_eq(tdsl_tensor_numel(&t), 1);
  ck_assert_int_eq(tdsl_tensor_numel(NULL), -1);
  t.ndim = 2;
  t.shape = NULL;
  ck_assert_int_eq(tdsl_tensor_numel(&t), -1);
  int64_t huge[2] = {INT64_MAX / 2, 3};
  t.shape = huge;
  ck_assert_int_eq(tdsl_tensor_numel(&t), -1);
}
END_TEST

/* ---- entry checks ---------------------------------------------------- */

START_TEST(test_check_tensor) {
  float buf[12];
  int64_t shape[2] = {3, 4};
  DLTensor t = mk(buf, TDSL_F32, 2, shape, NULL);
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_OK);

  ck_assert_int_eq(tdsl_check_tensor("mm", "x", NULL, TDSL_F32, 2, kDLCPU),
                   TDSL_E_NULL);
  ASSERT_MSG_HAS("mm");
  ASSERT_MSG_HAS("'x'");

  ck_assert_int_eq(tdsl_check_tensor("mm", "w", &t, TDSL_F32, 3, kDLCPU),
                   TDSL_E_RANK);
  ASSERT_MSG_HAS("kernel mm");
  ASSERT_MSG_HAS("'w'");
  ASSERT_MSG_HAS("rank 3");
  ASSERT_MSG_HAS("rank 2");

  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_I32, 2, kDLCPU),
                   TDSL_E_DTYPE);
  ASSERT_MSG_HAS("expected dtype i32, got f32");
  DLDataType v = TDSL_F32;
  v.lanes = 2;
  t.dtype = v;
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_E_DTYPE);
  ASSERT_MSG_HAS("lanes 2");
  t.dtype = TDSL_BF16;
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F16, 2, kDLCPU),
                   TDSL_E_DTYPE);
  ASSERT_MSG_HAS("bf16");
  t.dtype = TDSL_F32;

  t.device.device_type = kDLCUDA;
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_E_DEVICE);
  ASSERT_MSG_HAS("expected device cpu, got cuda");
  t.device.device_type = kDLCPU;

  t.shape = NULL;
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_E_NULL);
  t.shape = shape;
  shape[1] = -4;
  ck_assert_int_eq(tdsl_check_tensor("mm", "x", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_E_SHAPE);
  ASSERT_MSG_HAS("dim 1");
  ASSERT_MSG_HAS("-4");
  /* an output's dims are left to the query or tdsl_check_dim */
  t.data = NULL;
  ck_assert_int_eq(tdsl_check_output("mm", "out0", &t, TDSL_F32, 2, kDLCPU),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_check_output("mm", "out0", &t, TDSL_F32, 1, kDLCPU),
                   TDSL_E_RANK);
  t.data = buf;

  /* 0-dim tensors need no shape array. */
  DLTensor s = mk(buf, TDSL_F64, 0, NULL, NULL);
  ck_assert_int_eq(tdsl_check_tensor("k", "s", &s, TDSL_F64, 0, kDLCPU),
                   TDSL_OK);
}
END_TEST

START_TEST(test_check_data) {
  float buf[4];
  int64_t shape[1] = {4};
  DLTensor t = mk(buf, TDSL_F32, 1, shape, NULL);
  ck_assert_int_eq(tdsl_check_data("k", "x", &t), TDSL_OK);
  t.data = NULL;
  ck_assert_int_eq(tdsl_check_data("k", "x", &t), TDSL_E_NULL);
  ASSERT_MSG_HAS("kernel k: argument 'x'");
  shape[0] = 0;
  ck_assert_int_eq(tdsl_check_data("k", "x", &t), TDSL_OK);
  ck_assert_int_eq(tdsl_check_data("k", "x", NULL), TDSL_E_NULL);
}
END_TEST

START_TEST(test_check_dim) {
  int64_t shape[2] = {3, 4};
  DLTensor t = mk(NULL, TDSL_F32, 2, shape, NULL);
  ck_assert_int_eq(tdsl_check_dim("k", "x", &t, 0, 3, "3"), TDSL_OK);
  ck_assert_int_eq(tdsl_check_dim("k", "x", &t, 1, 3, "3"), TDSL_E_SHAPE);
  ASSERT_MSG_HAS("kernel k");
  ASSERT_MSG_HAS("'x'");
  ASSERT_MSG_HAS("dim 1");
  ASSERT_MSG_HAS("expected 3");
  ASSERT_MSG_HAS("got 4");
  ck_assert_int_eq(tdsl_check_dim("k", "out0", &t, 1, 12, "C*H*W"),
                   TDSL_E_SHAPE);
  ASSERT_MSG_HAS("C*H*W = 12");
  ASSERT_MSG_HAS("got 4");
  ck_assert_int_eq(tdsl_check_dim("k", "x", &t, 1, 5, NULL), TDSL_E_SHAPE);
  ASSERT_MSG_HAS("expected 5, got 4");
  ck_assert_int_eq(tdsl_check_dim("k", "x", &t, 2, 5, NULL), TDSL_E_INVALID);
}
END_TEST

START_TEST(test_bind_symbol) {
  int64_t a[2] = {4, 7}, b[2] = {7, 5};
  DLTensor x = mk(NULL, TDSL_F32, 2, a, NULL), y = mk(NULL, TDSL_F32, 2, b,
                                                       NULL);
  int64_t n = -1, k = -1;
  int nb = 0, kb = 0;
  ck_assert_int_eq(tdsl_bind_symbol("mm", "x", &x, 0, "N", &n, &nb), TDSL_OK);
  ck_assert_int_eq(nb, 1);
  ck_assert_int_eq(n, 4);
  ck_assert_int_eq(tdsl_bind_symbol("mm", "x", &x, 1, "K", &k, &kb), TDSL_OK);
  ck_assert_int_eq(tdsl_bind_symbol("mm", "w", &y, 0, "K", &k, &kb), TDSL_OK);
  ck_assert_int_eq(tdsl_bind_symbol("mm", "w", &y, 1, "N", &n, &nb),
                   TDSL_E_SYMBOL);
  ASSERT_MSG_HAS("kernel mm");
  ASSERT_MSG_HAS("'w'");
  ASSERT_MSG_HAS("dim 1");
  ASSERT_MSG_HAS("N = 4");
  ASSERT_MSG_HAS("got 5");
  ck_assert_int_eq(n, 4); /* a failed check does not rebind */
  /* A symbol may be bound to 0. */
  int64_t z[1] = {0};
  DLTensor e = mk(NULL, TDSL_F32, 1, z, NULL);
  int64_t m = -1;
  int mb = 0;
  ck_assert_int_eq(tdsl_bind_symbol("k", "e", &e, 0, "M", &m, &mb), TDSL_OK);
  ck_assert_int_eq(m, 0);
}
END_TEST

START_TEST(test_check_layout_contiguous) {
  int64_t shape[3] = {2, 3, 4}, rm[3] = {12, 4, 1}, tr[3] = {12, 1, 3};
  DLTensor t = mk(NULL, TDSL_F32, 3, shape, NULL);
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_OK);
  t.strides = rm;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_OK);
  t.strides = tr;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_E_LAYOUT);
  ASSERT_MSG_HAS("kernel k");
  ASSERT_MSG_HAS("'x'");
  ASSERT_MSG_HAS("dim 2: expected stride 1");
  ASSERT_MSG_HAS("got 3");
  /* Size-1 dims are never checked: torch.empty(3,1,4).as_strided(
   * (3,1,4),(4,999,1)).is_contiguous() is True. */
  int64_t s1[3] = {3, 1, 4}, st1[3] = {4, 999, 1};
  t.shape = s1;
  t.strides = st1;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_OK);
  /* Empty tensors are contiguous whatever their strides. */
  int64_t s0[3] = {3, 0, 4}, st0[3] = {1, 7, 9};
  t.shape = s0;
  t.strides = st0;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_OK);
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, 9), TDSL_E_INVALID);
}
END_TEST

START_TEST(test_check_layout_channels_last) {
  int64_t shape[4] = {2, 3, 4, 5}, cl[4] = {60, 1, 15, 3};
  DLTensor t = mk(NULL, TDSL_F32, 4, shape, cl);
  ck_assert_int_eq(
      tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CHANNELS_LAST), TDSL_OK);
  ck_assert_int_eq(tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CONTIGUOUS),
                   TDSL_E_LAYOUT);
  t.strides = NULL; /* row-major (60, 20, 5, 1): C's stride should be 1 */
  ck_assert_int_eq(
      tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CHANNELS_LAST),
      TDSL_E_LAYOUT);
  ASSERT_MSG_HAS("dim 1: expected stride 1");
  ASSERT_MSG_HAS("got 20");
  ASSERT_MSG_HAS("channels_last");
  /* With C == 1 row-major is also channels-last (PyTorch agrees:
   * torch.empty(2,1,4,5).is_contiguous(memory_format=channels_last)). */
  int64_t c1[4] = {2, 1, 4, 5};
  t.shape = c1;
  ck_assert_int_eq(
      tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CHANNELS_LAST), TDSL_OK);
  int64_t bad[4] = {60, 1, 3, 12}; /* H and W swapped */
  t.shape = shape;
  t.strides = bad;
  ck_assert_int_eq(
      tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CHANNELS_LAST),
      TDSL_E_LAYOUT);
  ASSERT_MSG_HAS("dim 3: expected stride 3");
  ASSERT_MSG_HAS("got 12");
  t.ndim = 3;
  ck_assert_int_eq(
      tdsl_check_layout("conv", "x", &t, TDSL_LAYOUT_CHANNELS_LAST),
      TDSL_E_RANK);
}
END_TEST

START_TEST(test_check_layout_strided) {
  int64_t shape[3] = {2, 1, 3}, st[3] = {1, -5, 2}, neg[3] = {-3, 1, 1};
  DLTensor t = mk(NULL, TDSL_F32, 3, shape, st);
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_STRIDED),
                   TDSL_OK);
  t.strides = NULL;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_STRIDED),
                   TDSL_OK);
  t.strides = neg;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_STRIDED),
                   TDSL_E_LAYOUT);
  ASSERT_MSG_HAS("dim 0");
  ASSERT_MSG_HAS("got -3");
  /* A stride-0 (broadcast) input is fine for a strided parameter. */
  int64_t zero[3] = {0, 0, 0};
  t.strides = zero;
  ck_assert_int_eq(tdsl_check_layout("k", "x", &t, TDSL_LAYOUT_STRIDED),
                   TDSL_OK);
}
END_TEST

START_TEST(test_check_internal_overlap) {
  int64_t shape[2] = {2, 3};
  int64_t ok1[2] = {3, 1}, ok2[2] = {1, 2}, ok3[2] = {10, 2}, bad1[2] = {2, 1},
          bad2[2] = {0, 1}, bad3[2] = {1, 1};
  DLTensor t = mk(NULL, TDSL_F32, 2, shape, NULL);
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t), TDSL_OK);
  t.strides = ok1;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t), TDSL_OK);
  t.strides = ok2;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t), TDSL_OK);
  t.strides = ok3;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t), TDSL_OK);
  t.strides = bad1; /* element (0,2) and (1,0) share offset 2 */
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t),
                   TDSL_E_OVERLAP);
  ASSERT_MSG_HAS("'out0'");
  ASSERT_MSG_HAS("dim 0");
  t.strides = bad2;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t),
                   TDSL_E_OVERLAP);
  t.strides = bad3;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t),
                   TDSL_E_OVERLAP);
  int64_t one[2] = {1, 3}; /* stride 0 on a size-1 dim is harmless */
  t.shape = one;
  t.strides = bad2;
  ck_assert_int_eq(tdsl_check_internal_overlap("k", "out0", &t), TDSL_OK);
}
END_TEST

START_TEST(test_check_align) {
  _Alignas(8) unsigned char buf[64];
  int64_t shape[1] = {4};
  DLTensor t = mk(buf, TDSL_F32, 1, shape, NULL);
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_OK);
  t.byte_offset = 4;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_OK);
  t.byte_offset = 2;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_E_ALIGN);
  ASSERT_MSG_HAS("kernel k");
  ASSERT_MSG_HAS("'x'");
  ASSERT_MSG_HAS("4 bytes");
  t.byte_offset = 0;
  t.data = buf + 1;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_E_ALIGN);
  t.dtype = TDSL_F64;
  t.data = buf + 4;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_E_ALIGN);
  ASSERT_MSG_HAS("8 bytes");
  t.byte_offset = 4;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_OK);
  t.dtype = TDSL_U8;
  t.byte_offset = 3;
  ck_assert_int_eq(tdsl_check_align("k", "x", &t), TDSL_OK);
}
END_TEST

static void assert_extent(const DLTensor *t, int64_t first, int64_t end) {
  int64_t f = -99, e = -99;
  ck_assert_int_eq(tdsl_tensor_extent(t, &f, &e), TDSL_OK);
  ck_assert_int_eq(f, first);
  ck_assert_int_eq(e, end);
}

START_TEST(test_extent) {
  int64_t shape[2] = {2, 3}, rm[2] = {3, 1}, tr[2] = {1, 2};
  DLTensor t = mk(NULL, TDSL_F32, 2, shape, NULL);
  assert_extent(&t, 0, 24);
  t.strides = rm;
  assert_extent(&t, 0, 24);
  t.byte_offset = 8;
  assert_extent(&t, 8, 32);
  t.strides = tr; /* last element at 1 + 2*2 = 5 */
  assert_extent(&t, 8, 8 + 6 * 4);
  int64_t s1[1] = {3}, neg[1] = {-1}, zero[1] = {0};
  DLTensor v = mk(NULL, TDSL_F32, 1, s1, neg);
  v.byte_offset = 8; /* elements at bytes 8, 4, 0 */
  assert_extent(&v, 0, 12);
  v.strides = zero; /* broadcast: every element at byte 8 */
  assert_extent(&v, 8, 12);
  int64_t s0[2] = {5, 0};
  DLTensor e = mk(NULL, TDSL_F64, 2, s0, NULL);
  e.byte_offset = 16;
  assert_extent(&e, 16, 16);
  DLTensor s = mk(NULL, TDSL_I16, 0, NULL, NULL);
  assert_extent(&s, 0, 2);
  int64_t f, end;
  ck_assert_int_eq(tdsl_tensor_extent(NULL, &f, &end), TDSL_E_INVALID);
}
END_TEST

START_TEST(test_extent_overflow) {
  int64_t f, e;
  /* (2^62 - 1) * 4 elements of stride 4: far beyond int64 bytes. */
  int64_t shape[2] = {(int64_t)1 << 62, 4}, st[2] = {4, 1};
  DLTensor t = mk(NULL, TDSL_F32, 2, shape, st);
  ck_assert_int_eq(tdsl_tensor_extent(&t, &f, &e), TDSL_E_OVERFLOW);
  ck_assert_int_eq(tdsl_check_extent("big", "x", &t), TDSL_E_OVERFLOW);
  ASSERT_MSG_HAS("kernel big");
  ASSERT_MSG_HAS("'x'");
  ASSERT_MSG_HAS("[4611686018427387904, 4]");
  ASSERT_MSG_HAS("int64");
  /* Row-major with 2^62 elements: elements fit, bytes (x8) do not. */
  int64_t s2[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
  DLTensor u = mk(NULL, TDSL_F64, 2, s2, NULL);
  ck_assert_int_eq(tdsl_tensor_extent(&u, &f, &e), TDSL_E_OVERFLOW);
  /* Huge shape times a huge stride overflows the product itself. */
  int64_t s3[1] = {(int64_t)1 << 40}, st3[1] = {(int64_t)1 << 40};
  DLTensor w = mk(NULL, TDSL_U8, 1, s3, st3);
  ck_assert_int_eq(tdsl_check_extent("big", "w", &w), TDSL_E_OVERFLOW);
  /* Just fits: 2^62 - 1 bytes of u8 plus nothing else. */
  int64_t s4[1] = {((int64_t)1 << 62)};
  DLTensor z = mk(NULL, TDSL_U8, 1, s4, NULL);
  assert_extent(&z, 0, (int64_t)1 << 62);
  z.byte_offset = (uint64_t)1 << 63;
  ck_assert_int_eq(tdsl_check_extent("big", "z", &z), TDSL_E_OVERFLOW);
  /* Huge shape with stride 0 addresses a single element: no overflow. */
  int64_t st0[1] = {0};
  DLTensor b = mk(NULL, TDSL_F32, 1, s3, st0);
  assert_extent(&b, 0, 4);
  ck_assert_int_eq(tdsl_check_extent("big", "b", &b), TDSL_OK);
}
END_TEST

START_TEST(test_check_overlap) {
  float buf[32];
  int64_t s16[1] = {16}, s8[1] = {8}, s0[1] = {0};
  DLTensor in = mk(buf, TDSL_F32, 1, s16, NULL);       /* [0, 16) */
  DLTensor lo = mk(buf, TDSL_F32, 1, s8, NULL);        /* [0, 8) */
  DLTensor hi = mk(buf + 16, TDSL_F32, 1, s16, NULL);  /* [16, 32) */
  DLTensor mid = mk(buf + 8, TDSL_F32, 1, s16, NULL);  /* [8, 24) */
  DLTensor empty = mk(buf, TDSL_F32, 1, s0, NULL);
  const DLTensor *ins[2] = {&in, &lo};
  const char *const in_names[2] = {"x", "y"};
  const char *const out_names[2] = {"out0", "out1"};

  /* Disjoint (adjacent ranges touch but do not overlap). */
  const DLTensor *o1[1] = {&hi};
  ck_assert_int_eq(tdsl_check_overlap("k", o1, 1, ins, 2), TDSL_OK);
  /* Inputs may overlap each other (in and lo do). */
  ck_assert_int_eq(
      tdsl_check_overlap_named("k", o1, out_names, 1, ins, in_names, 2),
      TDSL_OK);
  /* Partially overlapping an input. */
  const DLTensor *o2[1] = {&mid};
  ck_assert_int_eq(
      tdsl_check_overlap_named("k", o2, out_names, 1, ins, in_names, 2),
      TDSL_E_OVERLAP);
  ASSERT_MSG_HAS("kernel k");
  ASSERT_MSG_HAS("'out0'");
  ASSERT_MSG_HAS("input 'x'");
  /* Identical to an input; unnamed arguments are numbered. */
  const DLTensor *o3[1] = {&in};
  ck_assert_int_eq(tdsl_check_overlap("k", o3, 1, ins, 2), TDSL_E_OVERLAP);
  ASSERT_MSG_HAS("'output 0'");
  ASSERT_MSG_HAS("input 'input 0'");
  /* Empty tensors never overlap, even at the same address. */
  const DLTensor *o4[1] = {&empty};
  ck_assert_int_eq(tdsl_check_overlap("k", o4, 1, ins, 2), TDSL_OK);
  const DLTensor *ins_e[1] = {&empty};
  const DLTensor *o5[1] = {&lo};
  ck_assert_int_eq(tdsl_check_overlap("k", o5, 1, ins_e, 1), TDSL_OK);
  /* Two outputs overlapping each other. */
  const DLTensor *o6[2] = {&hi, &mid};
  ck_assert_int_eq(
      tdsl_check_overlap_named("k", o6, out_names, 2, NULL, NULL, 0),
      TDSL_E_OVERLAP);
  ASSERT_MSG_HAS("output 'out1'");
  const DLTensor *o7[2] = {&lo, &hi};
  ck_assert_int_eq(tdsl_check_overlap("k", o7, 2, NULL, 0), TDSL_OK);
  /* byte_offset moves the range: lo shifted by 64 bytes is [16, 24). */
  DLTensor lo_off = lo;
  lo_off.byte_offset = 64;
  const DLTensor *o8[1] = {&lo_off};
  ck_assert_int_eq(tdsl_check_overlap("k", o8, 1, ins, 2), TDSL_OK);
  const DLTensor *ins_hi[1] = {&hi};
  ck_assert_int_eq(tdsl_check_overlap("k", o8, 1, ins_hi, 1),
                   TDSL_E_OVERLAP);
  /* NULL entries are skipped. */
  const DLTensor *o9[1] = {NULL};
  ck_assert_int_eq(tdsl_check_overlap("k", o9, 1, ins, 2), TDSL_OK);
}
END_TEST

START_TEST(test_check_size_scalar) {
  ck_assert_int_eq(tdsl_check_size_scalar("k", "n", 3.0), TDSL_OK);
  ck_assert_int_eq(tdsl_check_size_scalar("k", "n", NAN), TDSL_E_SCALAR);
  ASSERT_MSG_HAS("kernel k");
  ASSERT_MSG_HAS("'n'");
  ASSERT_MSG_HAS("nan");
  ck_assert_int_eq(tdsl_check_size_scalar("k", "n", INFINITY), TDSL_E_SCALAR);
}
END_TEST

static Suite *runtime_suite(void) {
  Suite *s = suite_create("runtime");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_error_codes);
  tcase_add_test(tc, test_error_message);
  tcase_add_test(tc, test_error_thread_local);
  tcase_add_test(tc, test_parallel_cover);
  tcase_add_test(tc, test_parallel_n_below_grain);
  tcase_add_test(tc, test_parallel_nested);
  tcase_add_test(tc, test_parallel_concurrent_chunks);
  tcase_add_test(tc, test_parallel_two_callers);
  tcase_add_test(tc, test_parallel_shutdown);
  tcase_add_test(tc, test_num_threads_env);
  tcase_add_test(tc, test_set_num_threads);
  tcase_add_test(tc, test_alloc_alignment);
  tcase_add_test(tc, test_alloc_hook);
  tcase_add_test(tc, test_alloc_cache);
  tcase_add_test(tc, test_alloc_huge_pages);
  tcase_add_test(tc, test_pool_spin);
  tcase_add_test(tc, test_dtypes);
  tcase_add_test(tc, test_tensor_alloc);
  tcase_add_test(tc, test_tensor_alloc_layouts);
  tcase_add_test(tc, test_numel);
  tcase_add_test(tc, test_check_tensor);
  tcase_add_test(tc, test_check_data);
  tcase_add_test(tc, test_check_dim);
  tcase_add_test(tc, test_bind_symbol);
  tcase_add_test(tc, test_check_layout_contiguous);
  tcase_add_test(tc, test_check_layout_channels_last);
  tcase_add_test(tc, test_check_layout_strided);
  tcase_add_test(tc, test_check_internal_overlap);
  tcase_add_test(tc, test_check_align);
  tcase_add_test(tc, test_extent);
  tcase_add_test(tc, test_extent_overflow);
  tcase_add_test(tc, test_check_overlap);
  tcase_add_test(tc, test_check_size_scalar);
  suite_add_tcase(s, tc);
  return s;
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--probe-threads") == 0)
    return tdsl_get_num_threads();
  if (argc == 2 && strcmp(argv[1], "--probe-alloc-cache-on") == 0)
    return alloc_cache_checks(true);
  if (argc == 2 && strcmp(argv[1], "--probe-alloc-cache-off") == 0)
    return alloc_cache_checks(false);
  if (argc == 2 && strcmp(argv[1], "--probe-pool-spin") == 0)
    return pool_spin_checks();
  self_exe = argv[0];
  SRunner *sr = srunner_create(runtime_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
