/* choose_layout.c — pass "choose-layout": NCHW or channels-last storage
 * for convolutions, pools and the elementwise values between them.
 *
 * The storage of a computed value that no view reads is not observable
 * (views are the only ops whose meaning depends on semantic strides;
 * every other reader, and the result copies, follow whatever strides the
 * value has), so the pass may rewrite it to either dense layout.  gemm.c
 * picks the conv GEMM orientation from the output's strides, and
 * lowering loops channels-last nests in N H W C order, so the choice is
 * a real one.
 *
 * Groups: rank-4 conv2d / pool values and the rank-4 elementwise values
 * (and casts) connected to them through direct operands form one group
 * (union-find), which gets one layout — a layout change inside a group
 * would be a transpose for nothing.  Members must be fresh (not params),
 * and no view may read them; everything else is outside and keeps its
 * layout: parameters their declared one, other values their strides,
 * readers outside the group (reductions, norms) read in NCHW order, a
 * result copy in its declared layout's order.
 *
 * Cost of each option, estimated with symbols at SYM_GUESS:
 *   bytes: every member's output written once, every operand read once;
 *          a read in the other layout than the reader's costs
 *          F_STRIDED times its bytes (a strided walk); broadcast
 *          operands (a stride 0) and strided parameters and results
 *          cost the same either way.
 *   time:  bytes / BW_GBS + conv FLOPs / (GFLOPS * efficiency of the
 *          conv in that layout: 1x1, larger kernels, and larger kernels
 *          over few input channels per group apart) + for a conv whose
 *          input is in the other layout, the packing's extra time per
 *          byte of its im2col matrix (the conv packs from any strides).
 * The cheaper time wins (ties: keep PyTorch's layout); --layout=nchw or
 * nhwc (PassOptions.layout) forces one.  One "layout" decision per group
 * with both estimates.
 *
 * Needs: passes.h, ir.h, geometry.h.  Produces: rewritten strides. */
#include <string.h>

#include "../ir/geometry.h"
#include "passes.h"

#define PASS "choose-layout"

/* Symbols are estimated at this value. */
#define SYM_GUESS 32

/* Measured in a private harness (/tmp, not kept) on the 2-core x86-64
 * (AVX-512) development container, shared with other builds, so rough:
 * kernels `return conv2d(x, w, ...)` with x and the result declared
 * strided, N=32, f32, compiled with tdslc -O2 --layout=nchw and
 * --layout=nhwc, called with NCHW and channels_last x and the output in
 * the conv's layout (no result copy); one thread, minimum process CPU
 * time over 4 calls (wall time was too noisy on the loaded machine), ms:
 *                              conv NCHW          conv channels-last
 *                              x NCHW   x CL      x NCHW   x CL
 *   3x3 pad 1, C=O=64, 56x56   130.7   256.3      138.5   129.1
 *   1x1, C=O=64, 56x56          28.7    33.3       43.9    39.8
 *   7x7/2 pad 3, C=3, O=64,    206.3   339.3      551.9   561.8
 *     224x224
 * At GFLOPS (below) the 3x3 conv would take 134.5 ms, the 1x1 14.9, the
 * 7x7/2 137.3; the efficiencies are those ratios.  Channels-last packs
 * runs of Cg channels per pixel and tap, so few channels per group
 * (C=3) make it slow; NCHW packs vectors of pixels. */
#define CONV_EFF_NCHW_1X1 0.52
#define CONV_EFF_NHWC_1X1 0.375
#define CONV_EFF_NCHW_KXK 1.00
#define CONV_EFF_NHWC_KXK 1.00
#define CONV_EFF_NCHW_FEWC 0.665
#define CONV_EFF_NHWC_FEWC 0.244
#define FEW_CHANNELS 16 /* Cg below this: the FEWC efficiencies */
/* The input in the other layout, extra ns per byte of the im2col matrix
 * (N * OH * OW * Cg * KH * KW elements): an NCHW conv gathers pixels
 * from a channels_last input (3x3: +125.6 ms over 231 MB; 7x7/2: +133
 * over 236 MB; 1x1: +4.6 over 25.7), a channels-last conv copies runs of
 * channels strided from an NCHW input (3x3: +9.4; 1x1: +4.1). */
