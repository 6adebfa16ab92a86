/* calibrate.c — tdslc --calibrate: the CPU row of the cost table
 * (passes.h PassCosts) measured on this machine, written as a cost file
 * (passes/costs_file.c) that --costs=FILE or TDSL_COSTS reads back.
 *
 * The kernels measured are tdsl programs (embedded below) compiled by the
 * project's own pipeline — front end, passes with --layout forced to nchw
 * and to nhwc, codegen, link.c's link_shared — and loaded with dlopen, so
 * the numbers are those of the code the compiler emits today (its conv2d
 * kernels in either layout, its copy loops), not of a model of them:
 *
 *   copy      x.clone(), f32 NCHW -> NCHW           -> bw_gbs
 *   to_cl     x.clone() into a channels_last result -> f_strided
 *   conv3     3x3 pad 1, C = O = 64                 -> gflops, conv_eff_*_kxk
 *                                                      (NCHW: conv_eff_nchw_kxk_512
 *                                                      on a target with 512-bit
 *                                                      vectors, the other kept),
 *                                                      ns_gather_kxk, ns_runs_kxk
 *   conv1     1x1, C = O = 64                       -> conv_eff_*_1x1,
 *                                                      ns_gather_1x1, ns_runs_1x1
 *   conv7     7x7 stride 2 pad 3, C = 3, O = 64     -> conv_eff_*_fewc
 *
 * Each conv runs in both layouts (L) with its input in both (I); every
 * case is timed in rounds, the cases interleaved within a round (so a
 * busy spell on a shared machine hits all of them), and the median of
 * the rounds is kept.  The numbers follow choose-layout's model
 * (choose_layout.c): a time is bytes / bw_gbs + conv FLOPs / (gflops *
 * efficiency) + packing from the other layout, so
 *   bw_gbs     = bytes read + written by copy / its time;
 *   f_strided  = (to_cl's time * bw_gbs - bytes written) / bytes read
 *                (the strided read costs f_strided times its bytes);
 *   a conv's compute time = its time with I = L minus its bytes / bw_gbs
 *                (at least a quarter of the time), its rate = FLOPs / that;
 *   gflops     = the best 3x3 rate of the two layouts (efficiency 1), and
 *                each efficiency = that conv's rate / gflops;
 *   ns_gather  = (time of the NCHW conv with a channels_last input - with
 *                an NCHW one) / bytes of its im2col matrix; ns_runs the
 *                same for the channels-last conv with an NCHW input
 *                (never below 0).
 * few_channels and fuse_multi_use_budget are not measured: they keep the
 * built-in row's values.  The kernels run on the runtime's thread pool
 * at its default thread count (TDSL_NUM_THREADS), as compiled code does.
 *
 * Needs: the front end (ast.h), passes.h, codegen.h, link.h, dlopen, the
 * runtime's header (DLTensor).  Used by: tdslc.c (--calibrate). */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlpack/dlpack.h>

#include "../codegen/codegen.h"
#include "../frontend/ast.h"
#include "../ir/ir.h"
#include "../passes/passes.h"
#include "calibrate.h"
#include "link.h"

#define MAX_ROUNDS 15

/* The conv kernels of layout `suffix` (nchw, nhwc: each module's kernels
 * have their own names), the 7x7/2 one over hw7 x hw7 images, one per
 * input layout (`_nchw`, `_nhwc` after the conv's name): x and the result
 * declared dense in their layouts (the result in the conv's), so each
 * kernel runs the algorithm (loops/conv_algo.c) a program with those
 * layouts gets; declared strided, the NCHW 3x3 and 1x1 convs would run
 * the implicit GEMM instead of the direct kernel and the plain 1x1 GEMM.
 * Malloc'd. */
