/* rt_internal.h — helpers shared by the runtime's source files, defined
 * in descriptor.c: checked 64-bit arithmetic and formatting of shapes for
 * error messages. Not installed. */
#ifndef TDSL_RT_INTERNAL_H
#define TDSL_RT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *r = a * b / a + b; false (and *r unspecified) when it leaves int64. */
bool rt_mul_ok(int64_t a, int64_t b, int64_t *r);
bool rt_add_ok(int64_t a, int64_t b, int64_t *r);

/* Writes "[a, b, c]" (or "NULL") into buf; always NUL-terminates. */
void rt_format_dims(char *buf, size_t cap, int n, const int64_t *v);

#endif /* TDSL_RT_INTERNAL_H */