#define NS_GATHER_KXK 0.55
#define NS_GATHER_1X1 0.18
#define NS_RUNS_KXK 0.04
#define NS_RUNS_1X1 0.16
/* The earlier runs' throughput: 1.85 GFLOP of 3x3 conv in 33.4 ms (2
 * threads; one thread of the measurements above reaches the same); a
 * plain 8x64x56x56 f32 copy (12.8 MB read + written) in 0.57 ms. */
#define GFLOPS 55.0
#define BW_GBS 22.0
/* The same copy into a channels_last output took 3.84 ms (F_STRIDED:
 * a read walking the other layout). */
#define F_STRIDED 6.7

typedef enum Lay { LAY_NCHW, LAY_CL, LAY_ANY } Lay;

typedef struct Est {
  double bytes, ms;
} Est;

typedef struct Ctx {
  PassCtx *c;
  IrModule *m;
  IrKernel *k;
  int64_t *env;
  int *grp;       /* per value: union-find parent, -1 not a member */
  bool *viewed;   /* read by a view */
} Ctx;

static int find(int *p, int x) {
  while (p[x] != x) x = p[x] = p[p[x]];
  return x;
}

static double num(const Ctx *x, const Sym *s) {
  int64_t v;
  if (!sym_eval(s, x->env, &v)) return SYM_GUESS;
  return (double)v;
}

static double bytes_of(const Ctx *x, const IrValue *v) {
  double n = dtype_size(v->dtype);
  for (int d = 0; d < v->rank; d++) n *= num(x, v->shape[d]);
  return n;
}

static bool flexible_op(const IrValue *v) {
  OpKind kd = op_kind(v->op);
  if (v->rank != 4) return false;
  return kd == IRK_CONV || kd == IRK_POOL || kd == IRK_UNARY || kd == IRK_BINARY ||
         kd == IRK_COMPARE || kd == IRK_TERNARY || v->op == OP_CAST;
}

/* The layout value a's storage is walked in (rank 4 only). */
static Lay layout_of(const IrKernel *k, IrRef a) {
  const IrValue *v = ir_val(k, a);
  if (v->rank != 4 || !v->stride) return LAY_NCHW;
  for (int d = 0; d < 4; d++)
    if (sym_is(v->stride[d], 0) && !sym_is(v->shape[d], 1)) return LAY_ANY; /* broadcast */
  if (sym_is(v->stride[1], 1) && !sym_is(v->shape[1], 1) && !sym_is(v->stride[3], 1))
    return LAY_CL;
  if (v->op == OP_PARAM) /* a strided one may come in either layout */
    for (int i = 0; i < k->nparams; i++)
      if (k->params[i].value == a && k->params[i].layout == LAYOUT_STRIDED) return LAY_ANY;
  return LAY_NCHW;
}

static bool is_cl(const IrValue *v) {
  return v->stride && sym_is(v->stride[1], 1) && !sym_is(v->shape[1], 1) &&
         !sym_is(v->stride[3], 1);
}

/* ---- groups ---- */

static void mark_views(Ctx *x) {
  for (IrRef r = 0; r < x->k->nvalues; r++) {
    const IrValue *v = ir_val(x->k, r);
    if (op_kind(v->op) == IRK_VIEW) x->viewed[v->args[0]] = true;
  }
}

static void make_groups(Ctx *x) {
  IrKernel *k = x->k;
  for (IrRef r = 0; r < k->nvalues; r++) {
    const IrValue *v = ir_val(k, r);
    x->grp[r] = -1;
    bool fresh = v->op != OP_PARAM && (!v->offset || sym_is(v->offset, 0));
    if (!flexible_op(v) || !fresh || x->viewed[r]) continue;
    x->grp[r] = r;
    for (int j = 0; j < v->nargs; j++) {
      IrRef a = v->args[j];
      if (x->grp[a] >= 0) x->grp[find(x->grp, r)] = find(x->grp, a);
    }
  }
}

/* Whether group g holds a conv or pool (else it is left alone). */
static bool has_anchor(const Ctx *x, int g, IrRef *first) {
  for (IrRef r = 0; r < x->k->nvalues; r++) {
    if (x->grp[r] < 0 || find(x->grp, r) != g) continue;
    OpKind kd = op_kind(ir_val(x->k, r)->op);
    if (kd == IRK_CONV || kd == IRK_POOL) {
      *first = r;
      return true;
    }
  }
  return false;
}

/* ---- costs ---- */

