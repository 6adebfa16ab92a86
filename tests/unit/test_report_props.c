/* test_report_props.c — properties of the optimization report (spec §11)
 * on programs the passes were not written against.
 *
 * Programs: random kernels from tests/random/progen.c (seeds
 * TDSL_RANDOM_SEED .. +TDSL_RANDOM_COUNT, default 1 and 60: the knobs
 * test_random reads), every .tdsl file under tests/pytorch/cases,
 * examples/, tests/random/regress and tests/golden/passes that the front
 * end accepts, and three hand-written "unseen-style" kernels below.  Each
 * is checked in-process: parse and sema, the loop-form statistics at -O0
 * (lf_stats, as tdslc does before the passes), the pass pipeline at -O2
 * (pipeline_run, as tdslc -O2), the statistics again, and the JSON report
 * (report_write_json).  Properties, per kernel:
 *  (a) loop nests at -O2 <= at -O0;
 *  (b) bytes moved at -O2 <= at -O0, the symbolic counts evaluated at the
 *      sizes the program runs with (progen's, or 3, 4, 5 ... by symbol id
 *      for files, as test_random) and at other symbol values >= 2 that
 *      satisfy the kernel's entry checks;
 *  (c) the JSON is valid (a strict RFC 8259 parser below) and has exactly
 *      §11's fields with the right types (a choose-layout `layout`
 *      decision also exactly its estimates, chose and cost_model, as
 *      docs/report.md says); its totals are lf_stats';
 *  (d) every decision's line:col lies inside the source, on a token (not
 *      blank, not a comment), and is the location of an IR value the
 *      decision can be about: an implicit expand (fold-views broadcast), a
 *      view (fold), a copy or cast (eliminate-copies), a conv or pool
 *      (choose-layout), a reduction (row-group), the value itself (fuse,
 *      plan-memory reuse) or the kernel (plan-memory plan);
 *  (e) every computed value (not a parameter, constant table, view or
 *      0-dim scalar) gets exactly one fuse decision naming its op at its
 *      location, and scratch bytes at -O2 <= at -O0 (same evaluation).
 * The hand-written kernels also carry "# expect PASS:KIND" comments:
 * such a decision must appear on that line.
 *
 * A violation prints the program (the first few) and its violations; the
 * test prints a tally per property and fails if any.  Thousands locally:
 *   TDSL_RANDOM_COUNT=5000 TDSL_RANDOM_SEED=1000 CK_DEFAULT_TIMEOUT=0 \
 *       build/tests/test_report_props
 *
 * Needs: the front end, passes, loops/stats.c (lf_stats), progen.c. */
#include <check.h>
#include <ctype.h>
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loops/loops.h"
#include "frontend/ast.h"
#include "passes/passes.h"
#include "tests/random/progen.h"

/* ---- a strict JSON parser (RFC 8259) ------------------------------------- */

typedef enum JType { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } JType;

typedef struct JVal {
  JType t;
  bool b;
  double num;
  bool integral; /* a number without fraction or exponent */
  const char *s; /* J_STR: decoded, UTF-8 */
  int n;         /* J_ARR, J_OBJ: items */
  const char **key;
  struct JVal **item;
} JVal;

typedef struct JParse {
  const char *p;
  Arena *a;
  const char *err; /* first error, or NULL */
  int depth;
} JParse;

static JVal *j_fail(JParse *j, const char *why) {
  if (!j->err) j->err = arena_printf(j->a, "%s at \"%.20s\"", why, j->p);
  return NULL;
}

static void j_ws(JParse *j) {
  while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static JVal *j_new(JParse *j, JType t) {
  JVal *v = arena_alloc(j->a, sizeof *v);
  v->t = t;
  return v;
}

static int j_hex4(const char *p) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = p[i], d = isdigit(c) ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                   : c >= 'A' && c <= 'F'  ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Length of the well-formed UTF-8 sequence at p, 0 when malformed. */
static int j_utf8_len(const unsigned char *p) {
  int n = *p >= 0xF0 && *p <= 0xF4 ? 4 : *p >= 0xE0 ? 3 : *p >= 0xC2 ? 2 : 0;
  if (*p >= 0xF5) return 0;
  for (int i = 1; i < n; i++)
    if ((p[i] & 0xC0) != 0x80) return 0;
  return n;
}

static void j_put_utf8(char *out, size_t *o, unsigned cp) {
  if (cp < 0x80) out[(*o)++] = (char)cp;
  else if (cp < 0x800) out[(*o)++] = (char)(0xC0 | cp >> 6), out[(*o)++] = (char)(0x80 | (cp & 63));
  else if (cp < 0x10000) {
    out[(*o)++] = (char)(0xE0 | cp >> 12);
    out[(*o)++] = (char)(0x80 | (cp >> 6 & 63)), out[(*o)++] = (char)(0x80 | (cp & 63));
  } else {
    out[(*o)++] = (char)(0xF0 | cp >> 18), out[(*o)++] = (char)(0x80 | (cp >> 12 & 63));
    out[(*o)++] = (char)(0x80 | (cp >> 6 & 63)), out[(*o)++] = (char)(0x80 | (cp & 63));
  }
}

/* One escape after the backslash at j->p; appends its UTF-8. */
static bool j_escape(JParse *j, char *out, size_t *o) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *e = strchr(from, *j->p);
  if (*j->p && e) {
    out[(*o)++] = to[e - from];
    j->p++;
    return true;
  }
  if (*j->p != 'u') return j_fail(j, "bad escape"), false;
  int cp = j_hex4(j->p + 1);
  if (cp < 0) return j_fail(j, "bad \\u escape"), false;
  j->p += 5;
  if (cp >= 0xDC00 && cp < 0xE000) return j_fail(j, "lone low surrogate"), false;
  if (cp >= 0xD800 && cp < 0xDC00) {
    int lo = j->p[0] == '\\' && j->p[1] == 'u' ? j_hex4(j->p + 2) : -1;
    if (lo < 0xDC00 || lo >= 0xE000) return j_fail(j, "lone high surrogate"), false;
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    j->p += 6;
  }
  j_put_utf8(out, o, (unsigned)cp);
  return true;
}

