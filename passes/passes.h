/* passes.h — the optimization passes between sema and lowering, and the
 * optimization report they write (spec §11).
 *
 * Each pass is one file with one entry point, run by pipeline.c in one
 * straight line:
 *
 *   fold-views        fold_views.c        view chains -> one index map per load
 *   eliminate-copies  eliminate_copies.c  drop copies nobody needs
 *   choose-layout     choose_layout.c     NCHW or channels-last storage
 *   fuse              fuse.c              which values live only inside users
 *   row-group         row_group.c         reductions and their readers run row by row
 *   plan-memory       plan_memory.c       scratch buffers reused by liveness
 *
 * The cost models' numbers (bandwidth, FLOP rate, conv efficiencies,
 * the fusion budget) are one row per target family in costs.c, picked
 * from PassOptions.target by pipeline_run, or read from a cost file that
 * tdslc --calibrate wrote (costs_file.c, PassOptions.costs).
 *
 * A pass rewrites or annotates one kernel of the IR and records every
 * decision it takes in the report (report.c), with the source location
 * of the op it is about and a sentence a user understands.  It returns
 * whether it changed the kernel.  ir_verify() runs after every pass in
 * debug builds and under --dump-after.
 *
 * -O0 runs no pass; -O1 and above run them all, minus --disable-pass. */
#ifndef TDSL_PASSES_H
#define TDSL_PASSES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../ir/ir.h"

typedef enum LayoutPolicy {
  LAYOUT_POLICY_AUTO, /* choose-layout's cost model decides */
  LAYOUT_POLICY_NCHW, /* --layout=nchw */
  LAYOUT_POLICY_NHWC  /* --layout=nhwc */
} LayoutPolicy;

typedef struct PassOptions {
  int opt_level;            /* 0..3 */
  LayoutPolicy layout;
  const char *const *disabled; /* pass names from --disable-pass */
  int ndisabled;
  const char *dump_after;   /* pass name, or NULL */
  FILE *dump;               /* where --dump-after writes the IR */
  bool time_passes;         /* print per-pass times to stderr */
  const char *target;       /* --target: picks the cost model's row
                               (pass_costs; NULL: cpu) and names the
                               target in the report */
  const struct PassCosts *costs; /* --costs / TDSL_COSTS: a calibrated row
                               (costs_file.c) used instead of the
                               target's built-in one; NULL: built-in */
  int vec_bits;             /* the CPU target's vector width where it has
                               one ISA (host, x86-64-vN), else 0 (x86-64's
                               variants, cuda): picks conv_eff_nchw_kxk_512 */
} PassOptions;

/* ---- costs.c: the cost models' numbers, one row per target family ---- */
/* choose-layout estimates a layout's time as bytes / bw_gbs + conv FLOPs
 * / (gflops * the conv's efficiency in that layout) + packing from the
 * other layout (ns per byte of the im2col matrix); a read walking the
 * other layout costs f_strided times its bytes.  fuse recomputes a value
 * read several times (or inlines a GEMM prologue) only while its
 * expression costs at most fuse_multi_use_budget.  costs.c says where
 * each row's numbers come from. */
typedef struct PassCosts {
  const char *name;         /* the target family: "cpu", "cuda" */
  const char *source;       /* NULL: the built-in row; else the cost file
                               it was read from (costs_file.c), which
                               the report names */
  double gflops;            /* f32 conv throughput at efficiency 1, GFLOP/s */
  double bw_gbs;            /* dense copy bandwidth, GB/s (read + written) */
  double f_strided;         /* cost factor of a read walking the other layout */
  /* conv efficiency per layout: 1x1 kernels, larger ones, and larger
   * ones over fewer than few_channels input channels per group */
  double conv_eff_nchw_1x1, conv_eff_nhwc_1x1;
  double conv_eff_nchw_kxk, conv_eff_nhwc_kxk;
  /* NCHW kxk with 512-bit vectors (PassOptions.vec_bits), stride 1 and
   * output rows as wide as the input's, at most 3x3 taps: the direct
   * kernel's flattened planes (cpu/conv_direct.c) */
  double conv_eff_nchw_kxk_512;
  double conv_eff_nchw_fewc, conv_eff_nhwc_fewc;
  int few_channels;
  /* a conv's input in the other layout: extra ns per byte of its im2col
   * matrix, for an NCHW conv gathering from channels_last (gather) and a
   * channels-last conv copying channel runs from NCHW (runs) */
  double ns_gather_kxk, ns_gather_1x1, ns_runs_kxk, ns_runs_1x1;
  int fuse_multi_use_budget; /* expression cost (ops.h op_cost units) */
} PassCosts;

/* The row of --target: cuda and cuda:sm_NN -> "cuda", anything else
 * (host, x86-64*, NULL) -> "cpu". */
const PassCosts *pass_costs(const char *target);
/* The row named `family` (an internal compiler error if there is none). */
const PassCosts *pass_costs_row(const char *family);
/* The family of --target: "cuda" or "cpu". */
const char *pass_costs_family(const char *target);
/* "cpu (built-in)" or "cpu from FILE": how decisions name the row. */
const char *pass_costs_label(const PassCosts *pc, char *buf, size_t n);

/* ---- costs_file.c: cost files (tdslc --calibrate writes them, --costs
 * and TDSL_COSTS read them; the format is in costs_file.c and
 * docs/architecture.md) ---- */
/* The version of the format pass_costs_write writes and parse accepts. */
#define PASS_COSTS_VERSION 1
/* Parses `text` (the contents of `path`, used in messages) into *out:
 * the built-in row of the file's family with the file's values over it,
 * source = a copy of path in arena a.  Every problem is printed to err
 * as "path:line: error: ..." (at most a few); returns false then. */
