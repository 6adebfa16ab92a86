/* costs.c — the numbers the passes' cost models use, one row per target
 * family (passes.h PassCosts): "cpu" for host and x86-64*, "cuda" for
 * cuda and cuda:sm_NN.  pipeline_run picks the row from
 * PassOptions.target (pass_costs) and hands it to every pass in
 * PassCtx.costs; choose-layout weighs layouts with it and names it in
 * its decisions ("cost model cuda (built-in): 3000 GB/s, 50000 GFLOP/s"),
 * fuse takes its recompute budget from it.  A row measured on the machine
 * itself (tdslc --calibrate, driver/calibrate.c) comes from a cost file
 * (costs_file.c) and replaces the built-in row of its family when
 * PassOptions.costs points to it.  A new target family adds a row here
 * and a case in pass_costs_family.
 *
 * Needs: passes.h.  Used by: pipeline.c, choose_layout.c, fuse.c. */
#include <stdio.h>
#include <string.h>

#include "passes.h"

static const PassCosts rows[] = {
    /* ---- cpu ----
     * Measured in a private harness (/tmp, not kept) on the 2-core
     * x86-64 (AVX-512) development container, shared with other builds,
     * so rough: kernels `return conv2d(x, w, ...)` with x and the result
     * declared strided, N=32, f32, compiled with tdslc -O2 --layout=nchw
     * and --layout=nhwc, called with NCHW and channels_last x and the
     * output in the conv's layout (no result copy); one thread, minimum
     * process CPU time over 4 calls (wall time was too noisy on the
     * loaded machine), ms:
     *                              conv NCHW          conv channels-last
     *                              x NCHW   x CL      x NCHW   x CL
     *   3x3 pad 1, C=O=64, 56x56   130.7   256.3      138.5   129.1
     *   1x1, C=O=64, 56x56          28.7    33.3       43.9    39.8
     *   7x7/2 pad 3, C=3, O=64,    206.3   339.3      551.9   561.8
     *     224x224
     * At 55 GFLOP/s (gflops below) the 3x3 conv would take 134.5 ms, the
     * 1x1 14.9, the 7x7/2 137.3; the efficiencies are those ratios.
     * Channels-last packs runs of Cg channels per pixel and tap, so few
     * channels per group (C=3) make it slow; NCHW packs vectors of
     * pixels.  The input in the other layout, extra ns per byte of the
     * im2col matrix: an NCHW conv gathers pixels from a channels_last
     * input (3x3: +125.6 ms over 231 MB; 7x7/2: +133 over 236 MB; 1x1:
     * +4.6 over 25.7), a channels-last conv copies runs of channels
     * strided from an NCHW input (3x3: +9.4; 1x1: +4.1).  Throughput of
     * earlier runs: 1.85 GFLOP of 3x3 conv in 33.4 ms (2 threads; one
     * thread of the measurements above reaches the same); a plain
     * 8x64x56x56 f32 copy (12.8 MB read + written) in 0.57 ms (22 GB/s);
     * the same copy into a channels_last output in 3.84 ms (f_strided
     * 6.7).  The fusion budget: exp(x) (cost 9) read twice is cheaper
     * recomputed, exp(exp(x)) (17) stored (tests/unit/test_passes_opt.c
     * fuse_multi_use_budget).
     * Re-derived later for the kernels that replaced the implicit GEMM
     * (on the 2-core AMD EPYC Zen 3 VM, AVX2, loaded by other builds, so
     * as ratios measured side by side):
     *   3x3 over 64 channels runs the direct kernel (cpu/conv_direct.c)
     *     in both layouts: tdslc --calibrate (driver/calibrate.c, whose
     *     kernels then ran the same algorithms as dense programs), five
     *     runs, per-run NCHW rate / channels-last rate 0.70, 0.39, 0.35,
     *     0.57, 0.72: median 0.57, so conv_eff_nchw_kxk 0.57 against
     *     channels-last's 1.00.  bench/run.sh's layout table agrees in
     *     kind (conv3x3_nchw: the --layout=nhwc build, transposes
     *     included, 49.3 ms against 63.9 NCHW); with this row
     *     choose-layout gives that kernel channels-last (NCHW wins only
     *     above an efficiency of about 0.89).
     *   1x1 with an NCHW output is a plain GEMM per image
     *     (cpu/conv_1x1.c); bench's conv1x1 [32,64,56,56], 3 interleaved
     *     rounds, medians: --layout=nchw 29.4 ms, --layout=nhwc (the
     *     channels-last implicit GEMM, unchanged) 53.2 ms, so
     *     conv_eff_nchw_1x1 = 0.375 * 53.2 / 29.4 = 0.68.  (--calibrate's
     *     1x1 case, 4 images that stay in the L3 cache, is not this
     *     shape's: its channels-last times were 2.0-2.2 ms against NCHW
     *     2.5-4.6, while out of cache the NCHW GEMM is 1.8x faster.)
     *   3x3 NCHW with 512-bit vectors (conv_eff_nchw_kxk_512): the direct
     *     kernel's flattened planes (vectors of 16 pixels spanning rows),
     *     on the 2-core Zen 5 VM (AVX-512, load average 9-13 from other
     *     builds, so process CPU time): [32,64,56,56] at one thread,
     *     three interleaved runs of 9 rounds, medians, --layout=nchw
     *     conv3x3_nchw 33.59, 34.12, 33.45 ms against conv3x3_nhwc
     *     (channels-last in and out) 30.78, 31.88, 31.51: after the
     *     2.3 ms of bytes at 22 GB/s, 0.92.  With AVX2 the flattened
     *     form ran slower than the rows (an x86-64-v3 build on the same
     *     machine, [8,64,56,56]: 20.6 ms against 18.1) and is not used:
     *     conv_eff_nchw_kxk stays. */
    {.name = "cpu", .gflops = 55.0, .bw_gbs = 22.0, .f_strided = 6.7,
     .conv_eff_nchw_1x1 = 0.68, .conv_eff_nhwc_1x1 = 0.375,
     .conv_eff_nchw_kxk = 0.57, .conv_eff_nhwc_kxk = 1.00, .conv_eff_nchw_kxk_512 = 0.92,
     .conv_eff_nchw_fewc = 0.665, .conv_eff_nhwc_fewc = 0.244, .few_channels = 16,
     .ns_gather_kxk = 0.55, .ns_gather_1x1 = 0.18, .ns_runs_kxk = 0.04, .ns_runs_1x1 = 0.16,
     .fuse_multi_use_budget = 12},
    /* ---- cuda ----
     * Not measured: datasheet numbers of an H100 SXM, the GPU the CUDA
     * backend is tested on: ~3 TB/s of HBM3 bandwidth (3.35 peak; a copy
     * reaches about 90% of it) and ~50 TFLOP/s of f32 FMA without tensor
     * cores (67 peak; the backend's GEMM, cuda/gemm.c, uses none).
     * Convolutions run as one implicit GEMM (cuda/gemm.c) that reads
     * its input through the same element function in either layout,
     * with no im2col packing step: no per-layout efficiency is known, so
     * both are 1 and packing costs nothing; the choice then rests on
     * the bytes moved.  A read walking the other layout: elementwise
     * nests that transpose run as tiles through shared memory
     * (cuda/nest.c emit_transpose), which keeps both sides coalesced;
     * such a transpose typically reaches 70-90% of a copy's bandwidth,
     * so f_strided is 1.5 (not 6.7: there is no cache-line waste per
     * element).  A reduction or normalization reading the other layout
     * is not tiled and may pay more; the row does not tell them apart.  The fusion budget is doubled: a GPU does about 17 f32
     * FLOPs in the time it moves a byte (50000 / 3000) against 2.5 on
     * the CPU above, so recomputing an expression in each reader costs
     * relatively less than storing it; doubled rather than scaled by 7
     * because the budget also bounds each reader's code size and
     * register pressure (and a GEMM prologue's work per packed
     * element). */
    {.name = "cuda", .gflops = 50000.0, .bw_gbs = 3000.0, .f_strided = 1.5,
     .conv_eff_nchw_1x1 = 1.0, .conv_eff_nhwc_1x1 = 1.0,
     .conv_eff_nchw_kxk = 1.0, .conv_eff_nhwc_kxk = 1.0, .conv_eff_nchw_kxk_512 = 1.0,
     .conv_eff_nchw_fewc = 1.0, .conv_eff_nhwc_fewc = 1.0, .few_channels = 16,
     .ns_gather_kxk = 0, .ns_gather_1x1 = 0, .ns_runs_kxk = 0, .ns_runs_1x1 = 0,
     .fuse_multi_use_budget = 24},
};

const char *pass_costs_family(const char *target) {
  return target && !strncmp(target, "cuda", 4) ? "cuda" : "cpu";
}

const PassCosts *pass_costs(const char *target) {
  return pass_costs_row(pass_costs_family(target));
}

const char *pass_costs_label(const PassCosts *pc, char *buf, size_t n) {
  if (pc->source) snprintf(buf, n, "%s from %s", pc->name, pc->source);
  else snprintf(buf, n, "%s (built-in)", pc->name);
  return buf;
}

const PassCosts *pass_costs_row(const char *name) {
  for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
    if (!strcmp(rows[i].name, name)) return &rows[i];
  ICE("no cost model for target family '%s'", name);
}

const PassCosts *pass_ctx_costs(const PassCtx *c) {
  if (c->costs) return c->costs;
  if (c->opt && c->opt->costs) return c->opt->costs;
  return pass_costs(c->opt ? c->opt->target : NULL);
}