static const char *j_string(JParse *j) {
  if (*j->p != '"') return j_fail(j, "expected a string"), NULL;
  j->p++;
  const char *end = j->p; /* the closing quote: escapes only shrink */
  while (*end && *end != '"') end += end[0] == '\\' && end[1] ? 2 : 1;
  char *out = arena_alloc(j->a, (size_t)(end - j->p) + 1);
  size_t o = 0;
  for (;;) {
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') break;
    if (c < 0x20) return j_fail(j, c ? "control character in a string" : "unterminated string"), NULL;
    if (c == '\\') {
      j->p++;
      if (!j_escape(j, out, &o)) return NULL;
      continue;
    }
    int n = c < 0x80 ? 1 : j_utf8_len((const unsigned char *)j->p);
    if (!n) return j_fail(j, "malformed UTF-8"), NULL;
    memcpy(out + o, j->p, (size_t)n);
    o += (size_t)n, j->p += n;
  }
  j->p++;
  out[o] = 0;
  return out;
}

static JVal *j_number(JParse *j) {
  const char *s = j->p;
  bool integral = true;
  if (*j->p == '-') j->p++;
  if (*j->p == '0') j->p++;
  else if (*j->p >= '1' && *j->p <= '9') while (isdigit((unsigned char)*j->p)) j->p++;
  else return j_fail(j, "bad number");
  if (*j->p == '.') {
    integral = false, j->p++;
    if (!isdigit((unsigned char)*j->p)) return j_fail(j, "bad fraction");
    while (isdigit((unsigned char)*j->p)) j->p++;
  }
  if (*j->p == 'e' || *j->p == 'E') {
    integral = false, j->p++;
    if (*j->p == '+' || *j->p == '-') j->p++;
    if (!isdigit((unsigned char)*j->p)) return j_fail(j, "bad exponent");
    while (isdigit((unsigned char)*j->p)) j->p++;
  }
  JVal *v = j_new(j, J_NUM);
  v->num = strtod(arena_printf(j->a, "%.*s", (int)(j->p - s), s), NULL);
  v->integral = integral;
  return v;
}

static JVal *j_value(JParse *j);

static void j_push(JParse *j, JVal *v, const char *key, JVal *item) {
  JVal **items = arena_alloc(j->a, sizeof *items * (size_t)(v->n + 1));
  const char **keys = arena_alloc(j->a, sizeof *keys * (size_t)(v->n + 1));
  if (v->n) {
    memcpy(items, v->item, sizeof *items * (size_t)v->n);
    memcpy(keys, v->key, sizeof *keys * (size_t)v->n);
  }
  v->item = items, v->key = keys;
  v->item[v->n] = item, v->key[v->n++] = key;
}

/* An array or object body after its opening bracket. */
static JVal *j_compound(JParse *j, bool obj) {
  JVal *v = j_new(j, obj ? J_OBJ : J_ARR);
  char close = obj ? '}' : ']';
  j_ws(j);
  if (*j->p == close) return j->p++, v;
  for (;;) {
    const char *key = NULL;
    j_ws(j);
    if (obj) {
      if (!(key = j_string(j))) return NULL;
      for (int i = 0; i < v->n; i++)
        if (!strcmp(v->key[i], key)) return j_fail(j, "duplicate key");
      j_ws(j);
      if (*j->p++ != ':') return j->p--, j_fail(j, "expected ':'");
    }
    JVal *item = j_value(j);
    if (!item) return NULL;
    j_push(j, v, key, item);
    j_ws(j);
    if (*j->p == close) return j->p++, v;
    if (*j->p++ != ',') return j->p--, j_fail(j, "expected ',' or a close bracket");
  }
}

static JVal *j_value(JParse *j) {
  if (++j->depth > 64) return j_fail(j, "nested too deeply");
  j_ws(j);
  JVal *v = NULL;
  if (*j->p == '{' || *j->p == '[') {
    bool obj = *j->p++ == '{';
    v = j_compound(j, obj);
  } else if (*j->p == '"') {
    const char *s = j_string(j);
    if (s) v = j_new(j, J_STR), v->s = s;
  } else if (!strncmp(j->p, "true", 4) || !strncmp(j->p, "false", 5)) {
    v = j_new(j, J_BOOL);
    v->b = *j->p == 't';
    j->p += v->b ? 4 : 5;
  } else if (!strncmp(j->p, "null", 4)) {
    v = j_new(j, J_NULL), j->p += 4;
  } else {
    v = j_number(j);
  }
  j->depth--;
  return v;
}

/* The whole text as one JSON value, or NULL with *err set. */
static JVal *json_parse(Arena *a, const char *text, const char **err) {
  JParse j = {.p = text, .a = a};
  JVal *v = j_value(&j);
  j_ws(&j);
  if (v && *j.p) v = j_fail(&j, "trailing text");
  *err = j.err;
  return v;
}

static JVal *jget(const JVal *o, const char *key) {
  for (int i = 0; o && o->t == J_OBJ && i < o->n; i++)
    if (!strcmp(o->key[i], key)) return o->item[i];
  return NULL;
}