bool pass_costs_parse(Arena *a, const char *path, const char *text, PassCosts *out,
                      FILE *err);
/* Reads and parses the file at path (a read error is "path: error: ..."). */
bool pass_costs_load(Arena *a, const char *path, PassCosts *out, FILE *err);
/* Writes c as a cost file; machine and date (NULL: left out) go into its
 * header lines. */
void pass_costs_write(FILE *f, const PassCosts *c, const char *machine, const char *date);

typedef struct Report Report;

typedef struct PassCtx {
  IrModule *m;
  IrKernel *k;
  const PassOptions *opt;
  Report *r;
  const PassCosts *costs;   /* the target's row (pass_costs(opt->target)) */
} PassCtx;

/* c->costs, or when a caller built the context itself without one, the
 * row of c->opt->target. */
const PassCosts *pass_ctx_costs(const PassCtx *c);

/* ---- the passes (one file each) ---- */
bool pass_fold_views(PassCtx *c);
bool pass_eliminate_copies(PassCtx *c);
bool pass_choose_layout(PassCtx *c);
bool pass_fuse(PassCtx *c);
bool pass_row_group(PassCtx *c);
bool pass_plan_memory(PassCtx *c);

/* ---- describe.c: values in the user's terms, for decisions ---- */
/* The chain of views from r's storage root to r in PyTorch syntax
 * ("x[0].t()"); the root is its source name, or unnamed, a scalar literal
 * ("2.5") or `op(operands)` ("add(y, 1.0)").  *nviews = the number of
 * views in the chain.  In the arena. */
char *pass_describe(Arena *a, const IrKernel *k, IrRef r, int *nviews);
/* The same, followed by where an unnamed root is: "add(y, 1.0) at 3:12",
 * "the scalar 2.5 at 2:16" (a literal alone). */
char *pass_describe_at(Arena *a, const IrKernel *k, IrRef r);
/* "shape [4, 3] strides [1, 4] offset 0" and "[4, 3]". */
char *pass_geom_text(Arena *a, const IrValue *v);
char *pass_shape_text(Arena *a, const IrValue *v);
/* One view op as applied to its operand: ".view(12)", "[:, 2:5]". */
void pass_put_view_op(FILE *f, const IrValue *v);

/* ---- pipeline.c ---- */
/* The pass table: name and entry point, in pipeline order. */
typedef struct PassInfo {
  const char *name;
  bool (*run)(PassCtx *c);
} PassInfo;
extern const PassInfo pass_table[];
extern const int pass_count;
/* True when `name` is a pass of the table. */
bool pass_known(const char *name);
/* Runs the pipeline over every kernel of m.  Returns 0, or 3 after an
 * internal error (the verifier rejected a pass's output). */
int pipeline_run(IrModule *m, const PassOptions *o, Report *r);

/* ---- report.c ---- */
Report *report_new(Arena *a, const char *file, const char *target);
/* The ISA variants the object carries ("x86-64-v2 x86-64-v3 x86-64-v4"),
 * from the code generator (codegen.h cg_isa_variants); the text and JSON
 * reports list them when there are several. */
void report_set_isa(Report *r, const char *variants);
/* Starts the section of kernel k (decisions go to the current kernel). */
void report_kernel(Report *r, const IrKernel *k);
/* Records a decision.  `bytes` is the traffic it saves (> 0) or costs
 * (< 0), 0 when not applicable. */
void report_decision(Report *r, const char *pass, const char *kind, Loc loc,
                     int64_t bytes, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Same, with bytes as a size expression (a constant is stored as a
 * number; a symbolic one prints as its expression). */
void report_decision_sym(Report *r, const char *pass, const char *kind,
                         Loc loc, const Sym *bytes, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* Attaches more members to the JSON object of the decision recorded
 * last (spec §11's "..."): `members` is JSON text such as
 * "\"estimates\": {...}, \"cost_model\": {...}" (copied). */
void report_decision_json(Report *r, const char *members);
/* s as a JSON string literal, quotes included. */
void report_json_string(FILE *f, const char *s);
void report_pass_time(Report *r, const char *pass, double ms, bool changed);
/* Estimates filled in after lowering: bytes read + written by all loop
 * nests at -O0 and as compiled, loop nests at -O0 and as compiled, and
 * scratch bytes.  Sizes may be symbolic; JSON prints a constant as a
 * number and an expression as a string ("4*N*C"). */
void report_set_totals(Report *r, const IrKernel *k, const Sym *bytes_before,
                       const Sym *bytes_after, int nests_before,
                       int nests_after, const Sym *scratch_bytes);
/* Decisions of `kernel` (NULL: all) from `pass` of `kind` (NULL: any). */
int report_count(const Report *r, const char *kernel, const char *pass,
                 const char *kind);
/* A byte count for people: "512 B", "1.50 MB" (powers of 1000). */
void report_format_bytes(char *buf, size_t n, int64_t bytes);
/* The same in the arena, or "4*N*C bytes" when the count is symbolic. */
const char *report_bytes_str(Arena *a, const Sym *bytes);
void report_write_text(const Report *r, FILE *f);
void report_write_json(const Report *r, FILE *f);

/* ---- report_html.c ---- */
/* Prints the loop form of the kernel named `kernel` as plain text (the
 * page escapes it); ctx is the caller's. */
typedef void (*ReportLoopForm)(FILE *f, const char *kernel, void *ctx);
/* The report as one self-contained HTML page (--emit=report-html):
 * `source` (the program text, NULL: not shown) with each decision marked
 * at its line:col, and per kernel the totals, the decisions, the pass
 * times and, when loop_form is not NULL, the loop form. */
void report_write_html(const Report *r, const char *source,
                       ReportLoopForm loop_form, void *ctx, FILE *f);

#endif
