/* threadpool.c — the CPU thread pool behind tdsl_parallel_for (spec §7.2).
 *
 * Needs pthreads. A pool of (threads - 1) persistent workers is created at
 * the first parallel call and rebuilt when the requested thread count
 * changed; the calling thread is the remaining participant.
 *
 * Invariants: one job runs at a time (rt_run_lock, held by the caller for
 * the whole job). The caller publishes a job with nchunks - 1 helper
 * slots; a worker takes a slot under rt_pool.lock, pulls chunks from the
 * job's atomic counter until none are left, then checks out
 * (rt_pool.pending--). When the caller runs out of chunks it withdraws the
 * slots nobody took and waits for pending == 0, so it never waits for a
 * sleeping worker and no worker touches a job after its caller returned.
 * Chunk bounds depend only on n, grain and the thread count; which thread
 * runs which chunk depends on timing.
 *
 * Waiting spins first: a kernel runs its parallel nests back to back, and
 * waking a sleeping thread through the kernel costs tens of microseconds,
 * about a tenth of a small nest. A worker without a slot, and a caller
 * waiting for its helpers, poll (slots and pending are atomics, read
 * without the lock) for up to 100 µs (RT_SPIN_NS_DEFAULT) before they
 * sleep on the condition variables; the caller signals only the workers
 * that sleep (sleepers). Slots are still taken, and sleeping decided, under
 * rt_pool.lock, so no wake-up is lost. $TDSL_SPIN_US sets the spin
 * (0: sleep at once). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tdsl/runtime.h"

#define RT_MAX_THREADS 1024
#define RT_SPIN_NS_DEFAULT 100000 /* 100 µs */

typedef struct RtJob {
  tdsl_body_fn body;
  void *ctx;
  int64_t n;       /* iterations */
  int64_t nchunks; /* in [2, threads]; see rt_run_chunks for the bounds */
  atomic_llong next; /* next chunk to hand out */
} RtJob;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;   /* workers wait here for slots > 0 */
  pthread_cond_t done;   /* the caller waits here for pending == 0 */
  pthread_t *workers;
  int nworkers;
  atomic_int slots;      /* helpers the current job still wants */
  atomic_int pending;    /* helpers still running, plus open slots */
  atomic_bool stop;      /* workers exit at their next wake-up */
  int sleepers;          /* workers waiting on wake */
  RtJob *job;
} rt_pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
             .wake = PTHREAD_COND_INITIALIZER,
             .done = PTHREAD_COND_INITIALIZER};

static pthread_mutex_t rt_run_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int rt_requested;      /* tdsl_set_num_threads; 0: default */
static int rt_default_threads;       /* set once by rt_init_default */
static pthread_once_t rt_default_once = PTHREAD_ONCE_INIT;
static _Thread_local bool rt_in_body; /* nested calls run serially */
static int64_t rt_spin_ns = -1;      /* set once by rt_init_spin */
static pthread_once_t rt_spin_once = PTHREAD_ONCE_INIT;

/* $TDSL_SPIN_US when it is a non-negative integer, else the default. */
static void rt_init_spin(void) {
  const char *env = getenv("TDSL_SPIN_US");
  rt_spin_ns = RT_SPIN_NS_DEFAULT;
  if (env && *env) {
    char *end;
    errno = 0;
    long us = strtol(env, &end, 10);
    if (!errno && !*end && us >= 0 && us <= 1000000)
      rt_spin_ns = (int64_t)us * 1000;
  }
}

static int64_t rt_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void rt_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

/* Polls until (*v == 0) == zero, or the pool stops, for up to
 * rt_spin_ns. The caller decides again under the lock. */
static void rt_spin_until(atomic_int *v, bool zero) {
  int64_t deadline = -1;
  for (unsigned i = 0;; i++) {
    if ((atomic_load_explicit(v, memory_order_acquire) == 0) == zero ||
        atomic_load_explicit(&rt_pool.stop, memory_order_relaxed))
      return;
    rt_cpu_relax();
    if (i % 64 == 0) {
      int64_t now = rt_now_ns();
      if (deadline < 0)
        deadline = now + rt_spin_ns;
      else if (now >= deadline)
        return;
    }
  }
}