static char *conv_source(const char *suffix, long long hw7) {
  char *s = NULL;
  size_t n = 0;
  FILE *f = open_memstream(&s, &n);
  if (!f) ICE("out of memory");
  const char *out = strcmp(suffix, "nhwc") ? "" : " channels_last";
  fprintf(f, "# tdslc --calibrate: convolutions (driver/calibrate.c)\n");
  for (int i = 0; i < 2; i++) {
    const char *in = i ? "nhwc" : "nchw", *inl = i ? " channels_last" : "";
    fprintf(f,
            "kernel conv3_%s_%s(x: f32[N, C, H, W]%s, w: f32[O, C, 3, 3]) "
            "-> f32[N, O, H, W]%s {\n"
            "  return conv2d(x, w, padding=1)\n}\n"
            "kernel conv1_%s_%s(x: f32[N, C, H, W]%s, w: f32[O, C, 1, 1]) "
            "-> f32[N, O, H, W]%s {\n"
            "  return conv2d(x, w)\n}\n"
            "kernel conv7_%s_%s(x: f32[N, 3, %lld, %lld]%s, w: f32[O, 3, 7, 7]) "
            "-> f32[N, O, %lld, %lld]%s {\n"
            "  return conv2d(x, w, stride=2, padding=3)\n}\n",
            suffix, in, inl, out, suffix, in, inl, out, suffix, in, hw7, hw7, inl,
            (hw7 + 1) / 2, (hw7 + 1) / 2, out);
  }
  if (fclose(f)) ICE("out of memory");
  return s;
}
static const char copy_src[] =
    "kernel copy(x: f32[N, C, H, W]) -> f32[N, C, H, W] {\n"
    "  return x.clone()\n}\n"
    "kernel to_cl(x: f32[N, C, H, W]) -> f32[N, C, H, W] channels_last {\n"
    "  return x.clone()\n}\n";

typedef int (*Fn1)(const DLTensor *, DLTensor *);
typedef int (*Fn2)(const DLTensor *, const DLTensor *, DLTensor *);

/* A dense f32 rank-4 tensor in NCHW or channels-last order. */
typedef struct Buf {
  DLTensor t;
  int64_t shape[4], strides[4];
} Buf;

typedef struct Lib {
  void *h;
  const char *(*last_error)(void);
} Lib;

typedef struct Case {
  const char *what;
  Lib *lib;
  Fn1 f1;
  Fn2 f2;
  Buf *x, *w, *y;
  double ms[MAX_ROUNDS];
  double med;
} Case;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool buf_init(Buf *b, int64_t n, int64_t c, int64_t h, int64_t w, bool cl,
                     unsigned seed) {
  int64_t s[4] = {n, c, h, w};
  memcpy(b->shape, s, sizeof s);
  if (cl) {
    int64_t st[4] = {h * w * c, 1, w * c, c};
    memcpy(b->strides, st, sizeof st);
  } else {
    int64_t st[4] = {c * h * w, h * w, w, 1};
    memcpy(b->strides, st, sizeof st);
  }
  size_t count = (size_t)(n * c * h * w), bytes = (count * 4 + 63) / 64 * 64;
  float *d = aligned_alloc(64, bytes);
  if (!d) return false;
  for (size_t i = 0; i < count; i++) { /* small values: no denormals, no overflow */
    seed = seed * 1103515245u + 12345u;
    d[i] = (float)((seed >> 16) & 1023) / 1024.0f - 0.5f;
  }
  b->t = (DLTensor){.data = d, .device = {kDLCPU, 0}, .ndim = 4,
                    .dtype = {kDLFloat, 32, 1}, .shape = b->shape, .strides = b->strides};
  return true;
}

static double buf_bytes(const Buf *b) {
  return 4.0 * (double)(b->shape[0] * b->shape[1] * b->shape[2] * b->shape[3]);
}

/* ---- building the kernels -------------------------------------------- */

/* Compiles src (named `name` in messages) at o's level with layout
 * policy lay into DIR/name.so and loads it. */
