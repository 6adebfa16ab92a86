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
 *          f_strided times its bytes (a strided walk); broadcast
 *          operands (a stride 0) and strided parameters and results
 *          cost the same either way.
 *   time:  bytes / bw_gbs + conv FLOPs / (gflops * efficiency of the
 *          conv in that layout: 1x1, larger kernels, and larger kernels
 *          over few input channels per group apart) + for a conv whose
 *          input is in the other layout, the packing's extra time per
 *          byte of its im2col matrix (the conv packs from any strides).
 * The cheaper time wins (ties: keep PyTorch's layout); --layout=nchw or
 * nhwc (PassOptions.layout) forces one.  One "layout" decision per group
 * with both estimates and the cost model's row ("cost model cpu
 * (built-in): 22 GB/s, 55 GFLOP/s", or "cost model cpu from FILE: ..."
 * for a calibrated row); its JSON object also carries both estimates,
 * the choice and the row as members (estimates, chose, cost_model).
 * bw_gbs, gflops and the rest come from the target's row of the cost
 * table (costs.c): --target=cuda* weighs with the GPU's, --costs=FILE
 * with a row tdslc --calibrate measured (costs_file.c).
 *
 * Needs: passes.h, ir.h, geometry.h.  Produces: rewritten strides. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ir/geometry.h"
#include "passes.h"

#define PASS "choose-layout"

/* Symbols are estimated at this value. */
#define SYM_GUESS 32

/* The numbers (bandwidth, FLOP rate, conv efficiencies, packing and
 * strided-read costs) are the target's row of the cost table (costs.c,
 * passes.h PassCosts), in Ctx.pc; every decision names the row. */

typedef enum Lay { LAY_NCHW, LAY_CL, LAY_ANY } Lay;

typedef struct Est {
  double bytes, ms;
} Est;

typedef struct Ctx {
  PassCtx *c;
  const PassCosts *pc; /* the target's row of the cost table */
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
  const PassCosts *pc = x->pc;
  double ns = L == LAY_NCHW ? (one ? pc->ns_gather_1x1 : pc->ns_gather_kxk)
                            : (one ? pc->ns_runs_1x1 : pc->ns_runs_kxk);
  return cols * ns * 1e-6;
}

/* Whether NCHW conv v runs the direct kernel's flattened planes
 * (cpu/conv_direct.c flat_use) on a target with 512-bit vectors: stride
 * 1, output rows as wide as the input's (dense rows: their stride is the
 * output's width), at most 3x3 taps. */
static bool flat_nchw(const Ctx *x, const IrValue *v) {
  const IrValue *in = ir_val(x->k, v->args[0]), *w = ir_val(x->k, v->args[1]);
  const PassOptions *o = x->c->opt;
  return o && o->vec_bits >= 512 && sym_is(v->attrs[0], 1) && sym_is(v->attrs[1], 1) &&
         num(x, v->shape[3]) == num(x, in->shape[3]) &&
         num(x, w->shape[2]) * num(x, w->shape[3]) <= 9;
}

/* Efficiency of conv v in layout L (the row's; costs.c says whence). */
static double conv_eff(const Ctx *x, const IrValue *v, Lay L) {
  const PassCosts *pc = x->pc;
  bool cl = L == LAY_CL;
  if (is_1x1(x, v)) return cl ? pc->conv_eff_nhwc_1x1 : pc->conv_eff_nchw_1x1;
  if (num(x, ir_val(x->k, v->args[1])->shape[1]) < pc->few_channels)
    return cl ? pc->conv_eff_nhwc_fewc : pc->conv_eff_nchw_fewc;
  if (!cl && flat_nchw(x, v)) return pc->conv_eff_nchw_kxk_512;
  return cl ? pc->conv_eff_nhwc_kxk : pc->conv_eff_nchw_kxk;
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
    } else e->bytes += read_cost(b, layout_of(x->k, a), L, x->pc->f_strided);
  }
  if (conv) e->ms += conv_flops(x, v) / (x->pc->gflops * 1e9 * conv_eff(x, v, L)) * 1e3;
}

