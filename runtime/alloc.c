/* alloc.c — aligned host allocation for generated code's scratch buffers
 * and the tensor helpers, with a replaceable allocator (spec §7.3), and a
 * cache of freed large blocks.
 *
 * Needs posix_memalign. The hook is read under a lock, so replacing it
 * from one thread while others allocate is safe; freeing memory with a
 * different hook than the one that allocated it is not (documented in
 * tdsl/runtime.h).
 *
 * The cache: a kernel allocates its scratch (intermediate buffers, GEMM
 * packing) at every call and frees it on return. glibc gives large blocks
 * back to the OS when they are freed (munmap, or trimming the heap's top),
 * so every call faulted its scratch pages in afresh: a quarter of a small
 * transformer block's time went to page faults. The default allocator
 * therefore keeps blocks of at least RT_CACHE_MIN bytes after tdsl_free —
 * at most RT_CACHE_SLOTS of them and RT_CACHE_MAX bytes in all, the
 * oldest given back first — and hands one to a later request that it
 * fits without wasting more than its own size (capacity <= 2 × bytes).
 * tdsl_alloc_release_cache(), tdsl_shutdown() and tdsl_set_allocator()
 * give the kept blocks back;
 * $TDSL_ALLOC_CACHE=0 turns the cache off, and so does a build with
 * AddressSanitizer, whose use-after-free checks a cache would hide.
 *
 * Blocks of RT_HUGE_MIN bytes and more are advised to transparent huge
 * pages (madvise MADV_HUGEPAGE on their whole pages), as numpy advises its
 * arrays: a stream over 4 KiB pages runs slower (the hardware prefetcher
 * stops at each page, and the TLB misses), and a kept block pays its
 * faults once. Advice only: where the kernel has no huge pages nothing
 * changes.
 *
 * Every default block carries a header just below the pointer it hands
 * out: its capacity and its distance from the start of the malloc block.
 * Invariant: a cached block is in no caller's hands; a block is in the
 * cache at most once. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* madvise */
#endif
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rt_internal.h"
#include "tdsl/runtime.h"

#define RT_DEFAULT_ALIGN 64
#define RT_CACHE_MIN ((size_t)64 << 10)
#define RT_CACHE_MAX ((size_t)256 << 20)
#define RT_CACHE_SLOTS 32
#define RT_HUGE_MIN ((size_t)4 << 20)

#if defined(__SANITIZE_ADDRESS__)
#define RT_CACHE_DEFAULT false
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RT_CACHE_DEFAULT false
#endif
#endif
#ifndef RT_CACHE_DEFAULT
#define RT_CACHE_DEFAULT true
#endif

typedef struct RtAllocator {
  void *(*alloc)(size_t bytes, size_t align, void *user); /* NULL: default */
  void (*free_fn)(void *p, void *user);
  void *user;
} RtAllocator;

/* Just below every pointer the default allocator hands out. */
typedef struct RtHeader {
  size_t cap;  /* usable bytes from the pointer */
  size_t off;  /* pointer - start of the malloc block */
} RtHeader;

static pthread_mutex_t rt_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static RtAllocator rt_allocator;

static struct {
  void *p[RT_CACHE_SLOTS]; /* oldest first */
  int n;
  size_t bytes;            /* sum of the kept blocks' capacities */
  int enabled;             /* -1: not yet read from the environment */
} rt_cache = {.enabled = -1};

/* A forked child has only the forking thread; another thread of the
 * parent may have held the lock at the fork. The kept blocks stay valid
 * (the child has a copy of the parent's heap). */
static void rt_alloc_atfork_child(void) {
  pthread_mutex_init(&rt_alloc_lock, NULL);
}

static pthread_once_t rt_alloc_once = PTHREAD_ONCE_INIT;
static void rt_alloc_register_atfork(void) {
  pthread_atfork(NULL, NULL, rt_alloc_atfork_child);
}

static RtAllocator rt_current_allocator(void) {
  pthread_once(&rt_alloc_once, rt_alloc_register_atfork);
  pthread_mutex_lock(&rt_alloc_lock);
  RtAllocator a = rt_allocator;
  pthread_mutex_unlock(&rt_alloc_lock);
  return a;
}

static RtHeader *rt_header(void *p) { return (RtHeader *)p - 1; }

static void rt_block_release(void *p) {
  free((char *)p - rt_header(p)->off);
}

/* Gives back every kept block. Called with rt_alloc_lock held. */
static void rt_cache_drop_locked(void) {
  for (int i = 0; i < rt_cache.n; i++)
    rt_block_release(rt_cache.p[i]);
  rt_cache.n = 0;
  rt_cache.bytes = 0;
}

void tdsl_set_allocator(void *(*alloc)(size_t, size_t, void *),
                        void (*free_fn)(void *, void *), void *user) {
  RtAllocator a = {0};
  if (alloc && free_fn)
    a = (RtAllocator){alloc, free_fn, user};
  pthread_mutex_lock(&rt_alloc_lock);
  rt_allocator = a;
  rt_cache_drop_locked(); /* kept blocks are the default allocator's */
  pthread_mutex_unlock(&rt_alloc_lock);
}