static bool build(const CalibrateOptions *o, const char *dir, const char *name,
                  const char *src, LayoutPolicy lay, Lib *lib) {
  Arena *a = arena_new();
  Diag d;
  diag_init(&d, name, src, stderr);
  AstProgram *p = parse_program(a, &d, src);
  IrModule *m = p && !d.nerrors ? sema_program(a, &d, p, name) : NULL;
  if (!m || d.nerrors) ICE("the calibration kernels of %s do not compile", name);
  PassOptions po = {.opt_level = o->opt_level, .layout = lay, .target = o->target,
                    .vec_bits = cg_target_vec_bits(o->target)};
  Report *r = report_new(a, name, o->target);
  int status = pipeline_run(m, &po, r);
  size_t n = strlen(dir) + strlen(name) + 8;
  char *obj = malloc(n), *so = malloc(n);
  if (!obj || !so) ICE("out of memory");
  snprintf(obj, n, "%s/%s.o", dir, name);
  snprintf(so, n, "%s/%s.so", dir, name);
  if (!status) {
    CgOptions cg = {.target = o->target, .opt_level = o->opt_level, .emit = CG_OBJ,
                    .stem = obj, .path = obj};
    status = cg_emit(m, &cg);
  }
  if (!status) {
    const char **names = arena_alloc(a, sizeof *names * (size_t)m->nkernels);
    for (int i = 0; i < m->nkernels; i++) names[i] = m->kernels[i]->name;
    status = link_shared(obj, names, m->nkernels, so);
  }
  if (!status) {
    lib->h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!lib->h) {
      fprintf(stderr, "tdslc: error: --calibrate: cannot load '%s': %s\n", so, dlerror());
      status = 1;
    } else {
      *(void **)&lib->last_error = dlsym(lib->h, "tdsl_last_error");
    }
  }
  free(obj);
  free(so);
  arena_free(a);
  return !status;
}

static void *sym(Lib *lib, const char *name) {
  void *f = dlsym(lib->h, name);
  if (!f) ICE("--calibrate: the calibration library lacks '%s'", name);
  return f;
}

/* Stops the library's thread pool (its runtime's workers run its code)
 * and unloads it. */
static void close_lib(Lib *lib) {
  if (!lib->h) return;
  void (*shutdown)(void);
  *(void **)&shutdown = dlsym(lib->h, "tdsl_shutdown");
  if (shutdown) shutdown();
  dlclose(lib->h);
  lib->h = NULL;
}

/* ---- timing ------------------------------------------------------------ */

/* One call's time in ms, or a negative value after a message. */
static double run_case(const Case *c) {
  double t0 = now_ms();
  int rc = c->f2 ? c->f2(&c->x->t, &c->w->t, &c->y->t) : c->f1(&c->x->t, &c->y->t);
  double t = now_ms() - t0;
  if (rc) {
    fprintf(stderr, "tdslc: error: --calibrate: %s failed (%d): %s\n", c->what, rc,
            c->lib->last_error ? c->lib->last_error() : "no message");
    return -1;
  }
  return t;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Warms every case up, then times `rounds` rounds of all cases in turn;
 * each case's median goes to med. */
static bool time_cases(Case *cs, int n, int rounds, int warm) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < warm; j++)
      if (run_case(&cs[i]) < 0) return false;
  for (int r = 0; r < rounds; r++)
    for (int i = 0; i < n; i++)
      if ((cs[i].ms[r] = run_case(&cs[i])) < 0) return false;
  for (int i = 0; i < n; i++) {
    double s[MAX_ROUNDS];
    memcpy(s, cs[i].ms, sizeof s[0] * (size_t)rounds);
    qsort(s, (size_t)rounds, sizeof s[0], cmp_double);
    cs[i].med = rounds % 2 ? s[rounds / 2] : (s[rounds / 2 - 1] + s[rounds / 2]) / 2;
  }
  return true;
}

/* ---- the machine ------------------------------------------------------- */

/* The CPU's name from /proc/cpuinfo ("model name"), else "unknown". */
static void cpu_name(char *buf, size_t n) {
  snprintf(buf, n, "unknown");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10)) continue;
    char *v = strchr(line, ':');
    if (!v) break;
    v++;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = '\0';
    snprintf(buf, n, "%s", v);
    break;
  }
  fclose(f);
}

/* ---- the row ----------------------------------------------------------- */

/* The problem sizes (full and quick). */
typedef struct Sizes {
  int64_t copy[4];
  int64_t n3, c3, hw3; /* 3x3: N, C = O, H = W */
  int64_t n1, c1, hw1; /* 1x1 */
  int64_t n7, o7, hw7; /* 7x7/2 over 3 channels */
  int rounds, warm;
} Sizes;