/* Whether o is an object with exactly the keys of `keys` (NULL-ended). */
static bool j_keys(const JVal *o, const char *const *keys) {
  int n = 0;
  if (!o || o->t != J_OBJ) return false;
  for (; keys[n]; n++)
    if (!jget(o, keys[n])) return false;
  return o->n == n;
}

static bool j_int(const JVal *v) { return v && v->t == J_NUM && v->integral; }
static bool j_size(const JVal *v) { return j_int(v) || (v && v->t == J_STR && v->s[0]); }

/* ---- one program --------------------------------------------------------- */

enum Prop {
  P_FRONT, P_PIPE, P_NESTS, P_BYTES, P_SCRATCH, P_JSON, P_TOTALS,
  P_LOC, P_AT, P_FUSE, P_EXPECT, P_COUNT
};
static const char *const prop_name[P_COUNT] = {
    "front end rejects", "pipeline failed",
    "(a) loop nests -O2 > -O0", "(b) bytes moved -O2 > -O0", "(e) scratch -O2 > -O0",
    "(c) JSON invalid or fields wrong", "(c) JSON totals differ from lf_stats",
    "(d) decision outside the source", "(d) decision not at an op it can be about",
    "(e) computed value without exactly one fuse decision",
    "expected decision missing"};

typedef struct Tally {
  int programs, kernels, envs, bad_programs;
  int viol[P_COUNT];
} Tally;

/* What an IR value was before the passes (they rewrite the value list). */
typedef struct Snap {
  Op op;
  Loc loc;
  int flags, rank;
} Snap;

#define MAXENV 10

typedef struct KInfo {
  int nests0, nests2;
  const Sym *bytes0, *bytes2, *scratch0, *scratch2;
  Snap *pre;
  int npre;
  int nenv;
  int64_t *env[MAXENV];
} KInfo;

typedef struct Prog {
  const char *name, *text;
  const PgProgram *pg; /* run sizes, or NULL: symbols 3, 4, 5 ... by id */
  Arena *a;
  IrModule *m;
  KInfo *ki;
  const char **line; /* source lines, 1-based */
  int *len, nlines;
  FILE *log;         /* this program's violations */
  char *logbuf;
  size_t loglen;
  int nviol;
  Tally *t;
} Prog;

static void violate(Prog *p, enum Prop what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void violate(Prog *p, enum Prop what, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(p->log, "  [%s] ", prop_name[what]);
  vfprintf(p->log, fmt, ap);
  fputc('\n', p->log);
  va_end(ap);
  p->nviol++;
  p->t->viol[what]++;
}

static void split_lines(Prog *p) {
  int n = 1;
  for (const char *s = p->text; *s; s++) n += *s == '\n';
  p->line = arena_alloc(p->a, sizeof *p->line * (size_t)(n + 1));
  p->len = arena_alloc(p->a, sizeof *p->len * (size_t)(n + 1));
  const char *s = p->text;
  for (int i = 1; i <= n; i++) {
    const char *e = strchr(s, '\n');
    p->line[i] = s;
    p->len[i] = e ? (int)(e - s) : (int)strlen(s);
    p->nlines = i;
    if (!e) break;
    s = e + 1;
  }
}

static bool front_end(Prog *p) {
  FILE *sink = tmpfile();
  ck_assert_ptr_nonnull(sink);
  Diag d;
  diag_init(&d, p->name, p->text, sink);
  AstProgram *ast = parse_program(p->a, &d, p->text);
  p->m = ast ? sema_program(p->a, &d, ast, p->name) : NULL;
  fclose(sink);
  return p->m && d.nerrors == 0 && p->m->nkernels > 0;
}

/* ---- symbol environments ---- */

static int64_t eval_or(const Sym *s, const int64_t *env, int64_t dflt) {
  int64_t v;
  return sym_eval(s, env, &v) ? v : dflt;
}

/* Stride symbols: the row-major strides of their parameter. */
static void bind_strides(const IrKernel *k, int64_t *env) {
  for (int i = 0; i < k->nsyms; i++) {
    const IrSymVar *s = &k->syms[i];
    if (s->kind != SYMK_STRIDE) continue;
    const IrParam *q = &k->params[s->param];
    int64_t st = 1;
    for (int d = q->rank - 1; d > s->dim; d--) {
      int64_t n = eval_or(q->shape[d], env, 1);
      st *= n > 1 ? n : 1;
    }
    env[i] = st;
  }
}

static bool checks_hold(const IrKernel *k, const int64_t *env) {
  for (int i = 0; i < k->nchecks; i++) {
    const IrCheck *c = &k->checks[i];
    int64_t l, r;
    if (!sym_eval(c->lhs, env, &l) || !sym_eval(c->rhs, env, &r)) return false;
    if (c->op == CHK_EQ ? l != r : c->op == CHK_LE ? l > r : l >= r) return false;
  }
  return true;
}

/* Size symbol i at environment e: e 0 is the run sizes, then every
 * symbol 2, 3, 5, 16, then pseudo-random values in [2, 12]. */
static int64_t size_value(const Prog *p, const IrKernel *k, int i, int e) {
  static const int64_t uniform[] = {2, 3, 5, 16};
  const IrSymVar *s = &k->syms[i];
  if (e == 0 && p->pg) return p->pg->params[s->param].shape[s->dim];
  if (e == 0) return 3 + i;
  if (e <= 4) return uniform[e - 1];
  uint64_t h = (uint64_t)(e * 7919 + i * 104729) ^ (uint64_t)strlen(p->text) * 2654435761u;
  h ^= h >> 13, h *= 0x9E3779B97F4A7C15ull, h ^= h >> 29;
  return 2 + (int64_t)(h % 11);
}

static void make_envs(Prog *p, const IrKernel *k, KInfo *ki) {
  for (int e = 0; e < MAXENV; e++) {
    int64_t *env = arena_alloc(p->a, sizeof *env * (size_t)(k->nsyms + 1));
    for (int i = 0; i < k->nsyms; i++)
      if (k->syms[i].kind == SYMK_SIZE) env[i] = size_value(p, k, i, e);
    bind_strides(k, env);
    if (checks_hold(k, env)) ki->env[ki->nenv++] = env;
    if (k->nsyms == 0) break; /* one is enough */
  }
}

static void env_text(const IrKernel *k, const int64_t *env, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < k->nsyms && at < n; i++)
    at += (size_t)snprintf(buf + at, n - at, "%s%s=%lld", i ? " " : "", k->syms[i].name,
                           (long long)env[i]);
}

