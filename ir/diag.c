/* diag.c — user diagnostics with source line and caret, and internal
 * compiler errors (exit status 3). */
#include "diag.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void diag_init(Diag *d, const char *filename, const char *src, FILE *out) {
  d->filename = filename;
  d->src = src;
  d->out = out ? out : stderr;
  d->nerrors = 0;
  d->max_errors = 20;
}

/* Prints the source line `line` and a caret under columns col..col+len-1.
 * Tabs in the line are kept under the caret so it lines up. */
static void show_line(Diag *d, Loc loc) {
  if (!d->src || loc.line < 1) return;
  const char *p = d->src;
  for (int l = 1; l < loc.line && *p; l++) {
    const char *nl = strchr(p, '\n');
    if (!nl) return;
    p = nl + 1;
  }
  size_t n = strcspn(p, "\n");
  if (n > 0 && p[n - 1] == '\r') n--;
  fprintf(d->out, "    %.*s\n    ", (int)n, p);
  for (int c = 1; c < loc.col && (size_t)(c - 1) < n; c++)
    fputc(p[c - 1] == '\t' ? '\t' : ' ', d->out);
  fputc('^', d->out);
  for (int i = 1; i < loc.len; i++) fputc('~', d->out);
  fputc('\n', d->out);
}

static void report(Diag *d, Loc loc, const char *kind, const char *fmt,
                   va_list ap) {
  fprintf(d->out, "%s:%d:%d: %s: ", d->filename, loc.line, loc.col, kind);
  vfprintf(d->out, fmt, ap);
  fputc('\n', d->out);
  show_line(d, loc);
}

void diag_error(Diag *d, Loc loc, const char *fmt, ...) {
  d->nerrors++;
  if (d->nerrors > d->max_errors) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, loc, "error", fmt, ap);
  va_end(ap);
  if (d->nerrors == d->max_errors)
    fprintf(d->out, "%s: too many errors; stopping here\n", d->filename);
}

void diag_note(Diag *d, Loc loc, const char *fmt, ...) {
  if (d->nerrors > d->max_errors) return;
  va_list ap;
  va_start(ap, fmt);
  report(d, loc, "note", fmt, ap);
  va_end(ap);
}

_Noreturn void ice_at(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "tdslc: internal compiler error: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (at %s:%d)\nplease report this as a bug\n", file, line);
  va_end(ap);
  exit(3);
}