void tdsl_alloc_release_cache(void) {
  pthread_mutex_lock(&rt_alloc_lock);
  rt_cache_drop_locked();
  pthread_mutex_unlock(&rt_alloc_lock);
}

size_t rt_alloc_cached_bytes(void) {
  pthread_mutex_lock(&rt_alloc_lock);
  size_t b = rt_cache.bytes;
  pthread_mutex_unlock(&rt_alloc_lock);
  return b;
}

/* Called with rt_alloc_lock held. */
static bool rt_cache_on(void) {
  if (rt_cache.enabled < 0) {
    const char *env = getenv("TDSL_ALLOC_CACHE");
    rt_cache.enabled = env && *env ? strcmp(env, "0") != 0 : RT_CACHE_DEFAULT;
  }
  return rt_cache.enabled;
}

/* The smallest kept block that holds bytes at align, wasting at most
 * bytes; NULL when none does. */
static void *rt_cache_take(size_t bytes, size_t align) {
  if (bytes < RT_CACHE_MIN)
    return NULL;
  void *got = NULL;
  pthread_mutex_lock(&rt_alloc_lock);
  if (rt_cache_on()) {
    int best = -1;
    for (int i = 0; i < rt_cache.n; i++) {
      size_t cap = rt_header(rt_cache.p[i])->cap;
      if (cap >= bytes && cap / 2 <= bytes &&
          (uintptr_t)rt_cache.p[i] % align == 0 &&
          (best < 0 || cap < rt_header(rt_cache.p[best])->cap))
        best = i;
    }
    if (best >= 0) {
      got = rt_cache.p[best];
      rt_cache.bytes -= rt_header(got)->cap;
      memmove(&rt_cache.p[best], &rt_cache.p[best + 1],
              (size_t)(rt_cache.n - best - 1) * sizeof rt_cache.p[0]);
      rt_cache.n--;
    }
  }
  pthread_mutex_unlock(&rt_alloc_lock);
  return got;
}

/* Keeps p when it is large and fits, giving back the oldest blocks to
 * make room; false when p was not kept. */
static bool rt_cache_put(void *p) {
  size_t cap = rt_header(p)->cap;
  if (cap < RT_CACHE_MIN || cap > RT_CACHE_MAX)
    return false;
  bool kept = false;
  pthread_mutex_lock(&rt_alloc_lock);
  if (rt_cache_on()) {
    int drop = 0;
    while (drop < rt_cache.n &&
           (rt_cache.n - drop >= RT_CACHE_SLOTS ||
            rt_cache.bytes + cap > RT_CACHE_MAX)) {
      rt_cache.bytes -= rt_header(rt_cache.p[drop])->cap;
      rt_block_release(rt_cache.p[drop]);
      drop++;
    }
    memmove(&rt_cache.p[0], &rt_cache.p[drop],
            (size_t)(rt_cache.n - drop) * sizeof rt_cache.p[0]);
    rt_cache.n -= drop;
    rt_cache.p[rt_cache.n++] = p;
    rt_cache.bytes += cap;
    kept = true;
  }
  pthread_mutex_unlock(&rt_alloc_lock);
  return kept;
}

static void *rt_default_alloc(size_t bytes, size_t align) {
  void *p = rt_cache_take(bytes, align);
  if (p)
    return p;
  /* The header sits in the first off bytes: off is a multiple of align
   * (so p stays aligned) and at least the header's size. posix_memalign
   * wants a multiple of sizeof(void *); a larger power of two is still
   * aligned to the smaller one asked for. */
  size_t a = align < sizeof(void *) ? sizeof(void *) : align;
  size_t off = a >= sizeof(RtHeader) ? a : sizeof(RtHeader);
  if (bytes > SIZE_MAX - off)
    return NULL;
  void *raw = NULL;
  if (posix_memalign(&raw, a, off + (bytes ? bytes : 1)) != 0)
    return NULL;
  p = (char *)raw + off;
  *rt_header(p) = (RtHeader){.cap = bytes ? bytes : 1, .off = off};
#ifdef MADV_HUGEPAGE
  if (bytes >= RT_HUGE_MIN) {
    long ps = sysconf(_SC_PAGESIZE);
    uintptr_t page = ps > 0 ? (uintptr_t)ps : 4096;
    uintptr_t lo = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(page - 1);
    madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a failure is harmless */
  }
#endif
  return p;
}

void *tdsl_alloc(size_t bytes, size_t align) {
  if (align == 0)
    align = RT_DEFAULT_ALIGN;
  if (align & (align - 1)) {
    tdsl_set_error(TDSL_E_INVALID,
                   "tdsl_alloc: alignment %zu is not a power of two", align);
    return NULL;
  }
  RtAllocator a = rt_current_allocator();
  void *p = a.alloc ? a.alloc(bytes, align, a.user)
                    : rt_default_alloc(bytes, align);
  if (!p)
    tdsl_set_error(TDSL_E_NOMEM,
                   "tdsl_alloc: cannot allocate %zu bytes aligned to %zu",
                   bytes, align);
  return p;
}

void tdsl_free(void *p) {
  if (!p)
    return;
  RtAllocator a = rt_current_allocator();
  if (a.free_fn)
    a.free_fn(p, a.user);
  else if (!rt_cache_put(p))
    rt_block_release(p);
}