/* after <= before at every environment where both evaluate. */
static void compare_sizes(Prog *p, const IrKernel *k, const KInfo *ki, enum Prop what,
                          const Sym *before, const Sym *after) {
  for (int e = 0; e < ki->nenv; e++) {
    int64_t b, a;
    if (!sym_eval(before, ki->env[e], &b) || !sym_eval(after, ki->env[e], &a)) continue;
    p->t->envs++;
    if (a <= b) continue;
    char env[256];
    env_text(k, ki->env[e], env, sizeof env);
    violate(p, what, "kernel %s: %lld at -O2 > %lld at -O0 (at %s; -O0 %s, -O2 %s)", k->name,
            (long long)a, (long long)b, env[0] ? env : "no symbols",
            sym_str(p->a, before), sym_str(p->a, after));
    return;
  }
}

/* ---- the JSON report ---- */

/* The JSON text of a size as report.c writes it. */
static const char *size_json(Prog *p, const Sym *s) {
  int64_t v;
  if (sym_is_const(s, &v)) return arena_printf(p->a, "%lld", (long long)v);
  return sym_str(p->a, s);
}

static bool size_is(Prog *p, const JVal *v, const Sym *s) {
  if (v->t == J_STR) return !strcmp(v->s, size_json(p, s));
  return !strcmp(arena_printf(p->a, "%.0f", v->num), size_json(p, s));
}

static const char *const top_keys[] = {"file", "target", "kernels", NULL};
static const char *const kernel_keys[] = {"name", "decisions", "bytes_moved", "loop_nests",
                                          "scratch_bytes", "passes", NULL};
static const char *const dec_keys[] = {"pass", "kind", "line", "col", "message", "bytes", NULL};
static const char *const layout_keys[] = {"pass", "kind", "line", "col", "message", "bytes",
                                          "estimates", "chose", "cost_model", NULL};
static const char *const est_keys[] = {"channels_last", "nchw", NULL};
static const char *const bms_keys[] = {"bytes", "ms", NULL};
static const char *const row_keys[] = {"row", "source", "bw_gbs", "gflops", NULL};

/* The members a layout decision adds (docs/report.md); NULL or what is
 * wrong. */
static const char *layout_shape(const JVal *d) {
  const JVal *e = jget(d, "estimates"), *c = jget(d, "chose"), *m = jget(d, "cost_model");
  if (!j_keys(e, est_keys)) return "layout estimates";
  for (int i = 0; est_keys[i]; i++) {
    const JVal *v = jget(e, est_keys[i]);
    if (!j_keys(v, bms_keys) || jget(v, "bytes")->t != J_NUM || jget(v, "ms")->t != J_NUM ||
        jget(v, "ms")->num < 0 || jget(v, "bytes")->num < 0)
      return "layout estimate";
  }
  if (c->t != J_STR || (strcmp(c->s, "channels_last") && strcmp(c->s, "nchw")))
    return "layout chose";
  if (!j_keys(m, row_keys) || jget(m, "row")->t != J_STR || jget(m, "source")->t != J_STR ||
      jget(m, "bw_gbs")->t != J_NUM || jget(m, "gflops")->t != J_NUM)
    return "layout cost_model";
  return NULL;
}
static const char *const ba_keys[] = {"before", "after", NULL};
static const char *const time_keys[] = {"name", "ms", "changed", NULL};

/* Field names and types of one kernel object; NULL or what is wrong. */
static const char *kernel_shape(const JVal *kj) {
  if (!j_keys(kj, kernel_keys)) return "kernel keys";
  if (jget(kj, "name")->t != J_STR) return "name";
  const JVal *ds = jget(kj, "decisions"), *ps = jget(kj, "passes");
  const JVal *bm = jget(kj, "bytes_moved"), *ln = jget(kj, "loop_nests");
  if (ds->t != J_ARR || ps->t != J_ARR) return "decisions/passes not arrays";
  for (int i = 0; i < ds->n; i++) {
    const JVal *d = ds->item[i];
    const JVal *kind = jget(d, "kind");
    bool layout = kind && kind->t == J_STR && !strcmp(kind->s, "layout");
    if (!j_keys(d, layout ? layout_keys : dec_keys)) return "decision keys";
    const char *bad = layout ? layout_shape(d) : NULL;
    if (bad) return bad;
    if (jget(d, "pass")->t != J_STR || jget(d, "kind")->t != J_STR ||
        jget(d, "message")->t != J_STR || !jget(d, "message")->s[0])
      return "decision pass/kind/message";
    if (!j_int(jget(d, "line")) || !j_int(jget(d, "col")) || !j_size(jget(d, "bytes")))
      return "decision line/col/bytes";
  }
  if (!j_keys(bm, ba_keys) || !j_size(jget(bm, "before")) || !j_size(jget(bm, "after")))
    return "bytes_moved";
  if (!j_keys(ln, ba_keys) || !j_int(jget(ln, "before")) || !j_int(jget(ln, "after")))
    return "loop_nests";
  if (!j_size(jget(kj, "scratch_bytes"))) return "scratch_bytes";
  for (int i = 0; i < ps->n; i++) {
    const JVal *t = ps->item[i];
    if (!j_keys(t, time_keys) || jget(t, "name")->t != J_STR ||
        jget(t, "ms")->t != J_NUM || jget(t, "ms")->num < 0 || jget(t, "changed")->t != J_BOOL)
      return "passes entry";
  }
  return NULL;
}

