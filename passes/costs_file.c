/* costs_file.c — cost files: a row of the cost table (passes.h PassCosts)
 * as text, so that a row measured on one machine (tdslc --calibrate,
 * driver/calibrate.c) can weigh the passes' decisions when compiling for
 * it (--costs=FILE, TDSL_COSTS).
 *
 * The format, version 1 (docs/architecture.md "How a target picks its
 * numbers"): UTF-8 or ASCII text, one `key value` per line, key and value
 * separated by spaces or tabs; blank lines and lines whose first
 * non-blank character is '#' are ignored; trailing blanks and a CR before
 * the newline are ignored.
 *
 *   # tdsl cost model, written by tdslc --calibrate
 *   tdsl-costs 1                  first line that is not a comment
 *   family cpu                    required: cpu or cuda (the row it replaces)
 *   machine AMD EPYC 7B13 ...     optional free text (the CPU's name)
 *   date 2026-11-26T20:40:12Z     optional free text
 *   gflops 61.3                   then any of PassCosts' numbers, by field name
 *   ...
 *
 * A number not in the file keeps the built-in row's value (so a file may
 * override a few).  Errors, each "path:line: error: ..." (at most
 * MAX_ERRORS printed): a missing or other version line, an unknown key,
 * a key given twice, a value that is not a number (or not an integer for
 * few_channels and fuse_multi_use_budget), out of its range (rates and
 * factors > 0 and finite, ns per byte >= 0), a missing family, a NUL byte.
 *
 * Needs: passes.h (PassCosts, pass_costs_row), arena.h.  Used by:
 * driver/tdslc.c (--costs, TDSL_COSTS), driver/calibrate.c (writes). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

#define MAX_ERRORS 8

/* The numbers of a row, by their field names (the file's keys). */
typedef enum Kind {
  K_RATE, /* finite, > 0 */
  K_NS,   /* finite, >= 0 */
  K_INT   /* an integer in [lo, hi] */
} Kind;

static const struct {
  const char *key;
  size_t off;
  Kind kind;
  int lo, hi;
} fields[] = {
    {"gflops", offsetof(PassCosts, gflops), K_RATE, 0, 0},
    {"bw_gbs", offsetof(PassCosts, bw_gbs), K_RATE, 0, 0},
    {"f_strided", offsetof(PassCosts, f_strided), K_RATE, 0, 0},
    {"conv_eff_nchw_1x1", offsetof(PassCosts, conv_eff_nchw_1x1), K_RATE, 0, 0},
    {"conv_eff_nhwc_1x1", offsetof(PassCosts, conv_eff_nhwc_1x1), K_RATE, 0, 0},
    {"conv_eff_nchw_kxk", offsetof(PassCosts, conv_eff_nchw_kxk), K_RATE, 0, 0},
    {"conv_eff_nhwc_kxk", offsetof(PassCosts, conv_eff_nhwc_kxk), K_RATE, 0, 0},
    {"conv_eff_nchw_kxk_512", offsetof(PassCosts, conv_eff_nchw_kxk_512), K_RATE, 0, 0},
    {"conv_eff_nchw_fewc", offsetof(PassCosts, conv_eff_nchw_fewc), K_RATE, 0, 0},
    {"conv_eff_nhwc_fewc", offsetof(PassCosts, conv_eff_nhwc_fewc), K_RATE, 0, 0},
    {"few_channels", offsetof(PassCosts, few_channels), K_INT, 1, 1 << 20},
    {"ns_gather_kxk", offsetof(PassCosts, ns_gather_kxk), K_NS, 0, 0},
    {"ns_gather_1x1", offsetof(PassCosts, ns_gather_1x1), K_NS, 0, 0},
    {"ns_runs_kxk", offsetof(PassCosts, ns_runs_kxk), K_NS, 0, 0},
    {"ns_runs_1x1", offsetof(PassCosts, ns_runs_1x1), K_NS, 0, 0},
    {"fuse_multi_use_budget", offsetof(PassCosts, fuse_multi_use_budget), K_INT, 0, 1000},
};
#define NFIELDS (sizeof fields / sizeof *fields)

/* The header keys besides the numbers. */
enum { H_FAMILY = NFIELDS, H_MACHINE, H_DATE, NKEYS };

