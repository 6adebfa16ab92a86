/* rt_internal.h — helpers shared by the runtime's source files: checked
 * 64-bit arithmetic (here, inline), formatting of shapes for error
 * messages (descriptor.c), and probes for tests: the CUDA loader (cuda.c)
 * and the allocation cache (alloc.c). Not installed. */
#ifndef TDSL_RT_INTERNAL_H
#define TDSL_RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *r = a * b / a + b; false (and *r unspecified) when it leaves int64.
 * Inline and through the compilers' overflow builtins (one multiply or
 * add and a flag test): the entry checks call them tens of times per
 * kernel call. */
static inline bool rt_mul_ok(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_mul_overflow(a, b, r);
}
static inline bool rt_add_ok(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_add_overflow(a, b, r);
}

/* Writes "[a, b, c]" (or "NULL") into buf; always NUL-terminates. */
void rt_format_dims(char *buf, size_t cap, int n, const int64_t *v);

/* How many times the CUDA driver was searched for (loading it first if no
 * call has yet): 1 for the process's life, whatever the outcome. */
int rt_cuda_load_count(void);
/* Bytes the allocation cache keeps (alloc.c). */
size_t rt_alloc_cached_bytes(void);
/* Bytes of scratch kept for the legacy stream (runtime/cuda.c). */
size_t rt_cuda_kept_bytes(void);

#endif /* TDSL_RT_INTERNAL_H */
