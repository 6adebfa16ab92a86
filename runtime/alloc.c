/* alloc.c — aligned host allocation for generated code's scratch buffers
 * and the tensor helpers, with a replaceable allocator (spec §7.3).
 * Needs posix_memalign. The hook is read under a lock, so replacing it
 * from one thread while others allocate is safe; freeing memory with a
 * different hook than the one that allocated it is not (documented in
 * tdsl/runtime.h). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <pthread.h>
#include <stdlib.h>

#include "tdsl/runtime.h"

#define RT_DEFAULT_ALIGN 64

typedef struct RtAllocator {
  void *(*alloc)(size_t bytes, size_t align, void *user); /* NULL: default */
  void (*free_fn)(void *p, void *user);
  void *user;
} RtAllocator;

static pthread_mutex_t rt_alloc_lock = PTHREAD_MUTEX_INITIALIZER;
static RtAllocator rt_allocator;

static RtAllocator rt_current_allocator(void) {
  pthread_mutex_lock(&rt_alloc_lock);
  RtAllocator a = rt_allocator;
  pthread_mutex_unlock(&rt_alloc_lock);
  return a;
}

void tdsl_set_allocator(void *(*alloc)(size_t, size_t, void *),
                        void (*free_fn)(void *, void *), void *user) {
  RtAllocator a = {0};
  if (alloc && free_fn)
    a = (RtAllocator){alloc, free_fn, user};
  pthread_mutex_lock(&rt_alloc_lock);
  rt_allocator = a;
  pthread_mutex_unlock(&rt_alloc_lock);
}

static void *rt_default_alloc(size_t bytes, size_t align) {
  /* posix_memalign wants a multiple of sizeof(void *); a larger power of
   * two is still aligned to the smaller one asked for. */
  if (align < sizeof(void *))
    align = sizeof(void *);
  void *p = NULL;
  if (posix_memalign(&p, align, bytes ? bytes : 1) != 0)
    return NULL;
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
  else
    free(p);
}