static const char *key_name(int k) {
  if (k < (int)NFIELDS) return fields[k].key;
  return k == H_FAMILY ? "family" : k == H_MACHINE ? "machine" : "date";
}

typedef struct Parse {
  const char *path;
  FILE *err;
  int nerrors;
  int line_of[NKEYS]; /* where each key was given; 0: not given */
  double num[NFIELDS];
  const char *family; /* "cpu", "cuda", or NULL before the family line */
} Parse;

static void error(Parse *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void error(Parse *p, int line, const char *fmt, ...) {
  if (p->nerrors++ >= MAX_ERRORS) return;
  va_list ap;
  va_start(ap, fmt);
  if (line > 0) fprintf(p->err, "%s:%d: error: ", p->path, line);
  else fprintf(p->err, "%s: error: ", p->path);
  vfprintf(p->err, fmt, ap);
  fputc('\n', p->err);
  va_end(ap);
}

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

/* One value: checks and stores it. */
static void set_number(Parse *p, int line, int k, const char *v) {
  errno = 0;
  char *end;
  double d = strtod(v, &end);
  if (end == v || *end) {
    error(p, line, "%s: '%s' is not a number", fields[k].key, v);
    return;
  }
  if (errno == ERANGE || !isfinite(d)) {
    error(p, line, "%s: '%s' is out of range", fields[k].key, v);
    return;
  }
  switch (fields[k].kind) {
  case K_RATE:
    if (!(d > 0)) error(p, line, "%s must be greater than 0, got %s", fields[k].key, v);
    break;
  case K_NS:
    if (d < 0) error(p, line, "%s must be 0 or more, got %s", fields[k].key, v);
    break;
  case K_INT:
    if (d != floor(d) || d < fields[k].lo || d > fields[k].hi)
      error(p, line, "%s must be an integer from %d to %d, got %s", fields[k].key,
            fields[k].lo, fields[k].hi, v);
    break;
  }
  p->num[k] = d;
}

static void key_value(Parse *p, int line, const char *key, size_t klen, const char *v) {
  int k = 0;
  while (k < NKEYS && !(strlen(key_name(k)) == klen && !strncmp(key_name(k), key, klen))) k++;
  if (k == NKEYS) {
    error(p, line, "unknown key '%.*s' (keys: family, machine, date and the numbers "
          "of a cost row: gflops, bw_gbs, f_strided, conv_eff_*, few_channels, ns_*, "
          "fuse_multi_use_budget)", (int)klen, key);
    return;
  }
  if (p->line_of[k]) {
    error(p, line, "'%s' is given twice (first at line %d)", key_name(k), p->line_of[k]);
    return;
  }
  p->line_of[k] = line;
  if (k == H_FAMILY) {
    if (strcmp(v, "cpu") && strcmp(v, "cuda"))
      error(p, line, "family: expected cpu or cuda, got '%s'", v);
    else p->family = strcmp(v, "cpu") ? "cuda" : "cpu";
  } else if (k < (int)NFIELDS) {
    if (!*v) error(p, line, "%s needs a value", key_name(k));
    else set_number(p, line, k, v);
  }
}

/* The version line: "tdsl-costs N". */
static void version_line(Parse *p, int line, const char *s) {
  const char *tag = "tdsl-costs";
  size_t n = strlen(tag);
  if (strncmp(s, tag, n) || (s[n] && !blank(s[n]))) {
    error(p, line, "not a tdsl cost file: the first line that is not a comment "
          "must be 'tdsl-costs %d' (tdslc --calibrate writes such files)", PASS_COSTS_VERSION);
    return;
  }
  const char *v = s + n;
  while (blank(*v)) v++;
  char *end;
  long ver = strtol(v, &end, 10);
  if (end == v || *end) {
    error(p, line, "tdsl-costs: expected a version number, got '%s'", v);
    return;
  }
  if (ver != PASS_COSTS_VERSION)
    error(p, line, "cost file version %ld; this tdslc reads version %d (run tdslc "
          "--calibrate again)", ver, PASS_COSTS_VERSION);
}

bool pass_costs_parse(Arena *a, const char *path, const char *text, PassCosts *out,
                      FILE *err) {
  Parse p;
  memset(&p, 0, sizeof p);
  p.path = path;
  p.err = err;
  bool seen_version = false;
  int line = 0;
  char buf[512];
  for (const char *s = text; *s;) {
    line++;
    size_t n = strcspn(s, "\n");
    const char *next = s + n + (s[n] == '\n');
    if (n >= sizeof buf) {
      error(&p, line, "line too long (%zu characters, at most %zu)", n, sizeof buf - 1);
      s = next;
      continue;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    s = next;
    while (n && blank(buf[n - 1])) buf[--n] = '\0';
    char *b = buf;
    while (blank(*b)) b++;
    if (!*b || *b == '#') continue;
    if (!seen_version) {
      seen_version = true;
      version_line(&p, line, b);
      if (p.nerrors) break; /* not a cost file: nothing else is worth saying */
      continue;
    }
    size_t klen = 0;
    while (b[klen] && !blank(b[klen])) klen++;
    const char *v = b + klen;
    while (blank(*v)) v++;
    key_value(&p, line, b, klen, v);
  }
  if (!seen_version)
    error(&p, 0, "empty cost file (expected 'tdsl-costs %d' and a family)", PASS_COSTS_VERSION);
  else if (!p.nerrors && !p.line_of[H_FAMILY])
    error(&p, 0, "no 'family' line (cpu or cuda: the target family the numbers are for)");
  if (p.nerrors > MAX_ERRORS)
    fprintf(err, "%s: error: %d more errors not shown\n", path, p.nerrors - MAX_ERRORS);
  if (p.nerrors) return false;
  *out = *pass_costs_row(p.family);
  out->source = arena_strdup(a, path);
  for (size_t k = 0; k < NFIELDS; k++) {
    if (!p.line_of[k]) continue;
    char *f = (char *)out + fields[k].off;
    if (fields[k].kind == K_INT) *(int *)f = (int)p.num[k];
    else *(double *)f = p.num[k];
  }
  return true;
}

bool pass_costs_load(Arena *a, const char *path, PassCosts *out, FILE *err) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(err, "%s: error: cannot read the cost file: %s\n", path, strerror(errno));
    return false;
  }
  size_t cap = 4096, n = 0;
  char *text = malloc(cap + 1);
  while (text && (n += fread(text + n, 1, cap - n, f)) == cap && cap < (1u << 20)) {
    char *t = realloc(text, 2 * cap + 1);
    if (!t) free(text);
    text = t;
    cap *= 2;
  }
  bool bad = !text || ferror(f);
  int saved = errno;
  fclose(f);
  if (bad || n == cap) {
    fprintf(err, "%s: error: cannot read the cost file: %s\n", path,
            !text ? "out of memory" : n == cap ? "larger than 1 MB" : strerror(saved));
    free(text);
    return false;
  }
  text[n] = '\0';
  const char *nul = memchr(text, '\0', n);
  bool ok;
  if (nul) {
    int line = 1;
    for (const char *c = text; c < nul; c++) line += *c == '\n';
    fprintf(err, "%s:%d: error: the cost file contains a NUL byte; it must be text\n", path,
            line);
    ok = false;
  } else {
    ok = pass_costs_parse(a, path, text, out, err);
  }
  free(text);
  return ok;
}

/* A free-text header line, control characters as spaces. */
static void put_text(FILE *f, const char *key, const char *v) {
  if (!v || !*v) return;
  fprintf(f, "%s ", key);
  for (const unsigned char *c = (const unsigned char *)v; *c; c++)
    fputc(*c < 0x20 || *c == 0x7f ? ' ' : *c, f);
  fputc('\n', f);
}

void pass_costs_write(FILE *f, const PassCosts *c, const char *machine, const char *date) {
  fprintf(f, "# tdsl cost model (docs/architecture.md, \"How a target picks its numbers\").\n"
             "# Written by tdslc --calibrate; read by tdslc --costs=FILE or TDSL_COSTS=FILE.\n"
             "tdsl-costs %d\n"
             "family %s\n", PASS_COSTS_VERSION, c->name);
  put_text(f, "machine", machine);
  put_text(f, "date", date);
  for (size_t k = 0; k < NFIELDS; k++) {
    const char *p = (const char *)c + fields[k].off;
    if (fields[k].kind == K_INT) fprintf(f, "%s %d\n", fields[k].key, *(const int *)p);
    else fprintf(f, "%s %.6g\n", fields[k].key, *(const double *)p);
  }
}