/* $TDSL_NUM_THREADS when it is a positive integer, else online cores. */
static void rt_init_default(void) {
  const char *env = getenv("TDSL_NUM_THREADS");
  long n = 0;
  if (env && *env) {
    char *end;
    errno = 0;
    n = strtol(env, &end, 10);
    if (errno || *end || n <= 0)
      n = 0;
  }
  if (n <= 0)
    n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n <= 0)
    n = 1;
  rt_default_threads = n > RT_MAX_THREADS ? RT_MAX_THREADS : (int)n;
}

void tdsl_set_num_threads(int n) {
  atomic_store(&rt_requested, n > 0 ? (n > RT_MAX_THREADS ? RT_MAX_THREADS : n) : 0);
}

int tdsl_get_num_threads(void) {
  int n = atomic_load(&rt_requested);
  if (n > 0)
    return n;
  pthread_once(&rt_default_once, rt_init_default);
  return rt_default_threads;
}

static void rt_run_chunks(RtJob *job) {
  for (;;) {
    int64_t i = (int64_t)atomic_fetch_add(&job->next, 1);
    if (i >= job->nchunks)
      return;
    /* The first n % nchunks chunks get one extra iteration; computed
     * from quotient and remainder so that no product can overflow. */
    int64_t q = job->n / job->nchunks, r = job->n % job->nchunks;
    int64_t begin = i * q + (i < r ? i : r);
    int64_t end = begin + q + (i < r ? 1 : 0);
    job->body(job->ctx, begin, end);
  }
}

static void *rt_worker(void *arg) {
  (void)arg;
  rt_in_body = true;
  pthread_mutex_lock(&rt_pool.lock);
  for (;;) {
    while (rt_pool.slots == 0 && !rt_pool.stop) {
      if (rt_spin_ns > 0) {
        pthread_mutex_unlock(&rt_pool.lock);
        rt_spin_until(&rt_pool.slots, false);
        pthread_mutex_lock(&rt_pool.lock);
        if (rt_pool.slots != 0 || rt_pool.stop) /* decided under the lock */
          break;
      }
      rt_pool.sleepers++;
      pthread_cond_wait(&rt_pool.wake, &rt_pool.lock);
      rt_pool.sleepers--;
    }
    if (rt_pool.stop)
      break;
    rt_pool.slots--;
    RtJob *job = rt_pool.job;
    pthread_mutex_unlock(&rt_pool.lock);
    rt_run_chunks(job);
    bool last = atomic_fetch_sub(&rt_pool.pending, 1) == 1;
    pthread_mutex_lock(&rt_pool.lock);
    if (last) /* under the lock: the caller decides to sleep under it */
      pthread_cond_signal(&rt_pool.done);
  }
  pthread_mutex_unlock(&rt_pool.lock);
  return NULL;
}

/* A forked child has none of the parent's workers; forget them so the
 * child builds its own pool. The locks are reinitialised because another
 * parent thread may have held them at the fork. */
static void rt_atfork_child(void) {
  pthread_mutex_init(&rt_pool.lock, NULL);
  pthread_mutex_init(&rt_run_lock, NULL);
  pthread_cond_init(&rt_pool.wake, NULL);
  pthread_cond_init(&rt_pool.done, NULL);
  free(rt_pool.workers);
  rt_pool.workers = NULL;
  rt_pool.nworkers = 0;
  rt_pool.pending = rt_pool.slots = 0;
  rt_pool.sleepers = 0;
  rt_pool.stop = false;
  rt_pool.job = NULL;
}

static pthread_once_t rt_atfork_once = PTHREAD_ONCE_INIT;
static void rt_register_atfork(void) {
  pthread_atfork(NULL, NULL, rt_atfork_child);
}