/* The JSON's totals and pass list against lf_stats and the pass table. */
static void check_totals(Prog *p, const IrKernel *k, const KInfo *ki, const JVal *kj) {
  const JVal *bm = jget(kj, "bytes_moved"), *ln = jget(kj, "loop_nests");
  if (!size_is(p, jget(bm, "before"), ki->bytes0) || !size_is(p, jget(bm, "after"), ki->bytes2) ||
      jget(ln, "before")->num != ki->nests0 || jget(ln, "after")->num != ki->nests2 ||
      !size_is(p, jget(kj, "scratch_bytes"), ki->scratch2))
    violate(p, P_TOTALS, "kernel %s: JSON totals are not lf_stats' (bytes %s -> %s, nests "
            "%d -> %d, scratch %s)", k->name, size_json(p, ki->bytes0),
            size_json(p, ki->bytes2), ki->nests0, ki->nests2, size_json(p, ki->scratch2));
  const JVal *ps = jget(kj, "passes");
  bool same = ps->n == pass_count;
  for (int i = 0; same && i < ps->n; i++)
    same = !strcmp(jget(ps->item[i], "name")->s, pass_table[i].name);
  if (!same) violate(p, P_TOTALS, "kernel %s: \"passes\" is not the -O2 pipeline", k->name);
}

/* ---- decision locations ---- */

static bool is_computed(const IrValue *v) {
  return v->op != OP_PARAM && v->op != OP_TENSOR && op_kind(v->op) != IRK_VIEW &&
         v->rank > 0;
}

/* Whether a value of this op/flags is what decision (pass, kind) is about. */
static bool about(const char *pass, const char *kind, Op op, int flags) {
  OpKind kd = op_kind(op);
  if (!strcmp(pass, "fold-views") && !strcmp(kind, "broadcast"))
    return op == OP_EXPAND && (flags & IRF_IMPLICIT);
  if (!strcmp(pass, "fold-views")) return kd == IRK_VIEW;
  if (!strcmp(pass, "eliminate-copies")) return op == OP_COPY || op == OP_CAST;
  if (!strcmp(pass, "choose-layout")) return kd == IRK_CONV || kd == IRK_POOL;
  if (!strcmp(pass, "row-group")) return kd == IRK_REDUCE; /* the group's seed */
  if (!strcmp(pass, "codegen")) return kd == IRK_MATMUL || kd == IRK_CONV; /* isa-variant */
  return false;
}

/* Line and col inside the source, on a token before any comment. */
static bool in_source(const Prog *p, int line, int col) {
  if (line < 1 || line > p->nlines || col < 1 || col > p->len[line]) return false;
  const char *l = p->line[line];
  const char *hash = memchr(l, '#', (size_t)p->len[line]);
  if (hash && hash - l < col - 1) return false;
  return !isspace((unsigned char)l[col - 1]);
}

/* The op a fuse decision names: its message's first word, up to "(". */
static const char *named_op(Prog *p, const char *msg) {
  size_t n = strcspn(msg, "( ");
  return arena_printf(p->a, "%.*s", (int)n, msg);
}

static bool loc_at(Loc l, int line, int col) { return l.line == line && l.col == col; }

/* (d) for one decision of kernel k. */
static void check_location(Prog *p, const IrKernel *k, const KInfo *ki, const JVal *d) {
  const char *pass = jget(d, "pass")->s, *kind = jget(d, "kind")->s;
  int line = (int)jget(d, "line")->num, col = (int)jget(d, "col")->num;
  if (!in_source(p, line, col)) {
    violate(p, P_LOC, "kernel %s: %s %s at %d:%d is not on a token of the source", k->name,
            pass, kind, line, col);
    return;
  }
  bool ok = false;
  if (!strcmp(pass, "fuse")) {
    const char *op = named_op(p, jget(d, "message")->s);
    for (IrRef r = 0; r < k->nvalues && !ok; r++)
      ok = is_computed(ir_val(k, r)) && loc_at(ir_val(k, r)->loc, line, col) &&
           !strcmp(op_name(ir_val(k, r)->op), op);
  } else if (!strcmp(pass, "plan-memory") && !strcmp(kind, "plan")) {
    ok = loc_at(k->loc, line, col);
  } else if (!strcmp(pass, "plan-memory")) { /* reuse, in-place: any computed value */
    for (IrRef r = 0; r < k->nvalues && !ok; r++)
      ok = ir_val(k, r)->op != OP_PARAM && op_kind(ir_val(k, r)->op) != IRK_VIEW &&
           loc_at(ir_val(k, r)->loc, line, col);
  } else {
    for (int i = 0; i < ki->npre && !ok; i++)
      ok = loc_at(ki->pre[i].loc, line, col) &&
           about(pass, kind, ki->pre[i].op, ki->pre[i].flags);
    for (IrRef r = 0; r < k->nvalues && !ok; r++)
      ok = loc_at(ir_val(k, r)->loc, line, col) &&
           about(pass, kind, ir_val(k, r)->op, ir_val(k, r)->flags);
  }
  if (!ok)
    violate(p, P_AT, "kernel %s: %s %s at %d:%d (\"%.120s\") names no value of its kind "
            "there", k->name, pass, kind, line, col, jget(d, "message")->s);
}