static const Sizes full = {{8, 64, 128, 128}, 2, 64, 56, 4, 64, 56, 2, 64, 112, 15, 2};
static const Sizes quick = {{2, 64, 64, 64}, 1, 32, 28, 1, 32, 28, 1, 32, 56, 3, 1};

enum { NCHW, CL };

/* One conv shape measured in both layouts with both input layouts. */
typedef struct Conv {
  const char *name; /* conv3, conv1, conv7 */
  int64_t n, c, o, hw, k, stride, pad;
  Buf x[2], w, y[2];
  Case *cs[2][2]; /* [layout][input layout]; NULL: not measured */
  double flops, bytes, cols; /* cols: bytes of the im2col matrix */
} Conv;

static bool conv_init(Conv *v, const char *name, int64_t n, int64_t c, int64_t o,
                      int64_t hw, int64_t k, int64_t stride) {
  *v = (Conv){.name = name, .n = n, .c = c, .o = o, .hw = hw, .k = k, .stride = stride,
              .pad = k / 2};
  int64_t ohw = (hw + 2 * v->pad - k) / stride + 1;
  bool ok = buf_init(&v->x[NCHW], n, c, hw, hw, false, 1) &&
            buf_init(&v->x[CL], n, c, hw, hw, true, 1) && buf_init(&v->w, o, c, k, k, false, 2) &&
            buf_init(&v->y[NCHW], n, o, ohw, ohw, false, 3) &&
            buf_init(&v->y[CL], n, o, ohw, ohw, true, 3);
  v->flops = 2.0 * (double)(c * k * k) * (double)(n * o * ohw * ohw);
  v->bytes = buf_bytes(&v->x[0]) + buf_bytes(&v->w) + buf_bytes(&v->y[0]);
  v->cols = v->flops / (2.0 * (double)o) * 4;
  return ok;
}

static void conv_free(Conv *v) {
  free(v->x[0].t.data);
  free(v->x[1].t.data);
  free(v->w.t.data);
  free(v->y[0].t.data);
  free(v->y[1].t.data);
}

/* The case of v in layout L with input layout I, appended to cs. */
static void conv_case(Conv *v, Lib libs[2], int L, int I, Case *cs, int *n, char *names,
                      size_t namelen) {
  char sym_name[32];
  snprintf(sym_name, sizeof sym_name, "%s_%s_%s", v->name, L == CL ? "nhwc" : "nchw",
           I == CL ? "nhwc" : "nchw");
  char *what = names + (size_t)*n * namelen;
  snprintf(what, namelen, "%s %s conv, %s input", v->name, L == CL ? "channels-last" : "NCHW",
           I == CL ? "channels_last" : "NCHW");
  Case *c = &cs[(*n)++];
  *c = (Case){.what = what, .lib = &libs[L], .x = &v->x[I], .w = &v->w, .y = &v->y[L]};
  *(void **)&c->f2 = sym(&libs[L], sym_name);
  v->cs[L][I] = c;
}

/* A conv's compute rate in layout L, GFLOP/s, given the bandwidth. */
static double conv_rate(const Conv *v, int L, double bw_gbs) {
  double t = v->cs[L][L]->med, mem = v->bytes / (bw_gbs * 1e9) * 1e3;
  double compute = t - mem < t / 4 ? t / 4 : t - mem;
  return v->flops / (compute * 1e-3) / 1e9;
}

/* Extra ns per im2col byte of v in layout L with its input in the other. */
static double conv_pack_ns(const Conv *v, int L) {
  double extra = v->cs[L][!L]->med - v->cs[L][L]->med;
  return extra > 0 ? extra * 1e6 / v->cols : 0;
}