static void rt_pool_stop(void) {
  pthread_mutex_lock(&rt_pool.lock);
  rt_pool.stop = true;
  pthread_cond_broadcast(&rt_pool.wake);
  pthread_mutex_unlock(&rt_pool.lock);
  for (int i = 0; i < rt_pool.nworkers; i++)
    pthread_join(rt_pool.workers[i], NULL);
  free(rt_pool.workers);
  rt_pool.workers = NULL;
  rt_pool.nworkers = 0;
  rt_pool.stop = false;
}

/* Makes the pool have want workers; with fewer (creation failed) jobs
 * still finish because every participant pulls chunks until none remain.
 * Called with rt_run_lock held, so no job is running. */
static void rt_pool_resize(int want) {
  if (want == rt_pool.nworkers)
    return;
  pthread_once(&rt_atfork_once, rt_register_atfork);
  rt_pool_stop();
  if (want <= 0)
    return;
  rt_pool.workers = malloc((size_t)want * sizeof *rt_pool.workers);
  if (!rt_pool.workers)
    return;
  pthread_mutex_lock(&rt_pool.lock);
  for (int i = 0; i < want; i++) {
    if (pthread_create(&rt_pool.workers[i], NULL, rt_worker, NULL) != 0)
      break;
    rt_pool.nworkers++;
  }
  pthread_mutex_unlock(&rt_pool.lock);
}

static void rt_run_on_pool(RtJob *job) {
  pthread_mutex_lock(&rt_pool.lock);
  rt_pool.job = job;
  int helpers = job->nchunks - 1 < rt_pool.nworkers ? (int)job->nchunks - 1
                                                    : rt_pool.nworkers;
  rt_pool.pending = helpers;
  rt_pool.slots = helpers; /* last: a spinning worker takes it as go */
  int wake = helpers < rt_pool.sleepers ? helpers : rt_pool.sleepers;
  for (int i = 0; i < wake; i++)
    pthread_cond_signal(&rt_pool.wake);
  pthread_mutex_unlock(&rt_pool.lock);

  rt_run_chunks(job);

  pthread_mutex_lock(&rt_pool.lock);
  rt_pool.pending -= rt_pool.slots; /* withdraw slots nobody took */
  rt_pool.slots = 0;
  if (rt_pool.pending > 0 && rt_spin_ns > 0) {
    pthread_mutex_unlock(&rt_pool.lock);
    rt_spin_until(&rt_pool.pending, true);
    pthread_mutex_lock(&rt_pool.lock);
  }
  while (rt_pool.pending > 0)
    pthread_cond_wait(&rt_pool.done, &rt_pool.lock);
  rt_pool.job = NULL;
  pthread_mutex_unlock(&rt_pool.lock);
}

void tdsl_parallel_for(int64_t n, int64_t grain, tdsl_body_fn body,
                       void *ctx) {
  if (n <= 0 || !body)
    return;
  if (grain <= 0)
    grain = 1;
  int threads = tdsl_get_num_threads();
  int64_t nchunks = n / grain;
  if (nchunks > threads)
    nchunks = threads;
  if (nchunks <= 1 || rt_in_body) {
    bool outer = rt_in_body;
    rt_in_body = true;
    body(ctx, 0, n);
    rt_in_body = outer;
    return;
  }
  RtJob job = {.body = body, .ctx = ctx, .n = n, .nchunks = nchunks};
  atomic_init(&job.next, 0);
  pthread_mutex_lock(&rt_run_lock);
  pthread_once(&rt_spin_once, rt_init_spin);
  rt_pool_resize(threads - 1);
  rt_in_body = true;
  rt_run_on_pool(&job);
  rt_in_body = false;
  pthread_mutex_unlock(&rt_run_lock);
}

void tdsl_shutdown(void) {
  pthread_mutex_lock(&rt_run_lock);
  rt_pool_stop();
  pthread_mutex_unlock(&rt_run_lock);
  tdsl_alloc_release_cache();
}