/* The value a fuse decision is about, as op name and location: the op
 * its message starts with at the decision's location, except for an
 * "epilogue" decision (reported at the elementwise reader E), which is
 * about the GEMM its message names ("... in the epilogue of the conv2d at
 * 3:7 ..."). */
static bool fuse_subject(Prog *p, const JVal *d, const char **op, int *line, int *col) {
  const char *msg = jget(d, "message")->s;
  *op = named_op(p, msg);
  *line = (int)jget(d, "line")->num, *col = (int)jget(d, "col")->num;
  if (strcmp(jget(d, "kind")->s, "epilogue")) return true;
  const char *at = strstr(msg, "epilogue of the ");
  char name[32];
  if (!at || sscanf(at, "epilogue of the %31s at %d:%d", name, line, col) != 3) return false;
  *op = arena_strdup(p->a, name);
  return true;
}

/* (e): fuse decisions about v's op at v's location, per computed value
 * (values sharing both are counted together). */
static void check_fuse_cover(Prog *p, const IrKernel *k, const JVal *ds) {
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    if (!is_computed(v)) continue;
    int nv = 0, nd = 0, first = -1;
    for (IrRef s = 0; s < k->nvalues; s++) {
      const IrValue *w = ir_val(k, s);
      if (is_computed(w) && w->op == v->op && loc_at(w->loc, v->loc.line, v->loc.col)) {
        nv++;
        if (first < 0) first = s;
      }
    }
    if (first != r) continue; /* counted with the first */
    for (int i = 0; i < ds->n; i++) {
      const char *op;
      int line, col;
      if (strcmp(jget(ds->item[i], "pass")->s, "fuse")) continue;
      if (!fuse_subject(p, ds->item[i], &op, &line, &col)) {
        violate(p, P_FUSE, "kernel %s: an epilogue decision names no GEMM (\"%.100s\")",
                k->name, jget(ds->item[i], "message")->s);
        continue;
      }
      nd += loc_at(v->loc, line, col) && !strcmp(op, op_name(v->op));
    }
    if (nd != nv)
      violate(p, P_FUSE, "kernel %s: %d %s value%s at %d:%d, %d fuse decision%s", k->name, nv,
              op_name(v->op), nv == 1 ? "" : "s", v->loc.line, v->loc.col, nd,
              nd == 1 ? "" : "s");
  }
}

/* ---- "# expect PASS:KIND" annotations ---- */

static bool has_decision(const JVal *ds, const char *pass, const char *kind, int line) {
  for (int i = 0; i < ds->n; i++) {
    const JVal *d = ds->item[i];
    if (!strcmp(jget(d, "pass")->s, pass) && (int)jget(d, "line")->num == line &&
        (!strcmp(kind, "*") || !strcmp(jget(d, "kind")->s, kind)))
      return true;
  }
  return false;
}

/* Every "# expect PASS:KIND ..." comment of the source: such a decision
 * (KIND "*": any) on its line among ds, one kernel's decisions (files
 * with annotations hold a single kernel). */
static void check_expectations(Prog *p, const JVal *ds) {
  for (int l = 1; l <= p->nlines; l++) {
    const char *s = p->line[l], *e = s + p->len[l];
    const char *at = memchr(s, '#', (size_t)p->len[l]);
    if (!at || strncmp(at, "# expect ", 9)) continue;
    for (at += 9; at < e;) {
      size_t n = strcspn(at, " \n");
      char *tok = arena_printf(p->a, "%.*s", (int)n, at), *colon = strchr(tok, ':');
      at += n + 1;
      if (!n) continue;
      ck_assert_msg(colon != NULL, "bad expectation %s in %s", tok, p->name);
      *colon = 0;
      if (!has_decision(ds, tok, colon + 1, l))
        violate(p, P_EXPECT, "no %s:%s decision on line %d", tok, colon + 1, l);
    }
  }
}

/* ---- driving ---- */

static void snapshot(Prog *p, const IrKernel *k, KInfo *ki) {
  ki->npre = k->nvalues;
  ki->pre = arena_alloc(p->a, sizeof *ki->pre * (size_t)(k->nvalues + 1));
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    ki->pre[r] = (Snap){.op = v->op, .loc = v->loc, .flags = v->flags, .rank = v->rank};
  }
}

/* Parse, -O0 statistics, pipeline, -O2 statistics; false when the
 * program is not one to check (front end) or the compiler failed. */
static bool compile(Prog *p, Report *r) {
  if (!front_end(p)) return false;
  IrModule *m = p->m;
  p->ki = arena_alloc(p->a, sizeof *p->ki * (size_t)m->nkernels);
  for (int i = 0; i < m->nkernels; i++) {
    KInfo *ki = &p->ki[i];
    snapshot(p, m->kernels[i], ki);
    make_envs(p, m->kernels[i], ki);
    lf_stats(m, m->kernels[i], 0, &ki->nests0, &ki->bytes0, &ki->scratch0);
  }
  PassOptions o = {.opt_level = 2, .target = "host"};
  if (pipeline_run(m, &o, r)) {
    violate(p, P_PIPE, "pipeline_run failed");
    return false;
  }
  for (int i = 0; i < m->nkernels; i++) {
    KInfo *ki = &p->ki[i];
    lf_stats(m, m->kernels[i], 2, &ki->nests2, &ki->bytes2, &ki->scratch2);
    report_set_totals(r, m->kernels[i], ki->bytes0, ki->bytes2, ki->nests0, ki->nests2,
                      ki->scratch2);
  }
  return true;
}