static double conv_flops(const Ctx *x, const IrValue *v) {
  const IrValue *w = ir_val(x->k, v->args[1]);
  double f = 2.0 * num(x, w->shape[1]) * num(x, w->shape[2]) * num(x, w->shape[3]);
  for (int d = 0; d < 4; d++) f *= num(x, v->shape[d]);
  return f;
}

static double read_cost(double b, Lay have, Lay want, double factor) {
  return have == LAY_ANY || have == want ? b : b * factor;
}

static bool is_1x1(const Ctx *x, const IrValue *conv) {
  const IrValue *w = ir_val(x->k, conv->args[1]);
  return sym_is(w->shape[2], 1) && sym_is(w->shape[3], 1);
}

/* Extra ms of conv v (in layout L) packing its input from the other
 * layout. */
static double pack_ms(const Ctx *x, const IrValue *v, Lay L) {
  double cols = conv_flops(x, v) / (2.0 * num(x, v->shape[1])) * dtype_size(v->dtype);
  bool one = is_1x1(x, v);
  double ns = L == LAY_NCHW ? (one ? NS_GATHER_1X1 : NS_GATHER_KXK)
                            : (one ? NS_RUNS_1X1 : NS_RUNS_KXK);
  return cols * ns * 1e-6;
}

/* Efficiency of conv v in layout L (see the measurements above). */
static double conv_eff(const Ctx *x, const IrValue *v, Lay L) {
  bool cl = L == LAY_CL;
  if (is_1x1(x, v)) return cl ? CONV_EFF_NHWC_1X1 : CONV_EFF_NCHW_1X1;
  if (num(x, ir_val(x->k, v->args[1])->shape[1]) < FEW_CHANNELS)
    return cl ? CONV_EFF_NHWC_FEWC : CONV_EFF_NCHW_FEWC;
  return cl ? CONV_EFF_NHWC_KXK : CONV_EFF_NCHW_KXK;
}

/* A member's own reads and write, and its conv time, in layout L. */
static void member_cost(const Ctx *x, int g, IrRef r, Lay L, Est *e) {
  const IrValue *v = ir_val(x->k, r);
  bool conv = op_kind(v->op) == IRK_CONV;
  e->bytes += bytes_of(x, v);
  for (int j = 0; j < v->nargs; j++) {
    IrRef a = v->args[j];
    double b = bytes_of(x, ir_val(x->k, a));
    if (x->grp[a] >= 0 && find(x->grp, a) == g) e->bytes += b;
    else if (conv && j > 0) e->bytes += b; /* weight, bias: layout-free */
    else if (conv) {
      Lay have = layout_of(x->k, a);
      e->bytes += b;
      if (have != LAY_ANY && have != L) e->ms += pack_ms(x, v, L);
    } else e->bytes += read_cost(b, layout_of(x->k, a), L, F_STRIDED);
  }
  if (conv) e->ms += conv_flops(x, v) / (GFLOPS * 1e9 * conv_eff(x, v, L)) * 1e3;
}

/* Reads of member r by values outside the group and by result copies. */
static void reader_cost(const Ctx *x, int g, IrRef r, Lay L, Est *e) {
  const IrKernel *k = x->k;
  double b = bytes_of(x, ir_val(k, r));
  for (IrRef u = r + 1; u < k->nvalues; u++) {
    const IrValue *v = ir_val(k, u);
    if (x->grp[u] >= 0 && find(x->grp, u) == g) continue;
    for (int j = 0; j < v->nargs; j++)
      if (v->args[j] == r) e->bytes += read_cost(b, LAY_NCHW, L, F_STRIDED);
  }
  for (int i = 0; i < k->nresults; i++)
    if (k->results[i].value == r) {
      Layout rl = k->results[i].layout;
      Lay want = rl == LAYOUT_CHANNELS_LAST ? LAY_CL : rl == LAYOUT_STRIDED ? LAY_ANY : LAY_NCHW;
      e->bytes += read_cost(b, want, L, F_STRIDED);
    }
}

static Est group_cost(const Ctx *x, int g, Lay L) {
  Est e = {0, 0};
  for (IrRef r = 0; r < x->k->nvalues; r++) {
    if (x->grp[r] < 0 || find(x->grp, r) != g) continue;
    member_cost(x, g, r, L, &e);
    reader_cost(x, g, r, L, &e);
  }
  e.ms += e.bytes / (BW_GBS * 1e9) * 1e3;
  return e;
}

