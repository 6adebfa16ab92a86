/* diag.h — the two error channels.
 *
 * User mistakes go through diag_error()/diag_note(): they print
 *     file:line:col: error: message
 *         the source line
 *         ^~~~
 * and compilation goes on to find more.  Compiler bugs go through ICE()
 * (internal compiler error), which prints a message and exits with
 * status 3; it never returns. */
#ifndef TDSL_DIAG_H
#define TDSL_DIAG_H

#include <stdio.h>

/* A source position: 1-based line and column (in bytes), and the length of
 * the token to underline (0 or 1 = just the caret). */
typedef struct Loc {
  int line, col, len;
} Loc;

typedef struct Diag {
  const char *filename; /* as given on the command line */
  const char *src;      /* whole source text, NUL-terminated */
  FILE *out;            /* where diagnostics go (stderr by default) */
  int nerrors;
  int max_errors;       /* stop reporting (not compiling) after this many */
} Diag;

void diag_init(Diag *d, const char *filename, const char *src, FILE *out);
void diag_error(Diag *d, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void diag_note(Diag *d, Loc loc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

_Noreturn void ice_at(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define ICE(...) ice_at(__FILE__, __LINE__, __VA_ARGS__)
/* Invariant check that stays on in release builds. */
#define IR_ASSERT(c)                                                      \
  do {                                                                    \
    if (!(c)) ICE("assertion failed: %s", #c);                            \
  } while (0)

#endif