static void check_kernel(Prog *p, int i, const JVal *kj) {
  const IrKernel *k = p->m->kernels[i];
  const KInfo *ki = &p->ki[i];
  p->t->kernels++;
  const char *bad = kernel_shape(kj);
  if (bad) {
    violate(p, P_JSON, "kernel %s: %s", k->name, bad);
    return;
  }
  if (strcmp(jget(kj, "name")->s, k->name)) violate(p, P_JSON, "kernel %d is not %s", i, k->name);
  check_totals(p, k, ki, kj);
  if (ki->nests2 > ki->nests0)
    violate(p, P_NESTS, "kernel %s: %d loop nests at -O2, %d at -O0", k->name, ki->nests2,
            ki->nests0);
  compare_sizes(p, k, ki, P_BYTES, ki->bytes0, ki->bytes2);
  compare_sizes(p, k, ki, P_SCRATCH, ki->scratch0, ki->scratch2);
  const JVal *ds = jget(kj, "decisions");
  for (int j = 0; j < ds->n; j++) check_location(p, k, ki, ds->item[j]);
  check_fuse_cover(p, k, ds);
}

static void check_report(Prog *p, const Report *r) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  ck_assert_ptr_nonnull(f);
  report_write_json(r, f);
  fclose(f);
  const char *err;
  JVal *top = json_parse(p->a, buf, &err);
  free(buf);
  if (!top) {
    violate(p, P_JSON, "not valid JSON: %s", err);
    return;
  }
  const JVal *ks = jget(top, "kernels");
  if (!j_keys(top, top_keys) || jget(top, "file")->t != J_STR ||
      jget(top, "target")->t != J_STR || ks->t != J_ARR || ks->n != p->m->nkernels) {
    violate(p, P_JSON, "top-level fields or kernel count wrong");
    return;
  }
  for (int i = 0; i < ks->n; i++) {
    check_kernel(p, i, ks->item[i]);
    if (!kernel_shape(ks->item[i])) check_expectations(p, jget(ks->item[i], "decisions"));
  }
}

static int g_shown; /* failing programs printed so far */

/* Checks one program; returns its number of violations.  Front-end
 * rejections count as P_FRONT only when `must_parse`. */
static int check_program(Tally *t, const char *name, const char *text, const PgProgram *pg,
                         bool must_parse) {
  Prog p = {.name = name, .text = text, .pg = pg, .a = arena_new(), .t = t};
  p.log = open_memstream(&p.logbuf, &p.loglen);
  ck_assert_ptr_nonnull(p.log);
  split_lines(&p);
  Report *r = report_new(p.a, name, "host");
  if (compile(&p, r)) {
    t->programs++;
    check_report(&p, r);
  } else if (!p.nviol && must_parse) {
    violate(&p, P_FRONT, "the front end rejects it");
  }
  fclose(p.log);
  if (p.nviol) {
    t->bad_programs++;
    if (g_shown++ < 12)
      fprintf(stderr, "FAIL %s:\n%s--- program ---\n%s---------------\n", name, p.logbuf, text);
    else
      fprintf(stderr, "FAIL %s:\n%s", name, p.logbuf);
  }
  free(p.logbuf);
  arena_free(p.a);
  return p.nviol;
}

static void print_tally(const char *what, const Tally *t) {
  fprintf(stderr, "%s: %d programs, %d kernels, %d size evaluations; %d programs with "
          "violations\n", what, t->programs, t->kernels, t->envs, t->bad_programs);
  for (int i = 0; i < P_COUNT; i++)
    if (t->viol[i]) fprintf(stderr, "  %5d  %s\n", t->viol[i], prop_name[i]);
}

static long env_long(const char *name, long dflt) {
  const char *s = getenv(name);
  return s && *s ? strtol(s, NULL, 10) : dflt;
}

/* ---- hand-written kernels in the style of users' programs ---- */

/* A pre-norm transformer block over T tokens, 4 heads of 16. */
static const char TRANSFORMER[] =
    "kernel block(x: f32[T, 64], g1: f32[64], b1: f32[64], wqkv: f32[192, 64],\n"
    "             wo: f32[64, 64], g2: f32[64], b2: f32[64], w1: f32[256, 64], c1: f32[256],\n"
    "             w2: f32[64, 256], c2: f32[64]) -> f32[T, 64] {\n"
    "  h = layer_norm(x, [64], g1, b1)                  # expect fuse:*\n"
    "  qkv = (h @ wqkv.T).view(T, 3, 4, 16)             # expect fuse:materialized\n"
    "  q = qkv[:, 0].transpose(0, 1)                    # expect fold-views:fold\n"
    "  k = qkv[:, 1].permute(1, 2, 0)                   # expect fold-views:fold\n"
    "  v = qkv[:, 2].transpose(0, 1)\n"
    "  p = softmax(q @ k * 0.25, dim=-1)                # expect fuse:materialized\n"
    "  a = (p @ v).transpose(0, 1).contiguous().view(T, 64)  # expect eliminate-copies:kept\n"
    "  r = x + a @ wo.T\n"
    "  f = gelu(layer_norm(r, [64], g2, b2) @ w1.T + c1)  # expect fold-views:broadcast fuse:fused\n"
    "  return r + (f @ w2.T + c2)\n"
    "}\n";

