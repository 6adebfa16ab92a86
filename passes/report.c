/* report.c — the optimization report (spec §11).
 *
 * Collects, per kernel, the decisions the passes record (pass, kind,
 * source location, a sentence, the bytes it saves or costs), the time of
 * each pass, and the totals the driver estimates after lowering (bytes
 * moved and loop nests at -O0 and as compiled, scratch bytes).  Writes
 * them as text for a person or as JSON for tools; report_html.c writes
 * the same data as a page, through report_data.h and the helpers here.
 *
 * Needs: report_data.h, ir.h (Loc, Sym).  Everything lives in the caller's
 * arena; nothing is freed separately. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "report_data.h"

Report *report_new(Arena *a, const char *file, const char *target) {
  Report *r = arena_alloc(a, sizeof *r);
  r->a = a;
  r->file = arena_strdup(a, file ? file : "<input>");
  r->target = arena_strdup(a, target ? target : "host");
  r->cur = -1;
  return r;
}

void report_set_isa(Report *r, const char *variants) {
  r->isa = variants ? arena_strdup(r->a, variants) : NULL;
}

/* Several variants (--target=x86-64): the object picks one per kernel. */
static bool multi_isa(const Report *r) { return r->isa && strchr(r->isa, ' '); }

static int find_kernel(const Report *r, const char *name) {
  for (int i = 0; i < r->nks; i++)
    if (!strcmp(r->ks[i].name, name)) return i;
  return -1;
}

/* The section of kernel k, created at the end when new. */
static int kernel_section(Report *r, const IrKernel *k) {
  int i = find_kernel(r, k->name);
  if (i >= 0) return i;
  if (r->nks == r->kcap) r->ks = arena_grow(r->a, r->ks, &r->kcap, sizeof *r->ks);
  KReport *kr = &r->ks[r->nks];
  memset(kr, 0, sizeof *kr);
  kr->name = arena_strdup(r->a, k->name);
  kr->loc = k->loc;
  return r->nks++;
}

void report_kernel(Report *r, const IrKernel *k) { r->cur = kernel_section(r, k); }

static KReport *current(Report *r) {
  if (r->cur < 0) ICE("report: a decision before report_kernel()");
  return &r->ks[r->cur];
}