static void comment_conv(FILE *f, const Conv *v) {
  fprintf(f, "#   %s: N=%lld C=%lld O=%lld %lldx%lld k=%lld stride=%lld, %.3g GFLOP; ms "
          "(conv layout / input layout):", v->name, (long long)v->n, (long long)v->c,
          (long long)v->o, (long long)v->hw, (long long)v->hw, (long long)v->k,
          (long long)v->stride, v->flops / 1e9);
  for (int L = 0; L < 2; L++)
    for (int I = 0; I < 2; I++)
      if (v->cs[L][I])
        fprintf(f, " %s/%s %.3f", L ? "CL" : "NCHW", I ? "CL" : "NCHW", v->cs[L][I]->med);
  fputc('\n', f);
}

static int write_file(const CalibrateOptions *o, const PassCosts *pc, const char *machine,
                      const char *date, int threads, int rounds, double copy_ms,
                      double to_cl_ms, double copy_mb, const Conv *convs, int nconvs) {
  bool out = o->out && strcmp(o->out, "-");
  FILE *f = out ? fopen(o->out, "w") : stdout;
  if (!f) {
    fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", o->out, strerror(errno));
    return 1;
  }
  pass_costs_write(f, pc, machine, date);
  fprintf(f, "# Measured by tdslc --calibrate%s (%s, -O%d, %d thread%s): medians of %d "
          "rounds, cases interleaved.\n", o->quick ? "=quick" : "", o->target, o->opt_level,
          threads, threads == 1 ? "" : "s", rounds);
  fprintf(f, "#   copy: %.1f MB read + written in %.3f ms; into channels_last: %.3f ms\n",
          copy_mb, copy_ms, to_cl_ms);
  for (int i = 0; i < nconvs; i++) comment_conv(f, &convs[i]);
  fputs("# few_channels and fuse_multi_use_budget are the built-in row's.\n", f);
  if (out ? ferror(f) | fclose(f) : fflush(f)) {
    fprintf(stderr, "tdslc: error: cannot write '%s': %s\n", out ? o->out : "<stdout>",
            strerror(errno));
    return 1;
  }
  return 0;
}