/* conv + folded batch norm + relu, channels_last, with a residual 1x1. */
static const char CONV_BN_RELU[] =
    "kernel cbr(x: f32[N, 16, H, W] channels_last, w: f32[32, 16, 3, 3] channels_last,\n"
    "           scale: f32[32], shift: f32[32], wp: f32[32, 16, 1, 1]) -> f32[N, 32, H, W] channels_last {\n"
    "  y = conv2d(x, w, padding=1)                        # expect choose-layout:layout\n"
    "  z = y * scale.view(32, 1, 1) + shift[:, None, None]  # expect fold-views:broadcast fuse:fused\n"
    "  s = conv2d(x, wp)                                  # expect fuse:*\n"
    "  o = relu(z + s).contiguous()                       # expect eliminate-copies:removed\n"
    "  return o\n"
    "}\n";

/* u8 RGBA frames: drop alpha, normalize, per-channel statistics. */
static const char PREPROCESS_REDUCE[] =
    "kernel prep(frames: u8[N, H, W, 4], lo: f32[3], inv: f32[3]) -> (f32[N, 3], f32[N, 3], i64[N], f32[N, 3, H, W]) {\n"
    "  rgb = frames[:, :, :, 0:3].permute(0, 3, 1, 2)     # expect fold-views:fold\n"
    "  x = (rgb.to(f32) / 255.0 - lo.view(3, 1, 1)) * inv[:, None, None]  # expect fold-views:broadcast fuse:*\n"
    "  m = x.mean(3).mean(2)\n"
    "  mx = x.amax(3).amax(2)\n"
    "  bright = x.sum(1).flatten(1).argmax(1)\n"
    "  return m, mx, bright, x.clone()                    # expect eliminate-copies:removed\n"
    "}\n";

static const char *const hand[] = {TRANSFORMER, CONV_BN_RELU, PREPROCESS_REDUCE};
static const char *const hand_name[] = {"transformer.tdsl", "conv_bn_relu.tdsl",
                                        "preprocess_reduce.tdsl"};

START_TEST(hand_written_kernels) {
  Tally t = {0};
  for (int i = 0; i < 3; i++) check_program(&t, hand_name[i], hand[i], NULL, true);
  print_tally("hand-written kernels", &t);
  ck_assert_int_eq(t.programs, 3);
  ck_assert_int_eq(t.bad_programs, 0);
}
END_TEST

/* Between them the annotations name all four decision-making passes. */
START_TEST(hand_written_cover_passes) {
  static const char *const four[] = {"fold-views", "eliminate-copies", "choose-layout", "fuse"};
  for (int i = 0; i < 4; i++) {
    char want[32];
    snprintf(want, sizeof want, "%s:", four[i]);
    bool found = false;
    for (int j = 0; j < 3; j++) found |= strstr(hand[j], want) != NULL;
    ck_assert_msg(found, "no hand-written kernel expects a %s decision", four[i]);
  }
  /* conv_bn_relu alone expects all four */
  for (int i = 0; i < 4; i++) ck_assert(strstr(CONV_BN_RELU, four[i]) != NULL);
}
END_TEST

START_TEST(random_programs) {
  long n = env_long("TDSL_RANDOM_COUNT", 60), first = env_long("TDSL_RANDOM_SEED", 1);
  static PgProgram pg;
  Tally t = {0};
  for (long s = first; s < first + n; s++) {
    progen_generate((uint64_t)s, &pg);
    char name[32];
    snprintf(name, sizeof name, "seed %ld", s);
    check_program(&t, name, pg.text, &pg, true);
  }
  char what[64];
  snprintf(what, sizeof what, "random programs (seeds %ld..%ld)", first, first + n - 1);
  print_tally(what, &t);
  ck_assert_int_eq(t.bad_programs, 0);
  ck_assert_int_ge(t.programs, n);
}
END_TEST

static const char *const dirs[] = {"tests/pytorch/cases", "examples", "tests/random/regress",
                                   "tests/golden/passes"};

START_TEST(program_files) {
  Tally t = {0};
  int files = 0;
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char dir[512], path[1024];
    snprintf(dir, sizeof dir, "%s/%s", TDSL_SOURCE_DIR, dirs[i]);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t len = strlen(e->d_name);
      if (len < 6 || strcmp(e->d_name + len - 5, ".tdsl")) continue;
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      FILE *f = fopen(path, "rb");
      ck_assert_ptr_nonnull(f);
      char *text = calloc(1, 1 << 20);
      size_t got = fread(text, 1, (1 << 20) - 1, f);
      text[got] = 0;
      fclose(f);
      files++;
      /* err_* cases are programs PyTorch rejects: the front end must too */
      check_program(&t, path, text, NULL, strncmp(e->d_name, "err_", 4) != 0);
      free(text);
    }
    closedir(d);
  }
  char what[64];
  snprintf(what, sizeof what, "program files (%d)", files);
  print_tally(what, &t);
  ck_assert_int_eq(t.bad_programs, 0);
  ck_assert_int_ge(t.programs, 15);
}
END_TEST

int main(void) {
  Suite *s = suite_create("report_props");
  TCase *tc = tcase_create("props");
  long n = env_long("TDSL_RANDOM_COUNT", 60);
  tcase_set_timeout(tc, (double)(60 + n / 10));
  tcase_add_test(tc, hand_written_kernels);
  tcase_add_test(tc, hand_written_cover_passes);
  tcase_add_test(tc, program_files);
  tcase_add_test(tc, random_programs);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int nf = srunner_ntests_failed(r);
  srunner_free(r);
  return nf ? EXIT_FAILURE : EXIT_SUCCESS;
}
