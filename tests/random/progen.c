/* progen.c — random tdsl programs, valid by construction (see progen.h).
 *
 * A program is built one statement at a time.  Each statement generator
 * picks operands among the values so far (parameters and earlier
 * statements), checks the static rules PyTorch would apply (broadcasting
 * over symbolic dims, dtype categories, view legality) against the facts
 * tracked in Val, and either renders an expression with its result Val or
 * declines.  Dims are monomials c * N^a * C^b ... over the size symbols, so
 * that shape equality is exactly what sema can prove symbolically.
 *
 * Hazards avoided on purpose (spec differences or ill-conditioned
 * comparisons, not bugs): float->int casts out of range, integer division
 * by zero, negative integer powers, log/sqrt of negatives, f16 overflow,
 * and discontinuous ops (comparisons, floor, //, casts to int, argmax) on
 * values that are not bit-exact. */
#include "progen.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define NSYM 4
#define MAXV 48

typedef struct Dim {
  int64_t c;
  int8_t e[NSYM]; /* exponent of each size symbol */
} Dim;

typedef struct Val {
  char name[8];
  DType dt;
  int rank;
  Dim d[PG_MAXR];
  bool contig; /* semantic strides row-major */
  bool exact;  /* bit-exact in every implementation */
  bool scalar; /* a scalar parameter (passed by value) */
  double mag;  /* bound on |element| */
  int prec;    /* lowest float precision its rounding errors come from (prec_of) */
} Val;

typedef struct Gen {
  uint64_t s;
  int64_t symval[NSYM];
  Val v[MAXV];
  int nv, nstmt;
  char body[12000];
  size_t blen;
  PgProgram *p;
  bool reduce, pending_reduce;
} Gen;

static const char *const SYMS[NSYM] = {"N", "C", "H", "W"};

/* ---- random numbers ------------------------------------------------------- */

static uint64_t rnext(Gen *g) {
  g->s ^= g->s << 13, g->s ^= g->s >> 7, g->s ^= g->s << 17;
  return g->s;
}
static int rint_(Gen *g, int lo, int hi) { /* inclusive */
  return lo + (int)(rnext(g) % (uint64_t)(hi - lo + 1));
}
static double runi(Gen *g) { return (double)(rnext(g) >> 11) / 9007199254740992.0; }
static bool coin(Gen *g, double p) { return runi(g) < p; }

/* ---- dims ----------------------------------------------------------------- */

static Dim lit(int64_t c) {
  Dim d = {c, {0}};
  return d;
}
static bool is_lit(Dim d) {
  for (int i = 0; i < NSYM; i++)
    if (d.e[i]) return false;
  return true;
}
static bool is_one(Dim d) { return is_lit(d) && d.c == 1; }
static bool dim_eq(Dim a, Dim b) { return !memcmp(&a, &b, sizeof a); }
static Dim dim_mul(Dim a, Dim b) {
  Dim r = {a.c * b.c, {0}};
  for (int i = 0; i < NSYM; i++) r.e[i] = (int8_t)(a.e[i] + b.e[i]);
  return r;
}
static int64_t dim_val(const Gen *g, Dim d) {
  int64_t v = d.c;
  for (int i = 0; i < NSYM; i++)
    for (int k = 0; k < d.e[i]; k++) v *= g->symval[i];
  return v;
}
static void dim_str(Dim d, char *buf, size_t n) {
  size_t at = 0;
  if (d.c != 1 || is_lit(d)) at += (size_t)snprintf(buf, n, "%lld", (long long)d.c);
  for (int i = 0; i < NSYM; i++)
    for (int k = 0; k < d.e[i]; k++)
      at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? " * " : "", SYMS[i]);
}
static int64_t numel(const Gen *g, const Val *v) {
  int64_t n = 1;
  for (int i = 0; i < v->rank; i++) n *= dim_val(g, v->d[i]);
  return n;
}
/* "d0, d1, ..." of dims */
static void dims_str(const Dim *d, int rank, char *buf, size_t n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < rank && at < n; i++) {
    char t[64];
    dim_str(d[i], t, sizeof t);
    at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", t);
  }
}

/* ---- values and text ------------------------------------------------------ */