/* ---- applying ---- */

static bool set_layout(Ctx *x, IrRef r, Lay L) {
  IrValue *v = ir_val(x->k, r);
  GeomCtx gc = {.st = x->m->st, .arena = x->m->arena};
  Geom g;
  if (L == LAY_CL) geom_channels_last(&gc, v->shape, &g);
  else geom_contiguous(&gc, 4, v->shape, &g);
  bool same = v->stride != NULL;
  for (int d = 0; same && d < 4; d++) same = v->stride[d] == g.stride[d];
  if (same) return false;
  v->stride = g.stride;
  return true;
}

static const char *mb(char *buf, size_t n, double bytes) {
  report_format_bytes(buf, n, (int64_t)bytes);
  return buf;
}

static void report_group(Ctx *x, IrRef first, int members, Est cl, Est nchw, Lay chose,
                         const char *why) {
  const IrValue *v = ir_val(x->k, first);
  const IrValue *in = ir_val(x->k, v->args[0]);
  char a[32], b[32];
  Lay lin = layout_of(x->k, v->args[0]);
  const char *inl = lin == LAY_CL     ? "channels_last"
                    : lin == LAY_NCHW ? "NCHW"
                                      : "read the same either way";
  (void)in;
  Est got = chose == LAY_CL ? cl : nchw, other = chose == LAY_CL ? nchw : cl;
  report_decision(x->c->r, PASS, "layout", v->loc, (int64_t)(other.bytes - got.bytes),
                  "%s at %d:%d (%d value%s): channels-last %s moved, est. %.2f ms; NCHW %s, "
                  "%.2f ms (input is %s): chose %s%s", op_name(v->op), v->loc.line,
                  v->loc.col, members, members == 1 ? "" : "s", mb(a, sizeof a, cl.bytes),
                  cl.ms, mb(b, sizeof b, nchw.bytes), nchw.ms, inl,
                  chose == LAY_CL ? "channels-last" : "NCHW", why);
}

/* Decides and applies group g (anchored at `first`). */
static bool choose_group(Ctx *x, int g, IrRef first) {
  Est cl = group_cost(x, g, LAY_CL), nchw = group_cost(x, g, LAY_NCHW);
  LayoutPolicy pol = x->c->opt ? x->c->opt->layout : LAYOUT_POLICY_AUTO;
  Lay chose;
  const char *why = "";
  if (pol == LAYOUT_POLICY_NCHW) chose = LAY_NCHW, why = " (--layout=nchw)";
  else if (pol == LAYOUT_POLICY_NHWC) chose = LAY_CL, why = " (--layout=nhwc)";
  else if (cl.ms < nchw.ms) chose = LAY_CL;
  else if (nchw.ms < cl.ms) chose = LAY_NCHW;
  else chose = is_cl(ir_val(x->k, first)) ? LAY_CL : LAY_NCHW, why = " (a tie: PyTorch's)";
  bool changed = false;
  int members = 0;
  for (IrRef r = 0; r < x->k->nvalues; r++)
    if (x->grp[r] >= 0 && find(x->grp, r) == g) {
      members++;
      changed |= set_layout(x, r, chose);
    }
  if (x->c->r) report_group(x, first, members, cl, nchw, chose, why);
  return changed;
}

bool pass_choose_layout(PassCtx *c) {
  IrModule *m = c->m;
  IrKernel *k = c->k;
  size_t n = (size_t)k->nvalues + 1;
  Ctx x = {.c = c, .m = m, .k = k};
  x.env = arena_alloc(m->arena, sizeof *x.env * (size_t)(k->nsyms + 1));
  for (int i = 0; i < k->nsyms; i++) x.env[i] = SYM_GUESS;
  x.grp = arena_alloc(m->arena, sizeof *x.grp * n);
  x.viewed = arena_alloc(m->arena, n);
  memset(x.viewed, 0, n);
  mark_views(&x);
  make_groups(&x);
  bool changed = false;
  for (IrRef r = 0; r < k->nvalues; r++) {
    IrRef first;
    if (x.grp[r] < 0 || find(x.grp, r) != r || !has_anchor(&x, r, &first)) continue;
    changed |= choose_group(&x, r, first);
  }
  return changed;
}