static void add_decision(Report *r, const char *pass, const char *kind,
                         Loc loc, int64_t bytes, const Sym *sbytes,
                         const char *fmt, va_list ap) {
  KReport *kr = current(r);
  if (kr->ndec == kr->deccap)
    kr->dec = arena_grow(r->a, kr->dec, &kr->deccap, sizeof *kr->dec);
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *msg = arena_alloc(r->a, (size_t)(n < 0 ? 0 : n) + 1);
  if (n > 0) vsnprintf(msg, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  int64_t cb;
  if (sbytes && sym_is_const(sbytes, &cb)) bytes = cb, sbytes = NULL;
  kr->dec[kr->ndec++] = (Decision){.pass = arena_strdup(r->a, pass),
                                   .kind = arena_strdup(r->a, kind),
                                   .msg = msg, .loc = loc, .bytes = bytes,
                                   .sbytes = sbytes};
}

void report_decision(Report *r, const char *pass, const char *kind, Loc loc,
                     int64_t bytes, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  add_decision(r, pass, kind, loc, bytes, NULL, fmt, ap);
  va_end(ap);
}

void report_decision_sym(Report *r, const char *pass, const char *kind,
                         Loc loc, const Sym *bytes, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  add_decision(r, pass, kind, loc, 0, bytes, fmt, ap);
  va_end(ap);
}

void report_decision_json(Report *r, const char *members) {
  KReport *kr = current(r);
  if (!kr->ndec) ICE("report: JSON members before any decision");
  kr->dec[kr->ndec - 1].json = arena_strdup(r->a, members);
}

void report_pass_time(Report *r, const char *pass, double ms, bool changed) {
  KReport *kr = current(r);
  if (kr->ntimes == kr->timecap)
    kr->times = arena_grow(r->a, kr->times, &kr->timecap, sizeof *kr->times);
  kr->times[kr->ntimes++] =
      (PassTime){.name = arena_strdup(r->a, pass), .ms = ms, .changed = changed};
}

void report_set_totals(Report *r, const IrKernel *k, const Sym *bytes_before,
                       const Sym *bytes_after, int nests_before,
                       int nests_after, const Sym *scratch_bytes) {
  KReport *kr = &r->ks[kernel_section(r, k)];
  kr->has_totals = true;
  kr->bytes_before = bytes_before;
  kr->bytes_after = bytes_after;
  kr->nests_before = nests_before;
  kr->nests_after = nests_after;
  kr->scratch = scratch_bytes;
}

int report_count(const Report *r, const char *kernel, const char *pass,
                 const char *kind) {
  int n = 0;
  for (int i = 0; i < r->nks; i++) {
    if (kernel && strcmp(r->ks[i].name, kernel)) continue;
    for (int j = 0; j < r->ks[i].ndec; j++) {
      const Decision *d = &r->ks[i].dec[j];
      if ((!pass || !strcmp(d->pass, pass)) && (!kind || !strcmp(d->kind, kind)))
        n++;
    }
  }
  return n;
}

/* ---- text ---------------------------------------------------------------- */

/* A byte count for people: "512 B", "1.5 KB", "3.1 MB" (powers of 1000). */
void report_format_bytes(char *buf, size_t n, int64_t b) {
  static const char *const unit[] = {"B", "KB", "MB", "GB", "TB"};
  double v = (double)(b < 0 ? -b : b);
  int u = 0;
  while (v >= 1000.0 && u < 4) v /= 1000.0, u++;
  const char *sign = b < 0 ? "-" : "";
  if (u == 0) snprintf(buf, n, "%s%lld B", sign, (long long)(b < 0 ? -b : b));
  else snprintf(buf, n, "%s%.*f %s", sign, v < 10 ? 2 : v < 100 ? 1 : 0, v, unit[u]);
}

const char *report_bytes_str(Arena *a, const Sym *bytes) {
  int64_t n;
  if (!sym_is_const(bytes, &n)) return arena_printf(a, "%s bytes", sym_str(a, bytes));
  char buf[32];
  report_format_bytes(buf, sizeof buf, n);
  return arena_strdup(a, buf);
}

void report_put_bytes(FILE *f, const Sym *s) {
  int64_t v;
  char buf[48];
  if (!s) {
    fputs("?", f);
  } else if (sym_is_const(s, &v)) {
    report_format_bytes(buf, sizeof buf, v);
    fputs(buf, f);
  } else {
    sym_print(f, s);
    fputs(" bytes", f);
  }
}

void report_put_ratio(FILE *f, const KReport *kr) {
  int64_t b0, b1;
  if (kr->bytes_before && kr->bytes_after && sym_is_const(kr->bytes_before, &b0) &&
      sym_is_const(kr->bytes_after, &b1) && b1 > 0 && b0 != b1)
    fprintf(f, b0 > b1 ? " (%.2fx less)" : " (%.2fx more)",
            b0 > b1 ? (double)b0 / (double)b1 : (double)b1 / (double)b0);
}

static void text_totals(const KReport *kr, bool cuda, FILE *f) {
  if (!kr->has_totals) {
    fputs("  bytes moved, loop nests: not estimated\n", f);
    return;
  }
  fputs("  bytes moved:  ", f);
  report_put_bytes(f, kr->bytes_before);
  fputs(" -> ", f);
  report_put_bytes(f, kr->bytes_after);
  report_put_ratio(f, kr);
  fputs(" (-O0 -> as compiled)\n", f);
  /* CUDA runs each nest as one launch */
  fprintf(f, cuda ? "  launches:     %d -> %d\n" : "  loop nests:   %d -> %d\n",
          kr->nests_before, kr->nests_after);
  fputs("  scratch:      ", f);
  report_put_bytes(f, kr->scratch);
  fputc('\n', f);
}

static void text_decision(const Report *r, const Decision *d, FILE *f) {
  fprintf(f, "    %s:%d:%d: %s: %s: %s", r->file, d->loc.line, d->loc.col,
          d->pass, d->kind, d->msg);
  fputc('\n', f);
}

bool report_first_of_pass(const KReport *kr, int i) {
  for (int j = 0; j < i; j++)
    if (!strcmp(kr->dec[j].pass, kr->dec[i].pass)) return false;
  return true;
}

/* Decisions grouped by pass, passes in the order they first appear. */
static void text_decisions(const Report *r, const KReport *kr, FILE *f) {
  if (!kr->ndec) {
    fputs("  no decisions recorded\n", f);
    return;
  }
  for (int i = 0; i < kr->ndec; i++) {
    if (!report_first_of_pass(kr, i)) continue;
    fprintf(f, "  %s:\n", kr->dec[i].pass);
    for (int j = i; j < kr->ndec; j++)
      if (!strcmp(kr->dec[j].pass, kr->dec[i].pass)) text_decision(r, &kr->dec[j], f);
  }
}

void report_write_text(const Report *r, FILE *f) {
  fprintf(f, "optimization report for %s (target %s)\n", r->file, r->target);
  if (multi_isa(r))
    fprintf(f, "ISA variants built: %s (each kernel picks one at its first call)\n", r->isa);
  for (int i = 0; i < r->nks; i++) {
    const KReport *kr = &r->ks[i];
    fprintf(f, "\nkernel %s (%s:%d:%d)\n", kr->name, r->file, kr->loc.line,
            kr->loc.col);
    text_totals(kr, !strncmp(r->target, "cuda", 4), f);
    text_decisions(r, kr, f);
    if (kr->ntimes) {
      fputs("  pass times:\n", f);
      for (int j = 0; j < kr->ntimes; j++)
        fprintf(f, "    %-18s %8.3f ms%s\n", kr->times[j].name, kr->times[j].ms,
                kr->times[j].changed ? "  (changed the kernel)" : "");
    } else {
      fputs("  no passes ran (-O0)\n", f);
    }
  }
}

/* ---- JSON ---------------------------------------------------------------- */

void report_json_string(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    switch (*p) {
    case '"': fputs("\\\"", f); break;
    case '\\': fputs("\\\\", f); break;
    case '\n': fputs("\\n", f); break;
    case '\t': fputs("\\t", f); break;
    case '\r': fputs("\\r", f); break;
    default:
      if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\u%04x", *p);
      else fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* A size: a number when constant, its expression as a string when not,
 * null when unknown. */
static void json_sym(FILE *f, const Sym *s) {
  int64_t v;
  if (!s) {
    fputs("null", f);
  } else if (sym_is_const(s, &v)) {
    fprintf(f, "%lld", (long long)v);
  } else {
    char *buf = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&buf, &n);
    if (!m) ICE("out of memory");
    sym_print(m, s);
    fclose(m);
    report_json_string(f, buf);
    free(buf);
  }
}

static void json_decision(FILE *f, const Decision *d) {
  fputs("{\"pass\": ", f);
  report_json_string(f, d->pass);
  fputs(", \"kind\": ", f);
  report_json_string(f, d->kind);
  fprintf(f, ", \"line\": %d, \"col\": %d, \"message\": ", d->loc.line, d->loc.col);
  report_json_string(f, d->msg);
  fputs(", \"bytes\": ", f);
  if (d->sbytes) json_sym(f, d->sbytes);
  else fprintf(f, "%lld", (long long)d->bytes);
  if (d->json) fprintf(f, ", %s", d->json);
  fputc('}', f);
}

static void json_kernel(FILE *f, const KReport *kr) {
  fputs("    {\"name\": ", f);
  report_json_string(f, kr->name);
  fputs(",\n     \"decisions\": [", f);
  for (int j = 0; j < kr->ndec; j++) {
    fputs(j ? ",\n       " : "\n       ", f);
    json_decision(f, &kr->dec[j]);
  }
  fputs("],\n     \"bytes_moved\": {\"before\": ", f);
  json_sym(f, kr->has_totals ? kr->bytes_before : NULL);
  fputs(", \"after\": ", f);
  json_sym(f, kr->has_totals ? kr->bytes_after : NULL);
  fputs("},\n     \"loop_nests\": {\"before\": ", f);
  if (kr->has_totals) fprintf(f, "%d, \"after\": %d}", kr->nests_before, kr->nests_after);
  else fputs("null, \"after\": null}", f);
  fputs(",\n     \"scratch_bytes\": ", f);
  json_sym(f, kr->has_totals ? kr->scratch : NULL);
  fputs(",\n     \"passes\": [", f);
  for (int j = 0; j < kr->ntimes; j++) {
    fputs(j ? ", " : "", f);
    fputs("{\"name\": ", f);
    report_json_string(f, kr->times[j].name);
    fprintf(f, ", \"ms\": %.3f, \"changed\": %s}", kr->times[j].ms,
            kr->times[j].changed ? "true" : "false");
  }
  fputs("]}", f);
}

void report_write_json(const Report *r, FILE *f) {
  fputs("{\"file\": ", f);
  report_json_string(f, r->file);
  fputs(", \"target\": ", f);
  report_json_string(f, r->target);
  if (multi_isa(r)) {
    fputs(", \"isa_variants\": [", f);
    const char *p = r->isa;
    for (int n = 0; *p; n++) {
      size_t len = strcspn(p, " ");
      fprintf(f, "%s\"%.*s\"", n ? ", " : "", (int)len, p);
      p += len + (p[len] == ' ');
    }
    fputs("]", f);
  }
  fputs(",\n  \"kernels\": [", f);
  for (int i = 0; i < r->nks; i++) {
    fputs(i ? ",\n" : "\n", f);
    json_kernel(f, &r->ks[i]);
  }
  fputs("]}\n", f);
}