static void emit(Gen *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(Gen *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(g->body + g->blen, sizeof g->body - g->blen, fmt, ap);
  va_end(ap);
  if (k > 0) g->blen += (size_t)k;
  if (g->blen >= sizeof g->body) g->blen = sizeof g->body - 1;
}

static bool is_float(DType d) { return dtype_is_float(d); }
static bool is_half(DType d) { return d == DT_F16 || d == DT_BF16; }
static double cap(DType d) {
  if (is_half(d)) return 1e4;
  if (d == DT_F32) return 1e30;
  if (d == DT_F64) return 1e200;
  return 1e300; /* integers wrap, which is exact */
}

/* Precision classes: 0 half, 1 f32, 2 f64, 3 no rounding (integers). */
static int prec_of(DType d) {
  return is_half(d) ? 0 : d == DT_F32 ? 1 : d == DT_F64 ? 2 : 3;
}

/* A computed value's precision: its own dtype's, or lower when a non-exact
 * operand named in expression e carries f16/f32 rounding errors (an f32
 * result widened to f64 is only as accurate as f32). */
static int expr_prec(const Gen *g, const char *e, DType dt) {
  int p = prec_of(dt);
  for (const char *c = e; *c; c++) {
    if ((*c != 'v' && *c != 'p') || (c > e && (c[-1] == '_' || isalnum((unsigned char)c[-1]))))
      continue;
    int len = 1;
    while (isdigit((unsigned char)c[len])) len++;
    if (len == 1 || isalnum((unsigned char)c[len]) || c[len] == '_') continue;
    for (int i = 0; i < g->nv; i++)
      if ((int)strlen(g->v[i].name) == len && !strncmp(g->v[i].name, c, (size_t)len) &&
          !g->v[i].exact && g->v[i].prec < p)
        p = g->v[i].prec;
  }
  return p;
}

static Val *pick(Gen *g, bool (*ok)(const Gen *, const Val *)) {
  int c[MAXV], n = 0;
  for (int i = 0; i < g->nv; i++)
    if (!ok || ok(g, &g->v[i])) c[n++] = i;
  if (!n) return NULL;
  /* favour recent values: chains and values with several users */
  int k = coin(g, 0.6) ? n - 1 - rint_(g, 0, n < 3 ? n - 1 : 2) : rint_(g, 0, n - 1);
  return &g->v[c[k]];
}

static const DType ALL[] = {DT_BOOL, DT_I8, DT_U8, DT_I16, DT_I32,
                            DT_I64,  DT_F16, DT_BF16, DT_F32, DT_F64};
static DType any_dtype(Gen *g) {
  if (coin(g, 0.4)) return coin(g, 0.7) ? DT_F32 : DT_F64;
  return ALL[rint_(g, 0, 9)];
}
/* A new tensor parameter; returns its Val (also an operand). */
static Val *new_param(Gen *g, DType dt, int rank, const Dim *d, Layout lay) {
  PgProgram *p = g->p;
  if (p->nparams >= PG_MAXP || g->nv >= MAXV) return NULL;
  for (int i = 0; i < rank; i++) { /* parameter dims: literals or single symbols */
    int syms = 0;
    for (int k = 0; k < NSYM; k++) syms += d[i].e[k];
    if (syms > 1 || (syms == 1 && d[i].c != 1)) return NULL;
  }
  PgParam *q = &p->params[p->nparams];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "p%d", p->nparams);
  q->dtype = dt, q->is_tensor = true, q->rank = rank, q->layout = lay;
  for (int i = 0; i < rank; i++) q->shape[i] = dim_val(g, d[i]);
  p->nparams++;
  Val *v = &g->v[g->nv++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s", q->name);
  v->dt = dt, v->rank = rank;
  memcpy(v->d, d, sizeof(Dim) * (size_t)rank);
  v->contig = lay == LAYOUT_CONTIGUOUS;
  v->exact = true, v->prec = prec_of(dt);
  v->mag = dt == DT_U8 ? 255 : dtype_is_int(dt) ? 100 : 2;
  return v;
}

static Val *new_scalar(Gen *g) {
  static const DType sd[] = {DT_F32, DT_F64, DT_I32, DT_I64, DT_BOOL};
  PgProgram *p = g->p;
  PgParam *q = &p->params[p->nparams];
  memset(q, 0, sizeof *q);
  snprintf(q->name, sizeof q->name, "p%d", p->nparams);
  q->dtype = sd[rint_(g, 0, 4)];
  if (is_float(q->dtype)) q->value.f = rint_(g, -200, 200) / 100.0;
  else if (q->dtype == DT_BOOL) q->value.i = rint_(g, 0, 1);
  else q->value.i = rint_(g, 1, 4);
  p->nparams++;
  Val *v = &g->v[g->nv++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s", q->name);
  v->dt = q->dtype, v->contig = true, v->exact = true, v->scalar = true;
  v->prec = prec_of(v->dt);
  v->mag = 4;
  return v;
}

/* Whether a parameter binds size symbol s. */
static bool sym_bound(const Gen *g, int s) {
  for (int i = 0; i < g->nv; i++)
    if (g->v[i].name[0] == 'p')
      for (int k = 0; k < g->v[i].rank; k++)
        if (g->v[i].d[k].e[s]) return true;
  return false;
}

/* A random dim; bind: it is a new parameter's, so it may bind a symbol. */
static Dim rand_dim(Gen *g, bool bind) {
  if (coin(g, 0.3)) {
    int s = rint_(g, 0, NSYM - 1);
    if (sym_bound(g, s) || (bind && coin(g, 0.5))) {
      Dim d = lit(1);
      d.e[s] = 1;
      return d;
    }
  }
  static const int sizes[] = {1, 2, 3, 4, 5, 2, 3, 4, 7, 8, 16, 17, 33};
  return lit(sizes[coin(g, 0.8) ? rint_(g, 0, 7) : rint_(g, 8, 12)]);
}

static void make_params(Gen *g) {
  /* symbols are 3..6, sometimes 1 (size-1 dims whose strides go unchecked) */
  for (int i = 0; i < NSYM; i++) g->symval[i] = coin(g, 0.15) ? 1 : rint_(g, 3, 6);
  int n = rint_(g, 1, 3);
  for (int i = 0; i < n; i++) {
    if (coin(g, 0.12) && i) {
      new_scalar(g);
      continue;
    }
    int rank = rint_(g, 0, 4);
    if (coin(g, 0.2)) rank = 4;
    Dim d[PG_MAXR];
    int64_t ne = 1;
    for (int k = 0; k < rank; k++) d[k] = rand_dim(g, true), ne *= dim_val(g, d[k]);
    if (ne > 2000) rank = 2, d[0] = lit(3), d[1] = lit(4);
    Layout lay = LAYOUT_CONTIGUOUS;
    if (rank == 4 && coin(g, 0.4)) lay = LAYOUT_CHANNELS_LAST;
    else if (rank >= 1 && coin(g, 0.25)) lay = LAYOUT_STRIDED;
    new_param(g, any_dtype(g), rank, d, lay);
  }
}

/* ---- promotion (PyTorch's result_type) ------------------------------------ */

typedef struct Opnd {
  char s[96];
  DType dt;
  int kind;  /* 0 wrapped number, 1 zero-dim tensor, 2 tensor of rank >= 1 */
  int rank;
  Dim d[PG_MAXR];
  bool exact;
  bool contig; /* kind 2: its semantic strides are row-major */
  double mag;
} Opnd;

static void opnd_of(Opnd *o, const Val *v) {
  memset(o, 0, sizeof *o);
  snprintf(o->s, sizeof o->s, "%s", v->name);
  o->dt = v->dt, o->kind = v->rank ? 2 : 1, o->rank = v->rank;
  memcpy(o->d, v->d, sizeof o->d);
  o->exact = v->exact, o->mag = v->mag, o->contig = v->contig;
}

static void opnd_num(Opnd *o, const char *s, DType dt, double mag) {
  memset(o, 0, sizeof *o);
  snprintf(o->s, sizeof o->s, "%s", s);
  o->dt = dt, o->kind = 0, o->exact = true, o->mag = mag;
}

static DType cat_combine(DType hi, DType lo) {
  if (hi == DT_NONE) return lo;
  if (lo == DT_NONE) return hi;
  if (is_float(hi)) return hi;
  if (hi == DT_BOOL || is_float(lo)) return dtype_promote(hi, lo);
  return hi;
}

static DType result_type(const Opnd *o, int n) {
  DType r[3] = {DT_NONE, DT_NONE, DT_NONE};
  for (int i = 0; i < n; i++) {
    DType d = o[i].dt;
    if (o[i].kind == 0 && is_float(d)) d = DT_F32;
    int k = o[i].kind;
    r[k] = r[k] == DT_NONE ? d : dtype_promote(r[k], d);
  }
  return cat_combine(r[2], cat_combine(r[1], r[0]));
}

/* Broadcasts b's shape into (rank, d); false when incompatible. */
static bool bcast(int *rank, Dim *d, int rb, const Dim *db) {
  int r = *rank > rb ? *rank : rb;
  Dim out[PG_MAXR];
  for (int i = 0; i < r; i++) {
    int ia = i - (r - *rank), ib = i - (r - rb);
    Dim x = ia >= 0 ? d[ia] : lit(1), y = ib >= 0 ? db[ib] : lit(1);
    if (dim_eq(x, y) || is_one(y)) out[i] = x;
    else if (is_one(x)) out[i] = y;
    else return false;
  }
  *rank = r;
  memcpy(d, out, sizeof(Dim) * (size_t)r);
  return true;
}

/* ---- statement generators --------------------------------------------------
 * Each fills r (dt, rank, d, contig, exact, mag) and writes the expression
 * into e; returns false to decline. */

typedef struct Stmt {
  Val r;
  char e[512];
} Stmt;

static bool any_tensor(const Gen *g, const Val *v) { (void)g; return !v->scalar; }
static bool ranked(const Gen *g, const Val *v) { (void)g; return !v->scalar && v->rank > 0; }
static bool float_val(const Gen *g, const Val *v) { return ranked(g, v) && is_float(v->dt); }

static void set_like(Val *r, const Val *a) {
  r->dt = a->dt, r->rank = a->rank, r->contig = a->contig, r->exact = a->exact;
  r->mag = a->mag;
  memcpy(r->d, a->d, sizeof r->d);
}

static int norm_dim(Gen *g, int d, int rank) { /* sometimes negative */
  return coin(g, 0.35) ? d - rank : d;
}

static bool g_view(Gen *g, Stmt *st) {
  Val *a = pick(g, ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  char dims[256];
  int k = rint_(g, 0, 2), i = rint_(g, 0, a->rank - 1);
  if (k == 0 && a->rank >= 2 && i < a->rank - 1) { /* merge i, i+1 */
    r->d[i] = dim_mul(a->d[i], a->d[i + 1]);
    memmove(&r->d[i + 1], &a->d[i + 2], sizeof(Dim) * (size_t)(a->rank - i - 2));
    r->rank--;
  } else if (k == 1 && is_lit(a->d[i]) && a->d[i].c % 2 == 0 && a->rank < PG_MAXR) {
    memmove(&r->d[i + 1], &a->d[i], sizeof(Dim) * (size_t)(a->rank - i));
    r->d[i] = lit(2), r->d[i + 1] = lit(a->d[i].c / 2);
    r->rank++;
  } else { /* flatten to one dim */
    Dim p = lit(1);
    for (int j = 0; j < a->rank; j++) p = dim_mul(p, a->d[j]);
    r->d[0] = p, r->rank = 1;
  }
  dims_str(r->d, r->rank, dims, sizeof dims);
  if (r->rank == 1 && coin(g, 0.4)) snprintf(dims, sizeof dims, "-1");
  bool view = a->contig && coin(g, 0.6);
  r->contig = a->contig;
  snprintf(st->e, sizeof st->e, coin(g, 0.2) ? "%s.%s([%s])" : "%s.%s(%s)", a->name,
           view ? "view" : "reshape", dims);
  return true;
}

static bool g_permute(Gen *g, Stmt *st) {
  Val *a = pick(g, ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int n = a->rank, k = rint_(g, 0, 2);
  if (k == 0) {
    int p[PG_MAXR];
    for (int i = 0; i < n; i++) p[i] = i;
    for (int i = n - 1; i > 0; i--) {
      int j = rint_(g, 0, i), t = p[i];
      p[i] = p[j], p[j] = t;
    }
    char s[64] = "";
    size_t at = 0;
    for (int i = 0; i < n; i++) {
      r->d[i] = a->d[p[i]];
      at += (size_t)snprintf(s + at, sizeof s - at, "%s%d", i ? ", " : "", norm_dim(g, p[i], n));
    }
    snprintf(st->e, sizeof st->e, "%s.permute(%s)", a->name, s);
  } else if (k == 1 || n < 2) {
    int x = rint_(g, 0, n - 1), y = rint_(g, 0, n - 1);
    r->d[x] = a->d[y], r->d[y] = a->d[x];
    snprintf(st->e, sizeof st->e, "%s.transpose(%d, %d)", a->name, norm_dim(g, x, n),
             norm_dim(g, y, n));
  } else {
    r->d[n - 1] = a->d[n - 2], r->d[n - 2] = a->d[n - 1];
    const char *f = n == 2 ? (coin(g, 0.5) ? ".t()" : ".T") : ".mT";
    snprintf(st->e, sizeof st->e, "%s%s", a->name, f);
  }
  r->contig = a->contig && n <= 1;
  return true;
}

/* Python slice a:b:c of a literal dim of size n: its length. */
static int64_t slice_len(int64_t n, int64_t a, int64_t b, int64_t c) {
  a = a < 0 ? (a + n < 0 ? 0 : a + n) : (a > n ? n : a);
  b = b < 0 ? (b + n < 0 ? 0 : b + n) : (b > n ? n : b);
  return b > a ? (b - a + c - 1) / c : 0;
}

static bool g_index(Gen *g, Stmt *st) {
  Val *a = pick(g, ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->rank = 0;
  char s[256] = "";
  size_t at = 0;
  int d = 0;
  bool ell = false, changed = false;
  while (d < a->rank && coin(g, 0.8)) {
    int k = rint_(g, 0, 9);
    char it[64];
    Dim x = a->d[d];
    if (k < 2) { /* integer index */
      int64_t n = dim_val(g, x), i = is_lit(x) ? rint_(g, (int)-n, (int)n - 1) : rint_(g, -1, 0);
      snprintf(it, sizeof it, "%lld", (long long)i);
      d++, changed = true;
    } else if (k < 6 && is_lit(x)) {
      int64_t n = x.c, lo = rint_(g, (int)-n - 1, (int)n), hi = rint_(g, (int)-n, (int)n + 1),
              stp = rint_(g, 1, 3);
      bool ha = coin(g, 0.6), hb = coin(g, 0.6), hs = coin(g, 0.5);
      int64_t len = slice_len(n, ha ? lo : 0, hb ? hi : n, hs ? stp : 1);
      if (len < 1 || r->rank >= PG_MAXR) return false;
      char ta[24] = "", tb[24] = "";
      if (ha) snprintf(ta, sizeof ta, "%lld", (long long)lo);
      if (hb) snprintf(tb, sizeof tb, "%lld", (long long)hi);
      if (hs) snprintf(it, sizeof it, "%s:%s:%lld", ta, tb, (long long)stp);
      else snprintf(it, sizeof it, "%s:%s", ta, tb);
      r->d[r->rank++] = lit(len), d++, changed = true;
    } else if (k < 7 && r->rank < PG_MAXR) {
      snprintf(it, sizeof it, "None");
      r->d[r->rank++] = lit(1);
    } else if (k < 8 && !ell) {
      ell = true;
      int keep = rint_(g, 0, a->rank - d), to = a->rank - keep;
      snprintf(it, sizeof it, "...");
      while (d < to && r->rank < PG_MAXR) r->d[r->rank++] = a->d[d++];
    } else if (r->rank < PG_MAXR) {
      snprintf(it, sizeof it, ":");
      r->d[r->rank++] = a->d[d++];
    } else {
      return false;
    }
    at += (size_t)snprintf(s + at, sizeof s - at, "%s%s", at ? ", " : "", it);
  }
  if (ell && d < a->rank) return false; /* the ellipsis would cover the rest */
  while (d < a->rank) {
    if (r->rank >= PG_MAXR) return false;
    r->d[r->rank++] = a->d[d++];
  }
  if (!at) snprintf(s, sizeof s, ":");
  r->contig = a->contig && !changed && r->rank == a->rank;
  snprintf(st->e, sizeof st->e, "%s[%s]", a->name, s);
  return true;
}

/* Indexing by tensors with indices computed in range in the kernel (the
 * values of index parameters are not the generator's to choose):
 * index_select / x[..., idx] along a dim of size S with idx =
 * (arange(L) * m + o) % S (x[...]: minus S, a negative index wrapping),
 * or flip. */
static bool g_gather(Gen *g, Stmt *st) {
  Val *a = pick(g, ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int n = a->rank, d = rint_(g, 0, n - 1), k = rint_(g, 0, 2);
  if (k == 2) { /* flip: the input's layout */
    int d2 = rint_(g, 0, n - 1);
    if (d2 == d) snprintf(st->e, sizeof st->e, "%s.flip(%d)", a->name, norm_dim(g, d, n));
    else snprintf(st->e, sizeof st->e, "flip(%s, [%d, %d])", a->name, norm_dim(g, d, n),
                  norm_dim(g, d2, n));
    return true;
  }
  char size[64], idx[160];
  dim_str(a->d[d], size, sizeof size);
  int64_t len = rint_(g, 1, 5);
  snprintf(idx, sizeof idx, "(arange(%lld) * %d + %d) %% (%s)", (long long)len, rint_(g, 1, 3),
           rint_(g, 0, 4), size);
  r->d[d] = lit(len);
  if (k == 0) {
    r->contig = true;
    snprintf(st->e, sizeof st->e, "%s.index_select(%d, %s)", a->name, norm_dim(g, d, n), idx);
    return true;
  }
  r->contig = a->contig && d == 0;
  char items[128] = "";
  size_t at = 0;
  for (int i = 0; i < d; i++) at += (size_t)snprintf(items + at, sizeof items - at, ":, ");
  snprintf(st->e, sizeof st->e, "%s[%s%s - (%s)]", a->name, items, idx, size);
  return true;
}

static bool g_misc_view(Gen *g, Stmt *st) {
  Val *a = pick(g, any_tensor);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int n = a->rank, k = rint_(g, 0, 9);
  r->contig = false;
  if (k == 0 && n) { /* select */
    int d = rint_(g, 0, n - 1);
    int64_t sz = dim_val(g, a->d[d]), i = is_lit(a->d[d]) ? rint_(g, (int)-sz, (int)sz - 1) : rint_(g, -1, 0);
    memmove(&r->d[d], &a->d[d + 1], sizeof(Dim) * (size_t)(n - d - 1));
    r->rank--;
    snprintf(st->e, sizeof st->e, "%s.select(%d, %lld)", a->name, norm_dim(g, d, n), (long long)i);
  } else if (k == 1 && n) { /* narrow on a literal dim */
    int d = rint_(g, 0, n - 1);
    if (!is_lit(a->d[d])) return false;
    int64_t sz = a->d[d].c, s0 = rint_(g, 0, (int)sz - 1), len = rint_(g, 1, (int)(sz - s0));
    r->d[d] = lit(len);
    r->contig = a->contig && d == 0;
    snprintf(st->e, sizeof st->e, "%s.narrow(%d, %lld, %lld)", a->name, d, (long long)s0,
             (long long)len);
  } else if (k == 2) { /* expand */
    int lead = coin(g, 0.5) ? 0 : rint_(g, 1, 2);
    if (n + lead > PG_MAXR) return false;
    char s[256] = "";
    size_t at = 0;
    r->rank = n + lead;
    for (int i = 0; i < n + lead; i++) {
      Dim x = i < lead ? lit(1) : a->d[i - lead], y = x;
      if (is_one(x)) y = coin(g, 0.3) ? rand_dim(g, false) : lit(rint_(g, 1, 3));
      r->d[i] = y;
      char t[64];
      dim_str(y, t, sizeof t);
      if (i >= lead && !is_one(x) && coin(g, 0.25)) snprintf(t, sizeof t, "-1");
      at += (size_t)snprintf(s + at, sizeof s - at, "%s%s", i ? ", " : "", t);
    }
    if (!r->rank) snprintf(s, sizeof s, "[]");
    snprintf(st->e, sizeof st->e, "%s.expand(%s)", a->name, s);
  } else if (k == 3) { /* expand_as */
    for (int t = 0; t < 8; t++) {
      Val *o = pick(g, any_tensor);
      int rk = o->rank;
      Dim d[PG_MAXR];
      memcpy(d, o->d, sizeof d);
      if (rk < n || !bcast(&rk, d, n, a->d) || rk != o->rank) continue;
      bool same = true;
      for (int i = 0; i < rk; i++) same = same && dim_eq(d[i], o->d[i]);
      if (!same) continue;
      r->rank = rk;
      memcpy(r->d, d, sizeof d);
      snprintf(st->e, sizeof st->e, "%s.expand_as(%s)", a->name, o->name);
      return true;
    }
    return false;
  } else if (k == 4 && n < PG_MAXR) { /* unsqueeze */
    int d = rint_(g, 0, n);
    memmove(&r->d[d + 1], &a->d[d], sizeof(Dim) * (size_t)(n - d));
    r->d[d] = lit(1), r->rank++;
    r->contig = a->contig;
    snprintf(st->e, sizeof st->e, "%s.unsqueeze(%d)", a->name, coin(g, 0.3) ? d - n - 1 : d);
  } else if (k == 5 && n) { /* squeeze */
    bool sym = false;
    for (int i = 0; i < n; i++) sym = sym || !is_lit(a->d[i]);
    r->contig = a->contig;
    if (!sym && coin(g, 0.4)) {
      r->rank = 0;
      for (int i = 0; i < n; i++)
        if (!is_one(a->d[i])) r->d[r->rank++] = a->d[i];
      snprintf(st->e, sizeof st->e, "%s.squeeze()", a->name);
    } else {
      int d = rint_(g, 0, n - 1);
      if (!is_lit(a->d[d])) return false;
      if (is_one(a->d[d])) {
        memmove(&r->d[d], &a->d[d + 1], sizeof(Dim) * (size_t)(n - d - 1));
        r->rank--;
      }
      snprintf(st->e, sizeof st->e, "%s.squeeze(%d)", a->name, norm_dim(g, d, n));
    }
  } else if (k == 6 && n) { /* flatten */
    int s0 = rint_(g, 0, n - 1), e0 = rint_(g, s0, n - 1);
    Dim p = lit(1);
    for (int i = s0; i <= e0; i++) p = dim_mul(p, a->d[i]);
    r->d[s0] = p;
    memmove(&r->d[s0 + 1], &a->d[e0 + 1], sizeof(Dim) * (size_t)(n - e0 - 1));
    r->rank = n - (e0 - s0);
    r->contig = a->contig;
    snprintf(st->e, sizeof st->e, "%s.flatten(%d, %d)", a->name, s0, norm_dim(g, e0, n));
  } else if (k == 7 && n && n < PG_MAXR) { /* unflatten a literal even dim */
    int d = rint_(g, 0, n - 1);
    if (!is_lit(a->d[d]) || a->d[d].c % 2) return false;
    memmove(&r->d[d + 1], &a->d[d], sizeof(Dim) * (size_t)(n - d));
    r->d[d] = lit(2), r->d[d + 1] = lit(a->d[d].c / 2), r->rank++;
    r->contig = a->contig;
    char second[24];
    if (coin(g, 0.5)) snprintf(second, sizeof second, "-1");
    else snprintf(second, sizeof second, "%lld", (long long)(a->d[d].c / 2));
    snprintf(st->e, sizeof st->e, "%s.unflatten(%d, [2, %s])", a->name, norm_dim(g, d, n), second);
  } else if (k == 8 && n >= 2) { /* diagonal over literal dims */
    int d1 = rint_(g, 0, n - 1), d2 = rint_(g, 0, n - 1), off = rint_(g, -1, 1);
    if (d1 == d2 || !is_lit(a->d[d1]) || !is_lit(a->d[d2])) return false;
    int64_t n1 = a->d[d1].c, n2 = a->d[d2].c;
    int64_t len = off >= 0 ? (n1 < n2 - off ? n1 : n2 - off) : (n1 + off < n2 ? n1 + off : n2);
    if (len < 1) return false;
    r->rank = 0;
    for (int i = 0; i < n; i++)
      if (i != d1 && i != d2) r->d[r->rank++] = a->d[i];
    r->d[r->rank++] = lit(len);
    snprintf(st->e, sizeof st->e, "%s.diagonal(%d, %d, %d)", a->name, off, d1, norm_dim(g, d2, n));
  } else if (k == 9 && n && n < PG_MAXR) { /* unfold a literal dim */
    int d = rint_(g, 0, n - 1);
    if (!is_lit(a->d[d])) return false;
    int64_t sz = a->d[d].c, size = rint_(g, 1, (int)sz), step = rint_(g, 1, 3);
    r->d[d] = lit((sz - size) / step + 1);
    r->d[r->rank++] = lit(size);
    snprintf(st->e, sizeof st->e, "%s.unfold(%d, %lld, %lld)", a->name, norm_dim(g, d, n),
             (long long)size, (long long)step);
  } else {
    return false;
  }
  return true;
}

/* A cast of a to dt, guarded so that it is in range; false if unsafe. */
static bool cast_expr(Gen *g, const Val *a, DType dt, char *e, size_t n, Val *r) {
  set_like(r, a);
  r->dt = dt;
  if (is_float(a->dt) && !is_float(dt)) {
    if (!a->exact) return false;
    if (dt == DT_BOOL) snprintf(e, n, "%s.to(bool)", a->name);
    else if (dt == DT_U8) snprintf(e, n, "%s.clamp(0, 200).to(u8)", a->name);
    else snprintf(e, n, "%s.clamp(-100, 100).to(%s)", a->name, dtype_name(dt));
    r->mag = 200;
    return true;
  }
  if (is_float(dt) && a->mag > cap(dt)) return false;
  (void)g;
  snprintf(e, n, "%s.to(%s)", a->name, dtype_name(dt));
  if (is_float(dt) && !is_float(a->dt)) r->exact = a->mag < 2048 || !is_half(dt);
  if (is_float(dt) && is_float(a->dt) && dtype_size(dt) < dtype_size(a->dt)) r->exact = a->exact;
  if (dt == DT_BOOL) r->mag = 1;
  else if (!is_float(dt) && r->mag > 127) r->mag = dt == DT_U8 ? 255 : dt == DT_I8 ? 128 : r->mag;
  return true;
}

static bool g_copy(Gen *g, Stmt *st) {
  Val *a = pick(g, any_tensor);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int k = rint_(g, 0, 5);
  if (k == 0) {
    r->contig = true;
    snprintf(st->e, sizeof st->e, "%s.contiguous()", a->name);
  } else if (k == 1 && a->rank == 4) {
    r->contig = false;
    snprintf(st->e, sizeof st->e, "%s.contiguous(channels_last)", a->name);
  } else if (k == 2) {
    snprintf(st->e, sizeof st->e, "%s.clone()", a->name);
  } else {
    return cast_expr(g, a, ALL[rint_(g, 0, 9)], st->e, sizeof st->e, r);
  }
  return true;
}

/* A second operand for an elementwise op with a (shape-compatible). */
static void operand(Gen *g, const Val *a, Opnd *o) {
  int k = rint_(g, 0, 19);
  if (k < 11) {
    for (int t = 0; t < 6; t++) {
      Val *b = pick(g, NULL);
      int rk = a->rank;
      Dim d[PG_MAXR];
      memcpy(d, a->d, sizeof d);
      if (b && bcast(&rk, d, b->rank, b->d)) {
        opnd_of(o, b);
        if (b->scalar) o->kind = 1;
        return;
      }
    }
  }
  if (k < 15 || k >= 18) {
    static const char *const lits[] = {"2", "3", "0.5", "-1.5", "true", "1", "-2", "0.25"};
    const char *s = lits[rint_(g, 0, 7)];
    DType dt = strchr(s, '.') ? DT_F32 : !strcmp(s, "true") ? DT_BOOL : DT_I64;
    opnd_num(o, s, dt, 3);
    return;
  }
  int s = rint_(g, 0, NSYM - 1);
  for (int t = 0; t < NSYM && !sym_bound(g, s); t++) s = (s + 1) % NSYM;
  if (sym_bound(g, s)) opnd_num(o, SYMS[s], DT_I64, (double)g->symval[s]);
  else opnd_num(o, "2", DT_I64, 2);
}

static int bcast2(const Opnd *a, const Opnd *b, int *rank, Dim *d) {
  *rank = a->rank;
  memcpy(d, a->d, sizeof(Dim) * PG_MAXR);
  return bcast(rank, d, b->rank, b->d);
}

static bool fin(Val *r, double mag) {
  r->mag = mag;
  return mag <= cap(r->dt);
}

static bool g_binary(Gen *g, Stmt *st) {
  Val *av = pick(g, NULL);
  if (!av) return false;
  Opnd o[2];
  opnd_of(&o[0], av);
  operand(g, av, &o[1]);
  Val *r = &st->r;
  if (!bcast2(&o[0], &o[1], &r->rank, r->d)) return false;
  static const char *const ops[] = {"+", "-", "*", "/", "//", "%", "**", "==", "!=", "<",
                                    "<=", ">", ">=", "&", "|", "^", "+", "*", "-"};
  const char *op = ops[rint_(g, 0, 18)];
  DType a = o[0].dt, b = o[1].dt;
  bool swap = coin(g, 0.4);
  DType rt = result_type(o, 2);
  double ma = o[0].mag, mb = o[1].mag;
  bool exact_in = o[0].exact && o[1].exact;
  r->dt = rt, r->exact = !is_float(rt), r->contig = o[0].kind == 2 && av->contig &&
      o[0].rank == r->rank;
  if (o[1].kind == 2 && !(o[1].contig && o[1].rank == r->rank)) r->contig = false;
  if (!strcmp(op, "+") || !strcmp(op, "-") || !strcmp(op, "*")) {
    if (op[0] == '-' && (a == DT_BOOL || b == DT_BOOL)) return false;
    snprintf(st->e, sizeof st->e, "%s %s %s", swap ? o[1].s : o[0].s, op, swap ? o[0].s : o[1].s);
    return fin(r, op[0] == '*' ? ma * mb : ma + mb);
  }
  if (!strcmp(op, "/")) {
    if (!is_float(rt)) r->dt = DT_F32, r->exact = false;
    if (o[1].kind == 0) snprintf(st->e, sizeof st->e, "%s / %s", o[0].s, strcmp(o[1].s, "true") ? "0.5" : "2");
    else snprintf(st->e, sizeof st->e, "%s / (%s * %s + 1)", o[0].s, o[1].s, o[1].s);
    if (o[1].kind != 0 && is_half(b) && mb > 100) return false;
    return fin(r, ma * 2);
  }
  if (!strcmp(op, "//") || !strcmp(op, "%")) {
    if (a == DT_BOOL || b == DT_BOOL) return false;
    if (is_float(rt)) { /* exact float dividends only, power-of-two divisors */
      if (!exact_in || o[1].kind != 0 || !is_float(a)) return false;
      snprintf(st->e, sizeof st->e, "%s %s %s", o[0].s, op, coin(g, 0.5) ? "2" : "0.5");
      r->exact = true, r->dt = a; /* a % literal: a's dtype */
      return fin(r, ma + 2);
    }
    if (o[1].kind == 0) snprintf(st->e, sizeof st->e, "%s %s %s", o[0].s, op, coin(g, 0.5) ? "3" : "-3");
    else snprintf(st->e, sizeof st->e, "%s %s (%s * %s + 1)", o[0].s, op, o[1].s, o[1].s);
    return fin(r, ma);
  }
  if (!strcmp(op, "**")) {
    if (a == DT_BOOL) return false;
    Opnd e[2] = {o[0]};
    const char *x = is_float(rt) ? (coin(g, 0.5) ? "0.5" : "2") : (coin(g, 0.5) ? "2" : "3");
    opnd_num(&e[1], x, strchr(x, '.') ? DT_F32 : DT_I64, 2);
    memcpy(r->d, o[0].d, sizeof r->d), r->rank = o[0].rank;
    r->dt = result_type(e, 2), r->exact = !is_float(r->dt);
    r->contig = av->contig;
    if (is_float(r->dt)) snprintf(st->e, sizeof st->e, "%s.abs() ** %s", o[0].s, x);
    else snprintf(st->e, sizeof st->e, "%s ** %s", o[0].s, x);
    return fin(r, ma * ma * ma + 1);
  }
  if (op[0] == '&' || op[0] == '|' || op[0] == '^') {
    if (is_float(a) || is_float(b)) return false;
    snprintf(st->e, sizeof st->e, "%s %s %s", swap ? o[1].s : o[0].s, op, swap ? o[0].s : o[1].s);
    return fin(r, ma > mb ? 2 * ma : 2 * mb);
  }
  /* comparisons */
  if (!exact_in) return false;
  r->dt = DT_BOOL, r->exact = true;
  snprintf(st->e, sizeof st->e, "%s %s %s", o[0].s, op, o[1].s);
  return fin(r, 1);
}

static bool g_unary(Gen *g, Stmt *st) {
  Val *a = pick(g, NULL);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->contig = a->contig || a->scalar;
  static const char *const fs[] = {"abs", "neg", "exp", "log", "log1p", "expm1", "sqrt",
                                   "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "gelu",
                                   "silu", "erf", "floor", "ceil", "round", "sign",
                                   "reciprocal", "logical_not", "~", "-", "gelu_tanh"};
  const char *f = fs[rint_(g, 0, 24)];
  DType dt = a->dt;
  bool fl = is_float(dt);
  char arg[128];
  snprintf(arg, sizeof arg, "%s", a->name);
  double m = a->mag;
  if (!strcmp(f, "abs") || !strcmp(f, "neg") || !strcmp(f, "-")) {
    if (dt == DT_BOOL) return false;
  } else if (!strcmp(f, "~")) {
    if (fl) return false;
  } else if (!strcmp(f, "logical_not")) {
    if (fl && !a->exact) return false;
    r->dt = DT_BOOL, r->exact = true, m = 1;
  } else if (!strcmp(f, "floor") || !strcmp(f, "ceil") || !strcmp(f, "round") ||
             !strcmp(f, "sign")) {
    if (!fl || !a->exact) return false;
    m += 1;
  } else {
    bool intok = !strcmp(f, "sin") || !strcmp(f, "exp") || !strcmp(f, "sqrt") ||
                 !strcmp(f, "log") || !strcmp(f, "cos") || !strcmp(f, "tanh");
    if (!fl && (!intok || dt == DT_BOOL)) return false;
    if (!fl) r->dt = DT_F32;
    r->exact = false;
    if (!strcmp(f, "exp") || !strcmp(f, "expm1")) {
      if (m > 4) snprintf(arg, sizeof arg, "%s.clamp(-4, 4)", a->name), m = 4;
      m = exp(m);
    } else if (!strcmp(f, "log") || !strcmp(f, "log1p") || !strcmp(f, "sqrt") ||
               !strcmp(f, "rsqrt") || !strcmp(f, "reciprocal")) {
      if (m > 100) return false;
      snprintf(arg, sizeof arg, "(%s * %s + 1)", a->name, a->name);
      m = m * m + 2;
    } else if (!strcmp(f, "sin") || !strcmp(f, "cos") || !strcmp(f, "tanh") ||
               !strcmp(f, "sigmoid") || !strcmp(f, "erf")) {
      m = 1;
    } else {
      m += 1;
    }
  }
  if (!strcmp(f, "~") || !strcmp(f, "-")) snprintf(st->e, sizeof st->e, "%s%s", f, arg);
  else if (!strcmp(f, "gelu_tanh")) snprintf(st->e, sizeof st->e, "gelu(%s, approximate=\"tanh\")", arg);
  else if (coin(g, 0.4) && strcmp(f, "gelu") && strcmp(f, "silu"))
    snprintf(st->e, sizeof st->e, "%s.%s()", arg, f);
  else snprintf(st->e, sizeof st->e, "%s(%s)", f, arg);
  if (!strcmp(f, "abs") || !strcmp(f, "neg") || !strcmp(f, "-") || !strcmp(f, "~")) {
    if (!fl) r->exact = true;
  }
  return fin(r, m);
}

/* Exact f32/f64 tensors and integer tensors that convert to f32 exactly. */
static bool quantizable(const Gen *g, const Val *v) {
  (void)g;
  if (v->scalar || !v->exact) return false;
  if (v->dt == DT_F32 || v->dt == DT_F64) return v->mag < 1e6;
  return !is_float(v->dt) && v->dt != DT_BOOL && v->mag < 16777216;
}

/* Quantization and bucketing: an exact value divided by a divisor that is
 * not a power of two, then rounded, floored or compared.  IEEE division
 * is correctly rounded, so every implementation agrees bit for bit where
 * a multiply by the reciprocal would not ((150 / 60).round() is 2, not
 * 3; (9 / 0.3).floor() is 29).  Integers divide in f32, as PyTorch's
 * true division does. */
static bool g_quantize(Gen *g, Stmt *st) {
  Val *a = pick(g, quantizable);
  if (!a) return false;
  static const char *const dv[] = {"60", "3", "0.3", "7", "255", "1.5", "0.1", "10"};
  static const double dm[] = {60, 3, 0.3, 7, 255, 1.5, 0.1, 10};
  int k = rint_(g, 0, 7), how = rint_(g, 0, 4);
  Val *r = &st->r;
  set_like(r, a);
  r->contig = a->contig;
  if (!is_float(r->dt)) r->dt = DT_F32;
  r->exact = true;
  if (how == 4) { /* a round trip through the quotient */
    snprintf(st->e, sizeof st->e, "%s / %s * %s == %s", a->name, dv[k], dv[k], a->name);
    r->dt = DT_BOOL;
    return fin(r, 1);
  }
  static const char *const fs[] = {"round", "floor", "ceil", "round"};
  if (how == 3) /* the scaled form quantizers use: round(x * s / d) */
    snprintf(st->e, sizeof st->e, "(%s * 30 / %s).round()", a->name, dv[k]);
  else snprintf(st->e, sizeof st->e, "(%s / %s).%s()", a->name, dv[k], fs[how]);
  return fin(r, a->mag * (how == 3 ? 30 : 1) / dm[k] + 1);
}

static bool exact_bool_like(const Gen *g, const Val *v) {
  (void)g;
  return !v->scalar && v->exact;
}

static bool g_func2(Gen *g, Stmt *st) {
  Val *a = pick(g, any_tensor);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int k = rint_(g, 0, 2);
  Opnd o[2];
  opnd_of(&o[0], a);
  if (k == 0) { /* maximum / minimum: tensors only */
    Val *b = pick(g, any_tensor);
    opnd_of(&o[1], b);
    if (!bcast2(&o[0], &o[1], &r->rank, r->d)) return false;
    r->dt = result_type(o, 2);
    r->exact = (a->exact && b->exact) || !is_float(r->dt);
    r->contig = false;
    snprintf(st->e, sizeof st->e, "%s(%s, %s)", coin(g, 0.5) ? "maximum" : "minimum", a->name,
             b->name);
    return fin(r, a->mag > b->mag ? a->mag : b->mag);
  }
  if (k == 1) { /* where */
    Val *c = pick(g, exact_bool_like);
    if (!c) return false;
    operand(g, a, &o[1]);
    if (!bcast2(&o[0], &o[1], &r->rank, r->d) || !bcast(&r->rank, r->d, c->rank, c->d))
      return false;
    r->dt = result_type(o, 2);
    r->exact = (o[0].exact && o[1].exact) || !is_float(r->dt);
    r->contig = false;
    char cs[64];
    if (c->dt == DT_BOOL) snprintf(cs, sizeof cs, "%s", c->name);
    else snprintf(cs, sizeof cs, "%s > 0", c->name);
    snprintf(st->e, sizeof st->e, "where(%s, %s, %s)", cs, a->name, o[1].s);
    return fin(r, a->mag > o[1].mag ? a->mag : o[1].mag);
  }
  /* clamp with number bounds of a's category */
  if (a->dt == DT_BOOL) return false;
  const char *lo = "None", *hi = "None";
  if (is_float(a->dt)) {
    static const char *const l[] = {"None", "-1", "-0.5", "0"}, *const h[] = {"None", "1", "0.5", "1.5"};
    lo = l[rint_(g, 0, 3)], hi = h[rint_(g, 0, 3)];
  } else {
    static const char *const l[] = {"None", "0", "3", "10"}, *const h[] = {"None", "50", "20", "100"};
    lo = l[rint_(g, 0, 3)], hi = h[rint_(g, 0, 3)];
  }
  if (!strcmp(lo, "None") && !strcmp(hi, "None")) hi = is_float(a->dt) ? "1" : "50";
  if (coin(g, 0.5)) snprintf(st->e, sizeof st->e, "clamp(%s, %s, %s)", a->name, lo, hi);
  else if (!strcmp(lo, "None")) snprintf(st->e, sizeof st->e, "%s.clamp(max=%s)", a->name, hi);
  else snprintf(st->e, sizeof st->e, "%s.clamp(min=%s, max=%s)", a->name, lo, hi);
  return fin(r, a->mag);
}

static bool g_reduce(Gen *g, Stmt *st) {
  Val *a = pick(g, any_tensor);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  static const char *const fs[] = {"sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "sum"};
  const char *f = fs[rint_(g, 0, 7)];
  int n = a->rank;
  bool red[PG_MAXR] = {false}, keep = coin(g, 0.35), arg = f[0] == 'a' && f[1] == 'r';
  char args[128] = "";
  int nd = 0;
  if (n && (coin(g, 0.75) || !strncmp(f, "am", 2))) {
    nd = arg ? 1 : rint_(g, 1, n < 3 ? n : 3);
    char ds[64] = "";
    size_t at = 0;
    for (int i = 0; i < nd; i++) {
      int d = rint_(g, 0, n - 1);
      if (red[d]) return false;
      red[d] = true;
      at += (size_t)snprintf(ds + at, sizeof ds - at, "%s%d", i ? ", " : "", norm_dim(g, d, n));
    }
    if (nd == 1 && coin(g, 0.5)) snprintf(args, sizeof args, ", %s", ds);
    else if (nd == 1 && arg) snprintf(args, sizeof args, ", dim=%s", ds);
    else snprintf(args, sizeof args, ", dim=[%s]", ds);
    if (keep) snprintf(args + strlen(args), sizeof args - strlen(args), ", keepdim=true");
  } else {
    if (!strncmp(f, "am", 2)) return false;
    keep = false;
    for (int i = 0; i < n; i++) red[i] = true;
  }
  int64_t cnt = 1;
  for (int i = 0; i < n; i++)
    if (red[i]) cnt *= dim_val(g, a->d[i]);
  r->rank = 0;
  for (int i = 0; i < n; i++)
    if (!red[i]) r->d[r->rank++] = a->d[i];
    else if (keep) r->d[r->rank++] = lit(1);
  r->contig = true;
  bool fl = is_float(a->dt);
  double m = a->mag;
  if (!strcmp(f, "sum")) {
    if (!fl) r->dt = DT_I64;
    else r->exact = false, g->pending_reduce = true;
    m *= (double)cnt;
  } else if (!strcmp(f, "mean")) {
    if (!fl) return false;
    r->exact = false, g->pending_reduce = true;
  } else if (!strcmp(f, "prod")) {
    if (cnt > 6 || (fl && m > 2)) return false;
    if (!fl) r->dt = DT_I64;
    else r->exact = false, g->pending_reduce = true;
    m = pow(m > 1 ? m : 1, (double)cnt);
  } else if (arg) {
    if (!a->exact || a->dt == DT_BOOL) return false;
    r->dt = DT_I64, m = (double)cnt;
  } else if (a->dt == DT_BOOL) {
    return false;
  }
  if (coin(g, 0.5)) snprintf(st->e, sizeof st->e, "%s(%s%s)", f, a->name, args);
  else snprintf(st->e, sizeof st->e, "%s.%s(%s)", a->name, f, args[0] ? args + 2 : "");
  return fin(r, m);
}

static bool g_norm(Gen *g, Stmt *st) {
  Val *a = pick(g, float_val);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->exact = false, r->contig = true;
  g->pending_reduce = true;
  int n = a->rank;
  if (coin(g, 0.6)) { /* the result keeps the input's layout */
    r->contig = a->contig;
    const char *f = coin(g, 0.5) ? "softmax" : "log_softmax";
    int d = norm_dim(g, rint_(g, 0, n - 1), n);
    snprintf(st->e, sizeof st->e, coin(g, 0.5) ? "%s(%s, %d)" : "%s(%s, dim=%d)", f, a->name, d);
    return fin(r, f[0] == 's' ? 1 : 2 * a->mag + 10);
  }
  int m = rint_(g, 1, n < 2 ? n : 2);
  char ns[128];
  dims_str(a->d + n - m, m, ns, sizeof ns);
  int64_t cnt = 1;
  for (int i = n - m; i < n; i++) cnt *= dim_val(g, a->d[i]);
  if (cnt < 2) return false;
  char extra[64] = "";
  double wm = 1;
  if (coin(g, 0.5)) {
    Val *w = new_param(g, a->dt, m, a->d + n - m, LAYOUT_CONTIGUOUS);
    if (!w) return false;
    snprintf(extra, sizeof extra, ", %s, %s", w->name, w->name);
    wm = 3;
  }
  snprintf(st->e, sizeof st->e, "layer_norm(%s, [%s]%s)", a->name, ns, extra);
  return fin(r, sqrt((double)cnt) * wm + 2);
}

/* var/std/logsumexp/norm of a float tensor, any/all/count_nonzero of
 * any tensor, over some dims (logsumexp: at least one). */
static bool g_stats(Gen *g, Stmt *st) {
  static const char *const fs[] = {"var", "std", "logsumexp", "norm", "any", "all",
                                   "count_nonzero", "std"};
  const char *f = fs[rint_(g, 0, 7)];
  bool logical = f[0] == 'a' || f[0] == 'c';
  Val *a = pick(g, logical ? any_tensor : float_val);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int n = a->rank;
  bool red[PG_MAXR] = {false}, keep = f[0] != 'c' && coin(g, 0.35);
  char args[128] = "";
  if (n && (f[0] == 'l' || coin(g, 0.7))) {
    int nd = rint_(g, 1, n < 3 ? n : 3);
    size_t at = 0;
    char ds[64] = "";
    for (int i = 0; i < nd; i++) {
      int d = rint_(g, 0, n - 1);
      if (red[d]) return false;
      red[d] = true;
      at += (size_t)snprintf(ds + at, sizeof ds - at, "%s%d", i ? ", " : "", norm_dim(g, d, n));
    }
    if (!strcmp(f, "norm")) {
      static const char *const ps[] = {"2", "1", "1e999", "0", "3"};
      snprintf(args, sizeof args, ", %s, [%s]", ps[rint_(g, 0, 4)], ds);
    } else if (nd == 1 && coin(g, 0.5)) {
      snprintf(args, sizeof args, ", %s", ds);
    } else {
      snprintf(args, sizeof args, ", dim=[%s]", ds);
    }
    if (f[0] == 'v' || (f[0] == 's' && coin(g, 0.5)))
      snprintf(args + strlen(args), sizeof args - strlen(args), ", correction=%d", rint_(g, 0, 2));
    if (keep) snprintf(args + strlen(args), sizeof args - strlen(args), ", keepdim=true");
  } else {
    if (f[0] == 'l') return false;
    keep = false;
    for (int i = 0; i < n; i++) red[i] = true;
  }
  int64_t cnt = 1;
  for (int i = 0; i < n; i++)
    if (red[i]) cnt *= dim_val(g, a->d[i]);
  if (!strcmp(f, "norm") && strstr(args, "1e999") && cnt == 0) return false;
  r->rank = 0;
  for (int i = 0; i < n; i++)
    if (!red[i]) r->d[r->rank++] = a->d[i];
    else if (keep) r->d[r->rank++] = lit(1);
  r->contig = true;
  double m = a->mag;
  if (logical) {
    r->dt = f[0] == 'c' ? DT_I64 : a->dt == DT_U8 ? DT_U8 : DT_BOOL;
    r->exact = a->exact;
    m = f[0] == 'c' ? (double)cnt : 1;
  } else {
    r->exact = false, g->pending_reduce = true;
    m = f[0] == 'v' ? m * m * 4 + 1 : f[0] == 'n' ? m * (double)(cnt + 1) : m + 2 * log((double)cnt + 2) + 1;
    if (f[0] == 'v' || f[0] == 's') m = fmax(m, 1) * 2; /* inf/nan for small counts */
  }
  if (f[0] != 'c' && coin(g, 0.5))
    snprintf(st->e, sizeof st->e, "%s.%s(%s)", a->name, f, args[0] ? args + 2 : "");
  else
    snprintf(st->e, sizeof st->e, "%s(%s%s)", f, a->name, args);
  return fin(r, m);
}

/* cumsum/cumprod (any dtype; integers and bool give i64) and
 * logcumsumexp (floats) along one dim. */
static bool g_scan(Gen *g, Stmt *st) {
  static const char *const fs[] = {"cumsum", "cumprod", "logcumsumexp", "cumsum"};
  const char *f = fs[rint_(g, 0, 3)];
  bool lse = f[0] == 'l';
  Val *a = pick(g, lse ? float_val : ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->contig = true;
  int n = a->rank, d = rint_(g, 0, n - 1);
  int64_t ext = dim_val(g, a->d[d]);
  double m = a->mag;
  bool fl = is_float(a->dt);
  if (!fl) r->dt = DT_I64;
  if (fl) r->exact = false, g->pending_reduce = true;
  if (f[3] == 's') {
    m *= (double)(ext + 1);
  } else if (f[3] == 'p') {
    if (ext > 6 || (fl && m > 2)) return false;
    m = pow(m > 1 ? m : 1, (double)ext);
  } else {
    m = m + log((double)ext + 1) + 1;
  }
  int dd = norm_dim(g, d, n);
  if (coin(g, 0.5)) snprintf(st->e, sizeof st->e, "%s(%s, %d)", f, a->name, dd);
  else snprintf(st->e, sizeof st->e, "%s.%s(%s%d)", a->name, f, coin(g, 0.3) ? "dim=" : "", dd);
  return fin(r, m);
}

/* A statistic over trailing dims broadcast back over them (pass
 * row-group's row groups): a - a.mean/amax/amin(dims, keepdim=true), or
 * an RMS normalization a * rsqrt((a * a).mean(dims, keepdim=true) + eps). */
static bool g_rowstat(Gen *g, Stmt *st) {
  Val *a = pick(g, float_val);
  if (!a || a->rank < 2) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->exact = false;
  r->contig = a->contig; /* an elementwise result keeps the input's layout */
  g->pending_reduce = true;
  int n = a->rank, m = rint_(g, 1, n - 1 < 2 ? n - 1 : 2);
  char ds[64] = "";
  size_t at = 0;
  int64_t cnt = 1;
  for (int d = n - m; d < n; d++) {
    at += (size_t)snprintf(ds + at, sizeof ds - at, "%s%d", d > n - m ? ", " : "", norm_dim(g, d, n));
    cnt *= dim_val(g, a->d[d]);
  }
  if (cnt < 1) return false;
  if (coin(g, 0.3)) {
    snprintf(st->e, sizeof st->e, "%s * rsqrt((%s * %s).mean(dim=[%s], keepdim=true) + 1e-5)",
             a->name, a->name, a->name, ds);
    return fin(r, sqrt((double)cnt) + 1);
  }
  static const char *const fs[] = {"mean", "amax", "amin"};
  snprintf(st->e, sizeof st->e, "%s - %s.%s(dim=[%s], keepdim=true)", a->name, a->name,
           fs[rint_(g, 0, 2)], ds);
  return fin(r, 2 * a->mag);
}

static bool mm_ok(const Gen *g, const Val *v) {
  (void)g;
  return !v->scalar && v->rank >= 1 && v->rank <= 3 &&
         (is_float(v->dt) || v->dt == DT_I32 || v->dt == DT_I64);
}

static bool g_matmul(Gen *g, Stmt *st) {
  Val *a = pick(g, mm_ok);
  if (!a || a->mag > 100) return false;
  Val *r = &st->r;
  set_like(r, a);
  Dim k = a->d[a->rank - 1], bd[PG_MAXR];
  int brank = rint_(g, 1, 3);
  if (a->rank == 3 && brank == 3) bd[0] = coin(g, 0.5) ? a->d[0] : lit(1);
  else if (brank == 3) bd[0] = lit(rint_(g, 1, 3));
  Dim mcol = coin(g, 0.3) ? rand_dim(g, true) : lit(rint_(g, 1, 4));
  if (brank == 1) bd[0] = k;
  else bd[brank - 2] = k, bd[brank - 1] = mcol;
  Val *b = new_param(g, a->dt, brank, bd, coin(g, 0.3) ? LAYOUT_STRIDED : LAYOUT_CONTIGUOUS);
  if (!b) return false;
  /* result shape: torch.matmul */
  r->rank = 0;
  if (a->rank == 1 && brank == 1) {
  } else if (a->rank == 1) {
    for (int i = 0; i < brank - 2; i++) r->d[r->rank++] = bd[i];
    r->d[r->rank++] = mcol;
  } else if (brank == 1) {
    for (int i = 0; i < a->rank - 1; i++) r->d[r->rank++] = a->d[i];
  } else {
    int ra = a->rank - 2, rb = brank - 2;
    Dim batch[PG_MAXR];
    memcpy(batch, a->d, sizeof(Dim) * (size_t)ra);
    if (!bcast(&ra, batch, rb, bd)) return false;
    for (int i = 0; i < ra; i++) r->d[r->rank++] = batch[i];
    r->d[r->rank++] = a->d[a->rank - 2];
    r->d[r->rank++] = mcol;
  }
  r->contig = true, r->exact = !is_float(a->dt);
  if (is_float(a->dt)) g->pending_reduce = true;
  snprintf(st->e, sizeof st->e, coin(g, 0.6) ? "%s @ %s" : "matmul(%s, %s)", a->name, b->name);
  return fin(r, a->mag * 2 * (double)dim_val(g, k));
}

/* The layers (frontend/sema_layers.c): linear (and its einsum) over a
 * matmul-able value, rms_norm and group_norm of a float value, batch_norm
 * with a positive variance. */
static bool g_linear(Gen *g, Stmt *st) {
  Val *a = pick(g, mm_ok);
  if (!a || a->mag > 100) return false;
  Val *r = &st->r;
  set_like(r, a);
  Dim k = a->d[a->rank - 1], wd[2] = {lit(rint_(g, 1, 5)), k};
  Val *w = new_param(g, a->dt, 2, wd, coin(g, 0.3) ? LAYOUT_STRIDED : LAYOUT_CONTIGUOUS);
  if (!w) return false;
  r->d[a->rank - 1] = wd[0];
  r->contig = true, r->exact = !is_float(a->dt);
  if (is_float(a->dt)) g->pending_reduce = true;
  if (coin(g, 0.3)) {
    snprintf(st->e, sizeof st->e, "einsum(\"...k,nk->...n\", %s, %s)", a->name, w->name);
    return fin(r, a->mag * 2 * (double)dim_val(g, k));
  }
  char extra[32] = "";
  if (coin(g, 0.6)) {
    Val *b = new_param(g, a->dt, 1, wd, LAYOUT_CONTIGUOUS);
    if (!b) return false;
    snprintf(extra, sizeof extra, ", %s", b->name);
  }
  snprintf(st->e, sizeof st->e, "linear(%s, %s%s)", a->name, w->name, extra);
  return fin(r, a->mag * 2 * (double)dim_val(g, k) + 2);
}

static bool chan_val(const Gen *g, const Val *v) { return float_val(g, v) && v->rank >= 2; }

static bool g_layer_norm(Gen *g, Stmt *st) {
  Val *a = pick(g, chan_val);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->exact = false;
  g->pending_reduce = true;
  int n = a->rank, k = rint_(g, 0, 2);
  Dim c = a->d[1];
  char extra[64] = "";
  if (k == 0) { /* rms_norm over the last one or two dims */
    int m = rint_(g, 1, 2);
    char ns[128];
    dims_str(a->d + n - m, m, ns, sizeof ns);
    int64_t cnt = 1;
    for (int i = n - m; i < n; i++) cnt *= dim_val(g, a->d[i]);
    if (cnt < 2) return false;
    double wm = 1;
    if (coin(g, 0.5)) {
      Val *w = new_param(g, a->dt, m, a->d + n - m, LAYOUT_CONTIGUOUS);
      if (!w) return false;
      snprintf(extra, sizeof extra, ", %s", w->name);
      wm = 2;
    }
    snprintf(st->e, sizeof st->e, "rms_norm(%s, [%s]%s)", a->name, ns, extra);
    return fin(r, sqrt((double)cnt) * wm);
  }
  Val *w = NULL, *b = NULL;
  if (coin(g, 0.6) && !(w = new_param(g, a->dt, 1, &c, LAYOUT_CONTIGUOUS))) return false;
  if (coin(g, 0.6) && !(b = new_param(g, a->dt, 1, &c, LAYOUT_CONTIGUOUS))) return false;
  if (w && b) snprintf(extra, sizeof extra, ", %s, %s", w->name, b->name);
  else if (w || b) snprintf(extra, sizeof extra, ", %s=%s", w ? "weight" : "bias", w ? w->name : b->name);
  double wm = w ? 2 : 1, bm = b ? 2 : 0;
  r->contig = a->contig && n != 4; /* channels-last-like inputs keep their format */
  if (k == 1) { /* group_norm: groups of at least 2 elements */
    if (!is_lit(c)) return false;
    int64_t gs[3] = {1, c.c % 2 == 0 ? 2 : 1, c.c}, grp = gs[rint_(g, 0, 2)];
    int64_t cnt = c.c / grp;
    for (int i = 2; i < n; i++) cnt *= dim_val(g, a->d[i]);
    if (cnt < 2) return false;
    snprintf(st->e, sizeof st->e, "group_norm(%s, %lld%s)", a->name, (long long)grp, extra);
    return fin(r, sqrt((double)cnt) * wm + bm);
  }
  Val *m = new_param(g, a->dt, 1, &c, LAYOUT_CONTIGUOUS);
  Val *v = m ? new_param(g, a->dt, 1, &c, LAYOUT_CONTIGUOUS) : NULL;
  if (!v) return false;
  snprintf(st->e, sizeof st->e, "batch_norm(%s, %s, %s.abs() + 0.5%s)", a->name, m->name,
           v->name, extra);
  return fin(r, (a->mag + 2) * 1.5 * wm + bm);
}

static bool conv_ok(const Gen *g, const Val *v) {
  (void)g;
  return !v->scalar && v->rank == 4 && is_float(v->dt) && is_lit(v->d[2]) && is_lit(v->d[3]);
}

static bool g_conv(Gen *g, Stmt *st) {
  Val *x = pick(g, conv_ok);
  if (!x || x->mag > 100) return false;
  Val *r = &st->r;
  set_like(r, x);
  Dim c = x->d[1];
  int groups = 1;
  if (is_lit(c) && c.c % 2 == 0 && coin(g, 0.3)) groups = 2;
  int kh = rint_(g, 1, 3), kw = rint_(g, 1, 3), s = rint_(g, 1, 2), p = rint_(g, 0, 1),
      dl = rint_(g, 1, 2), o = groups * rint_(g, 1, 2);
  int64_t H = x->d[2].c, W = x->d[3].c;
  int64_t ho = (H + 2 * p - dl * (kh - 1) - 1) / s + 1, wo = (W + 2 * p - dl * (kw - 1) - 1) / s + 1;
  if (H + 2 * p - dl * (kh - 1) - 1 < 0 || W + 2 * p - dl * (kw - 1) - 1 < 0) return false;
  Dim wd[4] = {lit(o), groups == 1 ? c : lit(c.c / groups), lit(kh), lit(kw)};
  Val *w = new_param(g, x->dt, 4, wd, coin(g, 0.3) ? LAYOUT_CHANNELS_LAST : LAYOUT_CONTIGUOUS);
  if (!w) return false;
  char args[160];
  int at = snprintf(args, sizeof args, "%s, %s", x->name, w->name);
  if (coin(g, 0.4)) {
    Dim bd = lit(o);
    Val *b = new_param(g, x->dt, 1, &bd, LAYOUT_CONTIGUOUS);
    if (!b) return false;
    at += snprintf(args + at, sizeof args - (size_t)at, ", %s", b->name);
  }
  if (s != 1 || coin(g, 0.2)) at += snprintf(args + at, sizeof args - (size_t)at, ", stride=%d", s);
  if (p) at += snprintf(args + at, sizeof args - (size_t)at, ", padding=%d", p);
  if (dl != 1) at += snprintf(args + at, sizeof args - (size_t)at, ", dilation=%d", dl);
  if (groups != 1) snprintf(args + at, sizeof args - (size_t)at, ", groups=%d", groups);
  r->d[1] = lit(o), r->d[2] = lit(ho), r->d[3] = lit(wo);
  r->contig = false, r->exact = false;
  g->pending_reduce = true;
  snprintf(st->e, sizeof st->e, "conv2d(%s)", args);
  return fin(r, x->mag * 2 * (double)(dim_val(g, c) * kh * kw) + 2);
}

static bool pool_ok(const Gen *g, const Val *v) {
  (void)g;
  return !v->scalar && (v->rank == 4 || v->rank == 3) && is_float(v->dt) &&
         is_lit(v->d[v->rank - 1]) && is_lit(v->d[v->rank - 2]);
}

static bool g_pool(Gen *g, Stmt *st) {
  Val *x = pick(g, pool_ok);
  if (!x) return false;
  Val *r = &st->r;
  set_like(r, x);
  int n = x->rank, k = rint_(g, 0, 4);
  r->contig = false;
  if (k == 0) {
    r->d[n - 1] = r->d[n - 2] = lit(1);
    r->exact = false, g->pending_reduce = true;
    snprintf(st->e, sizeof st->e, "adaptive_avg_pool2d(%s, 1)", x->name);
    return fin(r, x->mag);
  }
  bool mx = k <= 2;
  int kh = rint_(g, 1, 3), kw = coin(g, 0.7) ? kh : rint_(g, 1, 3), s = rint_(g, 1, 2);
  int p = rint_(g, 0, 1);
  if (2 * p > kh || 2 * p > kw) p = 0;
  int64_t H = x->d[n - 2].c, W = x->d[n - 1].c;
  if (H + 2 * p < kh || W + 2 * p < kw) return false;
  r->d[n - 2] = lit((H + 2 * p - kh) / s + 1);
  r->d[n - 1] = lit((W + 2 * p - kw) / s + 1);
  char ks[24];
  if (kh == kw) snprintf(ks, sizeof ks, "%d", kh);
  else snprintf(ks, sizeof ks, "[%d, %d]", kh, kw);
  char extra[48] = "";
  if (s != kh || s != kw || coin(g, 0.3)) snprintf(extra, sizeof extra, ", stride=%d", s);
  else if (kh != kw) return false; /* default stride = kernel: keep it simple */
  if (p) snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", padding=%d", p);
  if (!mx) r->exact = false, g->pending_reduce = true;
  snprintf(st->e, sizeof st->e, "%s(%s, %s%s)", mx ? "max_pool2d" : "avg_pool2d", x->name, ks,
           extra);
  return fin(r, x->mag);
}

/* pad(x, [l, r], mode=...) of the last dim (a literal size): data
 * movement, exact. */
static bool pad_ok(const Gen *g, const Val *v) {
  (void)g;
  return !v->scalar && v->rank >= 1 && is_lit(v->d[v->rank - 1]) && v->d[v->rank - 1].c >= 1;
}

static bool g_pad(Gen *g, Stmt *st) {
  Val *x = pick(g, pad_ok);
  if (!x) return false;
  static const char *const modes[4] = {"constant", "reflect", "replicate", "circular"};
  int m = rint_(g, 0, 3), n = x->rank;
  int64_t W = x->d[n - 1].c;
  if (m && (n < 2 || n > 3 || x->dt == DT_BOOL)) m = 0;
  int64_t hi = m == 1 ? W - 1 : m == 3 ? (W < 3 ? W : 3) : 3;
  int64_t l = rint_(g, m == 0 ? -1 : 0, (int)hi), r = rint_(g, m == 0 ? -1 : 0, (int)hi);
  if (W + l + r < 1) return false;
  Val *res = &st->r;
  set_like(res, x);
  res->contig = false;
  res->d[n - 1] = lit(W + l + r);
  if (m == 0 && coin(g, 0.5))
    snprintf(st->e, sizeof st->e, "pad(%s, [%lld, %lld], value=%s)", x->name, (long long)l,
             (long long)r, x->dt == DT_BOOL ? "1" : "2");
  else
    snprintf(st->e, sizeof st->e, "pad(%s, [%lld, %lld], mode=\"%s\")", x->name, (long long)l,
             (long long)r, modes[m]);
  return fin(res, x->mag + 2);
}

static bool g_factory(Gen *g, Stmt *st) {
  Val *r = &st->r;
  memset(r, 0, sizeof *r);
  r->contig = true, r->exact = true;
  int k = rint_(g, 0, 3);
  r->rank = rint_(g, 1, 3);
  for (int i = 0; i < r->rank; i++) r->d[i] = rand_dim(g, false);
  char ds[128];
  dims_str(r->d, r->rank, ds, sizeof ds);
  r->dt = ALL[rint_(g, 0, 9)];
  if (k == 0) {
    const char *f = coin(g, 0.5) ? "zeros" : "ones";
    snprintf(st->e, sizeof st->e, "%s([%s], %s)", f, ds, dtype_name(r->dt));
    return fin(r, 1);
  }
  if (k == 1) {
    const char *v = r->dt == DT_BOOL ? "true" : is_float(r->dt) ? "1.5" : "-3";
    if (r->dt == DT_U8) v = "7";
    snprintf(st->e, sizeof st->e, "full([%s], %s, %s)", ds, v, dtype_name(r->dt));
    return fin(r, 7);
  }
  r->dt = DT_I64, r->rank = 1;
  if (k == 2) {
    int a = rint_(g, -3, 3), b = a + rint_(g, 1, 8), s = rint_(g, 1, 3);
    r->d[0] = lit((b - a + s - 1) / s);
    snprintf(st->e, sizeof st->e, "arange(%d, %d, %d)", a, b, s);
    return fin(r, 12);
  }
  int n = rint_(g, 1, 3);
  r->d[0] = lit(n);
  char s[64] = "";
  size_t at = 0;
  for (int i = 0; i < n; i++) at += (size_t)snprintf(s + at, sizeof s - at, "%s%d", i ? ", " : "", rint_(g, -5, 5));
  snprintf(st->e, sizeof st->e, "arange(%d)", n);
  if (coin(g, 0.5)) snprintf(st->e, sizeof st->e, "tensor([%s])", s);
  return fin(r, 5);
}

/* The functions that came with the op table (ir/ops.h): unary float
 * functions and activations (a's magnitude bounds the result's), the
 * predicate isfinite, nan_to_num, and binary functions.  Discontinuous
 * ones (trunc, frac, atan2 across the negative axis, copysign's sign)
 * need exact operands, as floor does; fmod is left to the PyTorch cases. */
static bool g_fns(Gen *g, Stmt *st) {
  Val *a = pick(g, any_tensor);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  r->contig = a->contig;
  static const char *const fs[] = {"atan", "asinh", "sinh", "cosh", "exp2", "log2", "log10",
                                   "trunc", "frac", "softplus", "mish", "hardswish",
                                   "hardsigmoid", "leaky_relu", "elu", "hardtanh", "isfinite",
                                   "nan_to_num", "atan2", "hypot", "copysign", "logaddexp",
                                   "lerp"};
  const char *f = fs[rint_(g, 0, 22)];
  DType dt = a->dt;
  bool fl = is_float(dt), method = coin(g, 0.4);
  double m = a->mag;
  char arg[128];
  snprintf(arg, sizeof arg, "%s", a->name);
  if (!strcmp(f, "atan2") || !strcmp(f, "hypot") || !strcmp(f, "copysign") ||
      !strcmp(f, "logaddexp") || !strcmp(f, "lerp")) {
    Val *b = pick(g, any_tensor);
    Opnd o[2];
    opnd_of(&o[0], a);
    opnd_of(&o[1], b);
    if (!bcast2(&o[0], &o[1], &r->rank, r->d)) return false;
    r->contig = false;
    DType pt = result_type(o, 2);
    bool fonly = !strcmp(f, "hypot") || !strcmp(f, "logaddexp") || !strcmp(f, "lerp");
    if (fonly && !is_float(pt)) return false;
    if (!strcmp(f, "lerp")) {
      if (!fl) return false;
      r->dt = dt;
      r->exact = false;
      snprintf(st->e, sizeof st->e, "lerp(%s, %s.to(%s), %s)", a->name, b->name, dtype_name(dt),
               coin(g, 0.5) ? "0.25" : "0.75");
      return fin(r, a->mag > b->mag ? a->mag : b->mag);
    }
    if ((!strcmp(f, "atan2") && !(a->exact && b->exact)) ||
        (!strcmp(f, "copysign") && !b->exact))
      return false;
    r->dt = is_float(pt) ? pt : DT_F32;
    r->exact = false;
    m = !strcmp(f, "atan2") ? 4 : !strcmp(f, "copysign") ? a->mag
        : !strcmp(f, "hypot") ? a->mag + b->mag : (a->mag > b->mag ? a->mag : b->mag) + 1;
    if (method) snprintf(st->e, sizeof st->e, "%s.%s(%s)", a->name, f, b->name);
    else snprintf(st->e, sizeof st->e, "%s(%s, %s)", f, a->name, b->name);
    return fin(r, m);
  }
  bool act = !strcmp(f, "softplus") || !strcmp(f, "mish") || !strcmp(f, "hardswish") ||
             !strcmp(f, "hardsigmoid") || !strcmp(f, "leaky_relu") || !strcmp(f, "elu");
  if (!strcmp(f, "isfinite")) {
    if (fl && !a->exact) return false;
    r->dt = DT_BOOL, r->exact = true, m = 1;
  } else if (!strcmp(f, "nan_to_num")) {
    /* no NaN or inf arises: the values are unchanged */
  } else if (!strcmp(f, "trunc") || !strcmp(f, "frac")) {
    if (dt == DT_BOOL || (fl && !a->exact) || (!fl && !strcmp(f, "frac"))) return false;
    m = !strcmp(f, "frac") ? 1 : m;
  } else if (!strcmp(f, "hardtanh")) {
    if (dt == DT_BOOL || dt == DT_U8) return false;
    snprintf(st->e, sizeof st->e, "hardtanh(%s%s)", arg, fl ? "" : ", -2, 3");
    r->exact = !fl || a->exact;
    return fin(r, fl ? 1 : 3);
  } else if (act) {
    if (!fl) return false;
    r->exact = false;
    m = !strcmp(f, "hardsigmoid") ? 1 : m + 1;
    if (!strcmp(f, "softplus")) snprintf(st->e, sizeof st->e, "softplus(%s, beta=2)", arg);
    else if (!strcmp(f, "leaky_relu")) snprintf(st->e, sizeof st->e, "leaky_relu(%s, 0.1)", arg);
    else snprintf(st->e, sizeof st->e, "%s(%s)", f, arg);
    return fin(r, m);
  } else {
    if (!fl) r->dt = DT_F32;
    r->exact = false;
    if (!strcmp(f, "sinh") || !strcmp(f, "cosh") || !strcmp(f, "exp2")) {
      if (m > 4) snprintf(arg, sizeof arg, "%s.clamp(-4, 4)", a->name), m = 4;
      m = exp(m) + 1;
    } else if (!strcmp(f, "log2") || !strcmp(f, "log10")) {
      if (m > 100) return false;
      snprintf(arg, sizeof arg, "(%s * %s + 1)", a->name, a->name);
      m = log2(m * m + 2) + 1;
    } else {
      m = !strcmp(f, "atan") ? 2 : log(2 * m + 1) + 1;
    }
  }
  if (method) snprintf(st->e, sizeof st->e, "%s.%s()", arg, f);
  else snprintf(st->e, sizeof st->e, "%s(%s)", f, arg);
  return fin(r, m);
}

/* Whether b can join a along dim i in cat: same rank, equal dims but
 * along i, where both are the same monomial (their sum is one). */
static bool joins(const Val *a, const Val *b, int i) {
  if (b->scalar || b->rank != a->rank) return false;
  for (int j = 0; j < a->rank; j++)
    if (j != i && !dim_eq(a->d[j], b->d[j])) return false;
  return !memcmp(a->d[i].e, b->d[i].e, sizeof a->d[i].e);
}

/* cat/concat/stack of values of one shape, split/chunk pieces. */
static bool g_join(Gen *g, Stmt *st) {
  Val *a = pick(g, ranked);
  if (!a) return false;
  Val *r = &st->r;
  set_like(r, a);
  int i = rint_(g, 0, a->rank - 1), k = rint_(g, 0, 3);
  if (k <= 1) { /* cat of a with values that join it, or stack */
    bool stack = k == 1 && a->rank < PG_MAXR;
    char list[256];
    size_t at = (size_t)snprintf(list, sizeof list, "%s", a->name);
    int n = 1;
    bool contig = a->contig;
    for (int t = 0; t < 8 && n < 3; t++) {
      Val *b = pick(g, ranked);
      if (!b || !joins(a, b, i) || (stack && !dim_eq(a->d[i], b->d[i]))) continue;
      at += (size_t)snprintf(list + at, sizeof list - at, ", %s", b->name);
      contig = contig && b->contig;
      r->dt = dtype_promote(r->dt, b->dt);
      r->exact = r->exact && b->exact;
      r->mag = r->mag > b->mag ? r->mag : b->mag;
      if (!stack) r->d[i].c += b->d[i].c;
      n++;
    }
    if (stack) {
      memmove(&r->d[i + 1], &a->d[i], sizeof(Dim) * (size_t)(a->rank - i));
      r->d[i] = lit(n);
      r->rank++;
    }
    /* PyTorch's cat keeps a memory format all its inputs share
     * (channels-last inputs give a channels-last result): row-major only
     * when every input is */
    r->contig = contig;
    if (r->dt != a->dt && is_float(r->dt) && !is_float(a->dt)) r->exact = false;
    static const char *const fns[] = {"cat", "concat", "cat"};
    snprintf(st->e, sizeof st->e, "%s([%s], %s%d)", stack ? "stack" : fns[rint_(g, 0, 2)], list,
             coin(g, 0.3) ? "dim=" : "", norm_dim(g, i, r->rank));
    return fin(r, r->mag);
  }
  /* a piece: chunk(n) of a dim whose coefficient n divides, or split of
   * a literal dim */
  int64_t c = a->d[i].c;
  int n = rint_(g, 2, 3);
  if (c % n != 0 && !is_lit(a->d[i])) return false;
  if (k == 2 && c % n == 0) {
    int j = rint_(g, 0, n - 1);
    r->d[i].c = c / n;
    snprintf(st->e, sizeof st->e, "%s.chunk(%d, %d)[%d]", a->name, n, norm_dim(g, i, a->rank),
             j - (coin(g, 0.3) ? n : 0));
  } else if (is_lit(a->d[i]) && c >= 1) {
    int64_t sz = rint_(g, 1, (int)(c < 4 ? c : 4)), np = (c + sz - 1) / sz;
    int64_t j = rint_(g, 0, (int)np - 1);
    r->d[i] = lit(j == np - 1 ? c - sz * (np - 1) : sz);
    snprintf(st->e, sizeof st->e, "split(%s, %lld, %d)[%lld]", a->name, (long long)sz,
             norm_dim(g, i, a->rank), (long long)j);
  } else {
    return false;
  }
  r->contig = a->contig && i == 0;
  return true;
}

typedef bool (*GenFn)(Gen *, Stmt *);
static const struct {
  GenFn f;
  int w;
} GENS[] = {{g_view, 3},  {g_permute, 2}, {g_index, 3},  {g_misc_view, 4}, {g_copy, 2},
            {g_binary, 6}, {g_unary, 4},  {g_quantize, 1}, {g_func2, 3},  {g_reduce, 3},    {g_norm, 1}, {g_stats, 1}, {g_scan, 2},
            {g_matmul, 1}, {g_conv, 1},   {g_pool, 1},   {g_factory, 1}, {g_fns, 2},
            {g_gather, 2}, {g_join, 2}, {g_linear, 1}, {g_layer_norm, 1}, {g_rowstat, 1}, {g_pad, 1}};

static bool statement(Gen *g) {
  int tot = 0;
  for (size_t i = 0; i < sizeof GENS / sizeof GENS[0]; i++) tot += GENS[i].w;
  for (int attempt = 0; attempt < 60; attempt++) {
    int np = g->p->nparams, nv = g->nv, pick_w = rint_(g, 0, tot - 1);
    size_t i = 0;
    while (pick_w >= GENS[i].w) pick_w -= GENS[i++].w;
    Stmt st;
    memset(&st, 0, sizeof st);
    g->pending_reduce = false;
    bool ok = GENS[i].f(g, &st) && g->nv < MAXV;
    if (ok && numel(g, &st.r) > 10000) ok = false;
    if (!ok) {
      g->p->nparams = np, g->nv = nv;
      continue;
    }
    g->reduce = g->reduce || g->pending_reduce;
    st.r.prec = expr_prec(g, st.e, st.r.dt);
    Val *v = &g->v[g->nv++];
    *v = st.r;
    v->scalar = false;
    snprintf(v->name, sizeof v->name, "v%d", g->nstmt++);
    emit(g, "  %s = %s\n", v->name, st.e);
    return true;
  }
  return false;
}

static void type_str(const Gen *g, const Val *v, char *buf, size_t n) {
  (void)g;
  char ds[256];
  dims_str(v->d, v->rank, ds, sizeof ds);
  snprintf(buf, n, "%s[%s]", dtype_name(v->dt), ds);
}

static void render(Gen *g) {
  PgProgram *p = g->p;
  size_t at = (size_t)snprintf(p->text, sizeof p->text, "kernel k(");
  for (int i = 0; i < p->nparams; i++) {
    const PgParam *q = &p->params[i];
    const Val *v = NULL;
    for (int j = 0; j < g->nv; j++)
      if (!strcmp(g->v[j].name, q->name)) v = &g->v[j];
    char t[300];
    if (!q->is_tensor) snprintf(t, sizeof t, "%s", dtype_name(q->dtype));
    else type_str(g, v, t, sizeof t);
    at += (size_t)snprintf(p->text + at, sizeof p->text - at, "%s%s: %s%s%s", i ? ", " : "",
                           q->name, t, q->layout ? " " : "",
                           q->layout ? layout_name(q->layout) : "");
  }
  /* results: the last statement and up to two earlier ones */
  const Val *res[PG_MAXRES];
  int nr = 0;
  for (int j = g->nv - 1; j >= 0 && nr < 3; j--)
    if ((g->v[j].name[0] == 'v' || (nr && !g->v[j].scalar && coin(g, 0.2))) &&
        (nr == 0 || coin(g, 0.35)))
      res[nr++] = &g->v[j];
  if (nr < 3 && coin(g, 0.1)) res[nr] = res[nr - 1], nr++; /* the same value twice */
  at += (size_t)snprintf(p->text + at, sizeof p->text - at, ") -> %s", nr > 1 ? "(" : "");
  for (int i = 0; i < nr; i++) {
    char t[300];
    type_str(g, res[i], t, sizeof t);
    const char *lay = res[i]->rank == 4 && coin(g, 0.3) ? " channels_last"
                      : res[i]->rank && coin(g, 0.15) ? " strided" : "";
    at += (size_t)snprintf(p->text + at, sizeof p->text - at, "%s%s%s", i ? ", " : "", t, lay);
    p->exact[i] = res[i]->exact;
    static const DType tol[] = {DT_F16, DT_F32, DT_F64, DT_NONE};
    p->tol[i] = is_float(res[i]->dt) ? tol[res[i]->prec] : DT_NONE;
  }
  at += (size_t)snprintf(p->text + at, sizeof p->text - at, "%s {\n%s  return ",
                         nr > 1 ? ")" : "", g->body);
  for (int i = 0; i < nr; i++)
    at += (size_t)snprintf(p->text + at, sizeof p->text - at, "%s%s", i ? ", " : "",
                           res[i]->name);
  snprintf(p->text + at, sizeof p->text - at, "\n}\n");
  p->nresults = nr;
  p->reduce = g->reduce;
}

void progen_generate(uint64_t seed, PgProgram *p) {
  static Gen g;
  memset(&g, 0, sizeof g);
  memset(p, 0, sizeof *p);
  g.s = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
  if (!g.s) g.s = 1;
  for (int i = 0; i < 4; i++) rnext(&g);
  g.p = p;
  make_params(&g);
  int n = rint_(&g, 2, 10);
  for (int i = 0; i < n; i++) statement(&g);
  if (!g.nstmt) { /* always at least one statement */
    Stmt st;
    memset(&st, 0, sizeof st);
    g_factory(&g, &st);
    st.r.prec = expr_prec(&g, st.e, st.r.dt);
    Val *v = &g.v[g.nv++];
    *v = st.r;
    snprintf(v->name, sizeof v->name, "v%d", g.nstmt++);
    emit(&g, "  %s = %s\n", v->name, st.e);
  }
  render(&g);
}