/* Reads of member r by values outside the group and by result copies. */
static void reader_cost(const Ctx *x, int g, IrRef r, Lay L, Est *e) {
  const IrKernel *k = x->k;
  double b = bytes_of(x, ir_val(k, r));
  for (IrRef u = r + 1; u < k->nvalues; u++) {
    const IrValue *v = ir_val(k, u);
    if (x->grp[u] >= 0 && find(x->grp, u) == g) continue;
    for (int j = 0; j < v->nargs; j++)
      if (v->args[j] == r) e->bytes += read_cost(b, LAY_NCHW, L, x->pc->f_strided);
  }
  for (int i = 0; i < k->nresults; i++)
    if (k->results[i].value == r) {
      Layout rl = k->results[i].layout;
      Lay want = rl == LAYOUT_CHANNELS_LAST ? LAY_CL : rl == LAYOUT_STRIDED ? LAY_ANY : LAY_NCHW;
      e->bytes += read_cost(b, want, L, x->pc->f_strided);
    }
}

static Est group_cost(const Ctx *x, int g, Lay L) {
  Est e = {0, 0};
  for (IrRef r = 0; r < x->k->nvalues; r++) {
    if (x->grp[r] < 0 || find(x->grp, r) != g) continue;
    member_cost(x, g, r, L, &e);
    reader_cost(x, g, r, L, &e);
  }
  e.ms += e.bytes / (x->pc->bw_gbs * 1e9) * 1e3;
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

/* An estimated time: "1.25 ms", or below 0.1 ms in microseconds to three
 * digits ("23.2 us", "0.0654 us"), so a GPU's estimates do not all print
 * as 0.00 ms. */
static const char *tm(char *buf, size_t n, double ms) {
  if (ms < 0.1) snprintf(buf, n, "%.3g us", ms * 1e3);
  else snprintf(buf, n, "%.2f ms", ms);
  return buf;
}

/* The decision's JSON members: both estimates, the choice and the cost
 * model's row with where it came from. */
static void report_group_json(Ctx *x, Est cl, Est nchw, Lay chose) {
  char *buf = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&buf, &n);
  if (!f) ICE("out of memory");
  fprintf(f, "\"estimates\": {\"channels_last\": {\"bytes\": %.0f, \"ms\": %.6g}, "
             "\"nchw\": {\"bytes\": %.0f, \"ms\": %.6g}}, \"chose\": \"%s\", "
             "\"cost_model\": {\"row\": ",
          cl.bytes, cl.ms, nchw.bytes, nchw.ms, chose == LAY_CL ? "channels_last" : "nchw");
  report_json_string(f, x->pc->name);
  fputs(", \"source\": ", f);
  if (x->pc->source) report_json_string(f, x->pc->source);
  else fputs("\"built-in\"", f);
  fprintf(f, ", \"bw_gbs\": %.6g, \"gflops\": %.6g}", x->pc->bw_gbs, x->pc->gflops);
  fclose(f);
  report_decision_json(x->c->r, buf);
  free(buf);
}

static void report_group(Ctx *x, IrRef first, int members, Est cl, Est nchw, Lay chose,
                         const char *why) {
  const IrValue *v = ir_val(x->k, first);
  char a[32], b[32], ta[32], tb[32], row[512];
  Lay lin = layout_of(x->k, v->args[0]);
  const char *inl = lin == LAY_CL     ? "channels_last"
                    : lin == LAY_NCHW ? "NCHW"
                                      : "read the same either way";
  Est got = chose == LAY_CL ? cl : nchw, other = chose == LAY_CL ? nchw : cl;
  report_decision(x->c->r, PASS, "layout", v->loc, (int64_t)(other.bytes - got.bytes),
                  "%s at %d:%d (%d value%s): channels-last %s moved, est. %s; NCHW %s, "
                  "%s (input is %s): chose %s%s; cost model %s: %g GB/s, %g GFLOP/s",
                  op_name(v->op), v->loc.line, v->loc.col, members, members == 1 ? "" : "s",
                  mb(a, sizeof a, cl.bytes), tm(ta, sizeof ta, cl.ms),
                  mb(b, sizeof b, nchw.bytes), tm(tb, sizeof tb, nchw.ms), inl,
                  chose == LAY_CL ? "channels-last" : "NCHW", why,
                  pass_costs_label(x->pc, row, sizeof row), x->pc->bw_gbs, x->pc->gflops);
  report_group_json(x, cl, nchw, chose);
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
  Ctx x = {.c = c, .pc = pass_ctx_costs(c), .m = m, .k = k};
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