int calibrate(const CalibrateOptions *o) {
  const Sizes *sz = o->quick ? &quick : &full;
  double t_start = now_ms();
  char *dir = link_tempdir();
  if (!dir) return 1;
  Lib libs[2] = {{0}}, cp = {0};
  char *src[2] = {conv_source("nchw", sz->hw7), conv_source("nhwc", sz->hw7)};
  fprintf(stderr, "tdslc: calibrating: compiling the calibration kernels (%s, -O%d)\n",
          o->target, o->opt_level);
  bool ok = build(o, dir, "calibrate_copy", copy_src, LAYOUT_POLICY_AUTO, &cp) &&
            build(o, dir, "calibrate_nchw", src[NCHW], LAYOUT_POLICY_NCHW, &libs[NCHW]) &&
            build(o, dir, "calibrate_nhwc", src[CL], LAYOUT_POLICY_NHWC, &libs[CL]);
  int status = 1;
  Buf cx = {0}, cy = {0}, ccl = {0};
  Conv convs[3];
  memset(convs, 0, sizeof convs);
  int nconvs = 3;
  if (ok)
    ok = buf_init(&cx, sz->copy[0], sz->copy[1], sz->copy[2], sz->copy[3], false, 4) &&
         buf_init(&cy, sz->copy[0], sz->copy[1], sz->copy[2], sz->copy[3], false, 5) &&
         buf_init(&ccl, sz->copy[0], sz->copy[1], sz->copy[2], sz->copy[3], true, 5);
  if (ok) {
    ok = conv_init(&convs[0], "conv3", sz->n3, sz->c3, sz->c3, sz->hw3, 3, 1) &&
         conv_init(&convs[1], "conv1", sz->n1, sz->c1, sz->c1, sz->hw1, 1, 1) &&
         conv_init(&convs[2], "conv7", sz->n7, 3, sz->o7, sz->hw7, 7, 2);
  }
  if (!ok && libs[CL].h) fprintf(stderr, "tdslc: error: --calibrate: out of memory\n");
  if (ok) {
    enum { MAXC = 16, NAMELEN = 64 };
    Case cs[MAXC];
    char names[MAXC * NAMELEN];
    int n = 0;
    cs[n++] = (Case){.what = "copy", .lib = &cp, .x = &cx, .y = &cy};
    *(void **)&cs[0].f1 = sym(&cp, "copy");
    cs[n++] = (Case){.what = "copy into channels_last", .lib = &cp, .x = &cx, .y = &ccl};
    *(void **)&cs[1].f1 = sym(&cp, "to_cl");
    for (int i = 0; i < nconvs; i++)
      for (int L = 0; L < 2; L++)
        for (int I = 0; I < 2; I++)
          if (convs[i].c >= 16 || I == L) /* the few-channels conv: its own layout only */
            conv_case(&convs[i], libs, L, I, cs, &n, names, NAMELEN);
    fprintf(stderr, "tdslc: calibrating: timing %d cases, %d rounds\n", n, sz->rounds);
    if (time_cases(cs, n, sz->rounds, sz->warm)) {
      PassCosts pc = *pass_costs_row("cpu");
      pc.source = NULL;
      double copy_bytes = 2 * buf_bytes(&cx);
      pc.bw_gbs = copy_bytes / (cs[0].med * 1e-3) / 1e9;
      double f = (cs[1].med * 1e-3 * pc.bw_gbs * 1e9 - buf_bytes(&cx)) / buf_bytes(&cx);
      pc.f_strided = f < 1 ? 1 : f;
      const Conv *k3 = &convs[0], *k1 = &convs[1], *k7 = &convs[2];
      double r3[2] = {conv_rate(k3, NCHW, pc.bw_gbs), conv_rate(k3, CL, pc.bw_gbs)};
      pc.gflops = r3[0] > r3[1] ? r3[0] : r3[1];
      /* with 512-bit vectors the 3x3 NCHW conv runs the flattened planes */
      if (cg_target_vec_bits(o->target) >= 512) pc.conv_eff_nchw_kxk_512 = r3[NCHW] / pc.gflops;
      else pc.conv_eff_nchw_kxk = r3[NCHW] / pc.gflops;
      pc.conv_eff_nhwc_kxk = r3[CL] / pc.gflops;
      pc.conv_eff_nchw_1x1 = conv_rate(k1, NCHW, pc.bw_gbs) / pc.gflops;
      pc.conv_eff_nhwc_1x1 = conv_rate(k1, CL, pc.bw_gbs) / pc.gflops;
      pc.conv_eff_nchw_fewc = conv_rate(k7, NCHW, pc.bw_gbs) / pc.gflops;
      pc.conv_eff_nhwc_fewc = conv_rate(k7, CL, pc.bw_gbs) / pc.gflops;
      pc.ns_gather_kxk = conv_pack_ns(k3, NCHW);
      pc.ns_runs_kxk = conv_pack_ns(k3, CL);
      pc.ns_gather_1x1 = conv_pack_ns(k1, NCHW);
      pc.ns_runs_1x1 = conv_pack_ns(k1, CL);
      char machine[256], date[32];
      cpu_name(machine, sizeof machine);
      time_t now = time(NULL);
      strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
      int (*threads)(void);
      *(void **)&threads = dlsym(cp.h, "tdsl_get_num_threads");
      status = write_file(o, &pc, machine, date, threads ? threads() : 0, sz->rounds,
                          cs[0].med, cs[1].med, copy_bytes / 1e6, convs, nconvs);
      if (!status)
        fprintf(stderr, "tdslc: calibrating: done in %.1f s: %.3g GB/s, %.3g GFLOP/s%s%s\n",
                (now_ms() - t_start) / 1e3, pc.bw_gbs, pc.gflops,
                o->out && strcmp(o->out, "-") ? ", written to " : "",
                o->out && strcmp(o->out, "-") ? o->out : "");
    }
  }
  for (int i = 0; i < nconvs; i++) conv_free(&convs[i]);
  free(cx.t.data);
  free(cy.t.data);
  free(ccl.t.data);
  close_lib(&cp);
  close_lib(&libs[NCHW]);
  close_lib(&libs[CL]);
  link_remove_tempdir(dir);
  free(dir);
  free(src[0]);
  free(src[1]);
  return status;
}
