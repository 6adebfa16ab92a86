/* error.c — error codes, their names, and the per-thread message of the
 * last failure (spec §7.2: "tdsl_last_error() returns a message naming the
 * kernel, the argument, ..."). Needs only libc; the message lives in
 * thread-local storage, so threads never see each other's failures. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tdsl/runtime.h"

#define RT_MSG_CAP 1024

static _Thread_local char rt_msg[RT_MSG_CAP];
static _Thread_local int rt_code;

#define RT_ERROR_LIST(X)                                                  \
  X(TDSL_OK) X(TDSL_E_NULL) X(TDSL_E_RANK) X(TDSL_E_DTYPE)                 \
  X(TDSL_E_DEVICE) X(TDSL_E_SHAPE) X(TDSL_E_SYMBOL) X(TDSL_E_OVERFLOW)     \
  X(TDSL_E_LAYOUT) X(TDSL_E_ALIGN) X(TDSL_E_OVERLAP) X(TDSL_E_SCALAR)      \
  X(TDSL_E_CHECK) X(TDSL_E_NO_DEVICE) X(TDSL_E_CUDA) X(TDSL_E_NOMEM)       \
  X(TDSL_E_INVALID) X(TDSL_E_INDEX) X(TDSL_E_ISA)

const char *tdsl_strerror(int code) {
  switch (code) {
#define X(c)                                                              \
  case c:                                                                 \
    return #c;
    RT_ERROR_LIST(X)
#undef X
  default:
    return "TDSL_E_UNKNOWN";
  }
}

const char *tdsl_last_error(void) { return rt_msg; }

int tdsl_last_error_code(void) { return rt_code; }

void tdsl_clear_error(void) {
  rt_msg[0] = '\0';
  rt_code = TDSL_OK;
}

int tdsl_set_error(int code, const char *fmt, ...) {
  rt_code = code;
  if (!fmt) {
    snprintf(rt_msg, sizeof rt_msg, "%s", tdsl_strerror(code));
    return code;
  }
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt_msg, sizeof rt_msg, fmt, ap);
  va_end(ap);
  return code;
}
