/* test_codegen_conv.c — the CPU backend's convolution kernels besides
 * the implicit GEMM (cpu/conv.h): the depthwise kernel
 * (cpu/conv_depthwise.c) with channels-last and NCHW outputs, channel
 * counts that are not multiples of the vector width (the masked last
 * vector), stride 2, asymmetric padding (also wider than the kernel
 * reaches: columns of bias alone), dilation, a kernel larger than the
 * input, channel multiplier 2, sliced inputs (gathered lanes), bias and
 * fused epilogues (relu, hardswish, batch norm), unbatched inputs, f64,
 * f16, bf16 and i32; each kernel compiled for the host, for
 * --target=x86-64 (SSE2 vectors) and at -O0, run through the C ABI and
 * compared with the reference interpreter; the same bits at 1 to 3
 * threads; the direct kernel (cpu/conv_direct.c) with the same variety
 * (output channels past the register block: masked; fewer than one
 * vector; NCHW and sliced inputs) in f32, f64, f16, bf16 and i32, for
 * channels-last and for NCHW outputs (vectors of output columns, the
 * border vectors masked; with 512-bit vectors and output rows as wide
 * as the input's row stride, flattened planes whose vectors span rows,
 * taps outside masked); the channels-last register blocks (the rest
 * of a row in blocks of PX / 2, PX / 4 and 2 pixels, border pixels by
 * four channel blocks) with 83 output channels and rows of 18 to 25, and
 * the small-image form (rows of at most 16 columns: blocks of pixels
 * spanning rows by rectangles, taps outside from a zero row; symbolic
 * sizes choosing the form at run time); weights packed by the threads
 * (9 * 512 * 83 elements, a channels-last and an NCHW output); and
 * 1x1 convs at stride 1 with NCHW outputs as a plain GEMM per image
 * (cpu/conv_1x1.c): inputs in either layout, odd channel counts (13 of
 * 7, 37 of 9), batch 3 and unbatched, 3 output channels (the small-M
 * path), a bias with relu after it, an epilogue without bias, f64 and
 * i32, and the fallbacks (a sliced input whose rows are not one dim with
 * its columns, stride 2, an f16 bias) that stay implicit GEMMs; the same
 * 1x1 convs with channels-last outputs (implicit GEMMs below 8 input
 * channels or not f32, else direct: 4 x 6 blocks with 512-bit vectors,
 * symbolic O with a masked block of 64 channels, stride 2 and padding);
 * the loop form naming the algorithm (loops/conv_algo.c).
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources). */
#include "codegen_util.h"

static const char *const FLAGS[] = {"", "--target=x86-64", "-O0"};

/* NHWC storage of shape s (rank 4) or HWC (rank 3), dense. */
static void cl_strides(int rank, const int64_t *s, int64_t *st) {
  int c = rank - 3;
  st[c] = 1, st[rank - 1] = s[c], st[rank - 2] = s[c] * s[rank - 1];
  if (rank == 4) st[0] = s[1] * s[2] * s[3];
}

static void cl_ten(Ten *x, DType d, int rank, const int64_t *s, bool out) {
  int64_t st[4];
  cl_strides(rank, s, st);
  ten(x, d, rank, s, st, 0, false);
  if (out) reset_out(x);
}

/* ---- channels-last -------------------------------------------------------- */

static const char *DW_CL =
    "kernel dcl(x: f32[2, 13, 9, 11] channels_last, w: f32[13, 1, 3, 3], b: f32[13], "
    "w5: f32[13, 1, 5, 5], w2: f32[26, 1, 3, 3], b2: f32[26], y: f32[1, 16, 7, 8] channels_last, "
    "wy: f32[16, 1, 3, 3], m: f32[13], v: f32[13]) -> "
    "(f32[2, 13, 9, 11] channels_last, f32[2, 13, 5, 6] channels_last, "
    "f32[2, 26, 9, 11] channels_last, f32[1, 16, 5, 12] channels_last, "
    "f32[1, 8, 7, 8] channels_last) {\n"
    "  return hardswish(batch_norm(conv2d(x, w, b, padding=1, groups=13), m, abs(v) + 0.5)), "
    "conv2d(x, w5, None, 2, [2, 4], [1, 2], 13), conv2d(x, w2, b2, 1, 1, 1, 13), "
    "hardswish(conv2d(y, wy, None, 1, [0, 3], 1, 16)), "
    "relu(conv2d(y[:, 0:16:2], wy[0:8], None, 1, 1, 1, 8))\n}\n";

START_TEST(depthwise_channels_last) {
  static const int64_t si[10][4] = {{2, 13, 9, 11}, {13, 1, 3, 3}, {13}, {13, 1, 5, 5},
                                    {26, 1, 3, 3}, {26}, {1, 16, 7, 8}, {16, 1, 3, 3},
                                    {13}, {13}};
  static const int rk[10] = {4, 4, 1, 4, 4, 1, 4, 4, 1, 1};
  static const int64_t so[5][4] = {{2, 13, 9, 11}, {2, 13, 5, 6}, {2, 26, 9, 11},
                                   {1, 16, 5, 12}, {1, 8, 7, 8}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DW_CL, "dcl", FLAGS[t]);
    Ten in[10], out[5];
    for (int i = 0; i < 10; i++) {
      if (i == 0 || i == 6) cl_ten(&in[i], DT_F32, 4, si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 5; i++) cl_ten(&out[i], DT_F32, 4, so[i], true);
    run_and_compare_k(&L, "dcl", in, 10, out, 5, false, 25);
    if (t == 0) same_at_threads(&L, "dcl", in, 10, out, 5);
    for (int i = 0; i < 10; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* ---- NCHW ------------------------------------------------------------------- */

static const char *DW_NCHW =
    "kernel dn(x: f32[2, 6, 9, 37], w: f32[6, 1, 3, 3], b: f32[6], w5: f32[6, 1, 5, 5], "
    "w2: f32[12, 1, 3, 3], y: f32[1, 6, 3, 4], w7: f32[6, 1, 7, 7], "
    "u: f32[6, 5, 40]) -> "
    "(f32[2, 6, 9, 37], f32[2, 6, 5, 19], f32[2, 6, 7, 39], f32[2, 12, 9, 37], "
    "f32[2, 6, 9, 19], f32[1, 6, 3, 4], f32[6, 5, 40]) {\n"
    "  return relu(conv2d(x, w, b, padding=1, groups=6)), conv2d(x, w5, None, 2, 2, 1, 6), "
    "conv2d(x, w, None, 1, [1, 2], [2, 1], 6), conv2d(x, w2, None, 1, 1, 1, 6), "
    "conv2d(x[:, :, :, 0:37:2], w, None, 1, 1, 1, 6), hardswish(conv2d(y, w7, None, 1, 3, 1, 6)), "
    "conv2d(u, w, b, 1, 1, 1, 6)\n}\n";

START_TEST(depthwise_nchw) {
  static const int64_t si[8][4] = {{2, 6, 9, 37}, {6, 1, 3, 3}, {6}, {6, 1, 5, 5}, {12, 1, 3, 3},
                                   {1, 6, 3, 4}, {6, 1, 7, 7}, {6, 5, 40}};
  static const int rk[8] = {4, 4, 1, 4, 4, 4, 4, 3};
  static const int64_t so[7][4] = {{2, 6, 9, 37}, {2, 6, 5, 19}, {2, 6, 7, 39}, {2, 12, 9, 37},
                                   {2, 6, 9, 19}, {1, 6, 3, 4}, {6, 5, 40}};
  static const int ro[7] = {4, 4, 4, 4, 4, 4, 3};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DW_NCHW, "dn", FLAGS[t]);
    Ten in[8], out[7];
    for (int i = 0; i < 8; i++) ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    for (int i = 0; i < 7; i++) out_ten(&out[i], DT_F32, ro[i], so[i]);
    run_and_compare_k(&L, "dn", in, 8, out, 7, false, 49);
    if (t == 0) same_at_threads(&L, "dn", in, 8, out, 7);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 7; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* ---- dtypes ----------------------------------------------------------------- */

static const char *DW_DT =
    "kernel dd(a: f64[2, 5, 6, 7] channels_last, wa: f64[5, 1, 3, 3], ba: f64[5], "
    "h: f16[1, 10, 6, 7] channels_last, wh: f16[10, 1, 3, 3], bh: f16[10]) -> "
    "(f64[2, 5, 3, 4] channels_last, f16[1, 10, 6, 7] channels_last, "
    "f16[1, 10, 6, 7] channels_last) {\n"
    "  return conv2d(a, wa, ba, 2, 1, 1, 5), conv2d(h, wh, bh, padding=1, groups=10), "
    "relu(conv2d(h, wh, bh, padding=1, groups=10))\n}\n"
    "kernel de(g: bf16[2, 3, 6, 19], wg: bf16[6, 1, 3, 3], "
    "i: i32[1, 5, 6, 7] channels_last, wi: i32[5, 1, 2, 2], bi: i32[5], "
    "e: f64[1, 3, 6, 7], we: f64[3, 1, 3, 3]) -> "
    "(bf16[2, 6, 6, 19], i32[1, 5, 7, 8] channels_last, f64[1, 3, 6, 7]) {\n"
    "  return conv2d(g, wg, None, 1, 1, 1, 3), conv2d(i, wi, bi, 1, 1, 1, 5), "
    "relu(conv2d(e, we, None, 1, 1, 1, 3))\n}\n";

START_TEST(depthwise_dtypes) {
  static const int64_t si[13][4] = {{2, 5, 6, 7}, {5, 1, 3, 3}, {5}, {1, 10, 6, 7},
                                    {10, 1, 3, 3}, {10}, {2, 3, 6, 19}, {6, 1, 3, 3},
                                    {1, 5, 6, 7}, {5, 1, 2, 2}, {5}, {1, 3, 6, 7}, {3, 1, 3, 3}};
  static const int rk[13] = {4, 4, 1, 4, 4, 1, 4, 4, 4, 4, 1, 4, 4};
  static const DType dt[13] = {DT_F64, DT_F64, DT_F64, DT_F16, DT_F16, DT_F16, DT_BF16,
                               DT_BF16, DT_I32, DT_I32, DT_I32, DT_F64, DT_F64};
  static const int64_t so[6][4] = {{2, 5, 3, 4}, {1, 10, 6, 7}, {1, 10, 6, 7},
                                   {2, 6, 6, 19}, {1, 5, 7, 8}, {1, 3, 6, 7}};
  static const DType dto[6] = {DT_F64, DT_F16, DT_F16, DT_BF16, DT_I32, DT_F64};
  static const bool clo[6] = {true, true, true, false, true, false};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DW_DT, "dd", FLAGS[t]);
    Ten in[13], out[6];
    for (int i = 0; i < 13; i++) {
      if (i == 0 || i == 3 || i == 8) cl_ten(&in[i], dt[i], 4, si[i], false);
      else ten(&in[i], dt[i], rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 6; i++) {
      if (clo[i]) cl_ten(&out[i], dto[i], 4, so[i], true);
      else out_ten(&out[i], dto[i], 4, so[i]);
    }
    run_and_compare_k(&L, "dd", in, 6, out, 3, false, 9);
    run_and_compare_k(&L, "de", in + 6, 7, out + 3, 3, false, 9);
    for (int i = 0; i < 13; i++) ten_free(&in[i]);
    for (int i = 0; i < 6; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* ---- direct (channels-last output, one group) ------------------------------ */

static const char *DR_CL =
    "kernel rc(x: f32[2, 8, 9, 11] channels_last, w: f32[13, 8, 3, 3], b: f32[13], "
    "w5: f32[24, 8, 5, 5], w4: f32[5, 8, 3, 3], y: f32[1, 8, 3, 4] channels_last, m: f32[13], "
    "v: f32[13]) -> "
    "(f32[2, 13, 9, 11] channels_last, f32[2, 24, 5, 6] channels_last, "
    "f32[2, 5, 7, 15] channels_last, f32[1, 13, 5, 6] channels_last, "
    "f32[2, 13, 9, 11] channels_last, f32[2, 13, 9, 6] channels_last) {\n"
    "  return relu(conv2d(x, w, b, padding=1)), conv2d(x, w5, None, 2, [2, 4], [1, 2]), "
    "hardswish(conv2d(x, w4, None, 1, [0, 3])), conv2d(y, w, b, 1, 3, 2), "
    "batch_norm(conv2d(x, w, None, 1, 1), m, abs(v) + 0.5), "
    "conv2d(x[:, :, :, 0:11:2], w, None, 1, 1)\n}\n"
    "kernel rn(x: f32[2, 8, 9, 11], w: f32[13, 8, 3, 3], b: f32[13]) -> "
    "(f32[2, 13, 5, 6] channels_last, f32[2, 13, 9, 11] channels_last) {\n"
    "  return conv2d(x, w, b, 2, 1), relu(conv2d(x, w, b, padding=1))\n}\n";

START_TEST(direct_channels_last) {
  static const int64_t si[8][4] = {{2, 8, 9, 11}, {13, 8, 3, 3}, {13}, {24, 8, 5, 5},
                                   {5, 8, 3, 3}, {1, 8, 3, 4}, {13}, {13}};
  static const int rk[8] = {4, 4, 1, 4, 4, 4, 1, 1};
  static const int64_t so[6][4] = {{2, 13, 9, 11}, {2, 24, 5, 6}, {2, 5, 7, 15},
                                   {1, 13, 5, 6}, {2, 13, 9, 11}, {2, 13, 9, 6}};
  static const int64_t sn[2][4] = {{2, 13, 5, 6}, {2, 13, 9, 11}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DR_CL, "rc", FLAGS[t]);
    Ten in[8], out[6], xn, on[2];
    for (int i = 0; i < 8; i++) {
      if (i == 0 || i == 5) cl_ten(&in[i], DT_F32, 4, si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 6; i++) cl_ten(&out[i], DT_F32, 4, so[i], true);
    run_and_compare_k(&L, "rc", in, 8, out, 6, false, 8 * 25);
    if (t == 0) same_at_threads(&L, "rc", in, 8, out, 6);
    ten(&xn, DT_F32, 4, si[0], NULL, 0, false); /* NCHW input, channels-last outputs */
    Ten rin[3] = {xn, in[1], in[2]};
    for (int i = 0; i < 2; i++) cl_ten(&on[i], DT_F32, 4, sn[i], true);
    run_and_compare_k(&L, "rn", rin, 3, on, 2, false, 72);
    ten_free(&xn), ten_free(&on[0]), ten_free(&on[1]);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 6; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* The direct kernel's register blocks over rows (rows wider than the
 * small-image form's 16 columns): rows whose interior is not a multiple
 * of the pixel block (25 - 2 = 23 = 3 * 6 + 5 and 24 - 2 = 22 sliced,
 * 19 - 2 = 17, 18 - 4 = 14 with two border columns a side), so every
 * rest block (PX / 2, PX / 4, 2, 1 pixels) runs, and 83 output
 * channels: the edge blocks (a border column with PX / 2 interior ones)
 * on both sides, on one (dilation 8 along columns: 25 - 16 = 9 interior
 * columns, room for one edge block of 6 with 512-bit vectors; stride 2
 * over 36 columns: the last column's taps all inside, no right border)
 * and on neither where the interior is too narrow, the other border
 * pixels by four channel blocks at a time (at least 64 channels on
 * AVX2, 32 with SSE2 vectors), then the full blocks left, then the
 * masked last block. */
static const char *DR_BLK =
    "kernel rb(x: f32[2, 16, 7, 25] channels_last, w: f32[83, 16, 3, 3], b: f32[83], "
    "y: f32[1, 16, 5, 19] channels_last, z: f32[1, 16, 4, 36] channels_last) -> "
    "(f32[2, 83, 7, 25] channels_last, f32[2, 83, 7, 25] channels_last, "
    "f32[2, 83, 7, 24] channels_last, f32[1, 83, 5, 19] channels_last, "
    "f32[2, 83, 7, 18] channels_last, f32[2, 83, 7, 25] channels_last, "
    "f32[1, 83, 2, 18] channels_last) {\n"
    "  return relu(conv2d(x, w, b, padding=1)), conv2d(x, w, None, 1, 2, 2), "
    "conv2d(x[:, :, :, 1:25], w, b, padding=1), conv2d(y, w, b, padding=1), "
    "conv2d(x[:, :, :, 0:18], w, None, 1, [1, 2], [1, 2]), "
    "conv2d(x, w, b, 1, [1, 8], [1, 8]), conv2d(z, w, b, 2, 1)\n}\n";

START_TEST(direct_blocks) {
  static const int64_t si[5][4] = {{2, 16, 7, 25}, {83, 16, 3, 3}, {83}, {1, 16, 5, 19},
                                   {1, 16, 4, 36}};
  static const int rk[5] = {4, 4, 1, 4, 4};
  static const int64_t so[7][4] = {{2, 83, 7, 25}, {2, 83, 7, 25}, {2, 83, 7, 24}, {1, 83, 5, 19},
                                   {2, 83, 7, 18}, {2, 83, 7, 25}, {1, 83, 2, 18}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DR_BLK, "rb", FLAGS[t]);
    Ten in[5], out[7];
    for (int i = 0; i < 5; i++) {
      if (i == 0 || i >= 3) cl_ten(&in[i], DT_F32, 4, si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 7; i++) cl_ten(&out[i], DT_F32, 4, so[i], true);
    run_and_compare_k(&L, "rb", in, 5, out, 7, false, 16 * 9);
    if (t == 0) same_at_threads(&L, "rb", in, 5, out, 7);
    for (int i = 0; i < 5; i++) ten_free(&in[i]);
    for (int i = 0; i < 7; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* The small-image form (rows of at most 16 columns): work items of an
 * image by four channel blocks, 83 output channels (two groups, the
 * masked last block in the second), the pixels by rectangles (rows above
 * and below the interior, side columns, interior) in even blocks that
 * span rows (7 x 7, 14 x 14, 3 x 11, 7 x 4), images with no interior (2 x
 * 2 at stride 2, 1 x 5), taps outside the input read from the zero row
 * (padding 1, and 3 a side: columns of bias alone; stride 2, dilation
 * 2), a bias with relu, a sliced input (a column stride of 2 pixels) and
 * an input with symbolic sizes (the form chosen at run time). */
static const char *DR_IMG =
    "kernel ri(x: f32[2, 16, 7, 7] channels_last, w: f32[83, 16, 3, 3], b: f32[83], "
    "y: f32[3, 16, 14, 14] channels_last, u: f32[1, 16, 5, 7] channels_last) -> "
    "(f32[2, 83, 7, 7] channels_last, f32[2, 83, 4, 4] channels_last, "
    "f32[3, 83, 14, 14] channels_last, f32[1, 83, 3, 11] channels_last, "
    "f32[2, 83, 2, 2] channels_last, f32[3, 83, 1, 5] channels_last, "
    "f32[2, 83, 7, 4] channels_last) {\n"
    "  return relu(conv2d(x, w, b, padding=1)), conv2d(x, w, None, 2, 1), "
    "conv2d(y, w, b, padding=1), conv2d(u, w, b, 1, [1, 3], [2, 1]), "
    "conv2d(x, w, b, 2, 0, 2), conv2d(y[:, :, 0:1, 0:9:2], w, None, 1, 1), "
    "conv2d(x[:, :, :, 0:7:2], w, b, padding=1)\n}\n"
    "kernel rs(x: f32[N, 16, H, W] channels_last, w: f32[83, 16, 3, 3]) -> "
    "f32[N, 83, H, W] channels_last {\n"
    "  return conv2d(x, w, padding=1)\n}\n";

START_TEST(direct_image) {
  static const int64_t si[5][4] = {{2, 16, 7, 7}, {83, 16, 3, 3}, {83}, {3, 16, 14, 14},
                                   {1, 16, 5, 7}};
  static const int rk[5] = {4, 4, 1, 4, 4};
  static const int64_t so[7][4] = {{2, 83, 7, 7}, {2, 83, 4, 4}, {3, 83, 14, 14}, {1, 83, 3, 11},
                                   {2, 83, 2, 2}, {3, 83, 1, 5}, {2, 83, 7, 4}};
    /* rs at sizes in (small image) and out of the form (24 columns) */
  static const int64_t ss[2][4] = {{3, 16, 9, 11}, {1, 16, 3, 24}};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DR_IMG, "ri", FLAGS[t]);
    Ten in[5], out[7];
    for (int i = 0; i < 5; i++) {
      if (i == 0 || i == 3 || i == 4) cl_ten(&in[i], DT_F32, rk[i], si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 7; i++) cl_ten(&out[i], DT_F32, 4, so[i], true);
    run_and_compare_k(&L, "ri", in, 5, out, 7, false, 16 * 9);
    if (t == 0) same_at_threads(&L, "ri", in, 5, out, 7);
    for (int s = 0; s < 2; s++) {
      Ten x, o;
      int64_t os_[4] = {ss[s][0], 83, ss[s][2], ss[s][3]};
      cl_ten(&x, DT_F32, 4, ss[s], false);
      cl_ten(&o, DT_F32, 4, os_, true);
      Ten rin[2] = {x, in[1]};
      run_and_compare_k(&L, "rs", rin, 2, &o, 1, false, 16 * 9);
      if (t == 0) same_at_threads(&L, "rs", rin, 2, &o, 1);
      ten_free(&x), ten_free(&o);
    }
    for (int i = 0; i < 5; i++) ten_free(&in[i]);
    for (int i = 0; i < 7; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* Weights large enough (KH * KW * C * O of 64Ki elements and more) to be
 * packed by the threads, a block of output channels each (83 channels:
 * the masked last block packed by whichever thread has it), for a
 * channels-last output and an NCHW one, at 1 to 3 threads. */
static const char *DR_PACK =
    "kernel rp(x: f32[2, 512, 3, 5] channels_last, w: f32[83, 512, 3, 3], b: f32[83]) -> "
    "(f32[2, 83, 3, 5] channels_last, f32[2, 83, 3, 5]) {\n"
    "  return conv2d(x, w, b, padding=1), conv2d(x, w, None, padding=1)\n}\n";

START_TEST(direct_packing) {
  static const int64_t si[3][4] = {{2, 512, 3, 5}, {83, 512, 3, 3}, {83}};
  static const int rk[3] = {4, 4, 1};
  static const int64_t so[4] = {2, 83, 3, 5};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DR_PACK, "rp", FLAGS[t]);
    Ten in[3], out[2];
    cl_ten(&in[0], DT_F32, 4, si[0], false);
    for (int i = 1; i < 3; i++) ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    cl_ten(&out[0], DT_F32, 4, so, true);
    out_ten(&out[1], DT_F32, 4, so);
    run_and_compare_k(&L, "rp", in, 3, out, 2, false, 512 * 9);
    if (t == 0) same_at_threads(&L, "rp", in, 3, out, 2);
    for (int i = 0; i < 3; i++) ten_free(&in[i]);
    for (int i = 0; i < 2; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

static const char *DR_DT =
    "kernel rd(a: f64[2, 8, 6, 7] channels_last, wa: f64[5, 8, 3, 3], ba: f64[5], "
    "h: f16[1, 9, 6, 7] channels_last, wh: f16[10, 9, 3, 3], bh: f16[10], "
    "g: bf16[1, 8, 6, 7] channels_last, wg: bf16[17, 8, 2, 2], "
    "i: i32[1, 8, 6, 7] channels_last, wi: i32[6, 8, 3, 3], bi: i32[6]) -> "
    "(f64[2, 5, 3, 4] channels_last, f16[1, 10, 6, 7] channels_last, "
    "bf16[1, 17, 7, 8] channels_last, i32[1, 6, 6, 7] channels_last) {\n"
    "  return conv2d(a, wa, ba, 2, 1), relu(conv2d(h, wh, bh, padding=1)), "
    "conv2d(g, wg, None, 1, 1), conv2d(i, wi, bi, 1, 1)\n}\n";

START_TEST(direct_dtypes) {
  static const int64_t si[11][4] = {{2, 8, 6, 7}, {5, 8, 3, 3}, {5}, {1, 9, 6, 7}, {10, 9, 3, 3},
                                    {10}, {1, 8, 6, 7}, {17, 8, 2, 2}, {1, 8, 6, 7}, {6, 8, 3, 3},
                                    {6}};
  static const int rk[11] = {4, 4, 1, 4, 4, 1, 4, 4, 4, 4, 1};
  static const DType dt[11] = {DT_F64, DT_F64, DT_F64, DT_F16, DT_F16, DT_F16,
                               DT_BF16, DT_BF16, DT_I32, DT_I32, DT_I32};
  static const int64_t so[4][4] = {{2, 5, 3, 4}, {1, 10, 6, 7}, {1, 17, 7, 8}, {1, 6, 6, 7}};
  static const DType dto[4] = {DT_F64, DT_F16, DT_BF16, DT_I32};
  static const char *const flags[3] = {"--layout=nhwc", "--target=x86-64 --layout=nhwc",
                                       "-O0 --layout=nhwc"};
  for (int t = 0; t < 3; t++) { /* nhwc: choose-layout would run the bf16 conv in NCHW */
    Lib L;
    build_flags(&L, DR_DT, "rd", flags[t]);
    Ten in[11], out[4];
    for (int i = 0; i < 11; i++) {
      if (i == 0 || i == 3 || i == 6 || i == 8) cl_ten(&in[i], dt[i], 4, si[i], false);
      else ten(&in[i], dt[i], rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 4; i++) cl_ten(&out[i], dto[i], 4, so[i], true);
    run_and_compare_k(&L, "rd", in, 11, out, 4, false, 81);
    for (int i = 0; i < 11; i++) ten_free(&in[i]);
    for (int i = 0; i < 4; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* NCHW outputs: vectors of output columns (stride 1); rows of 37 and 50
 * columns (border blocks of NOB checked vectors, the last of them partly
 * past the row); where the output rows are as long as the input's row
 * stride (3x3 over at least a vector of columns, padding 1 or a sliced
 * input's wider rows: h's 17 of 19 columns padded to 19), the flattened
 * planes (vectors spanning rows, taps outside masked; planes of 333,
 * 296 and 200 pixels: last blocks of 3, 1 and 2 vectors of 16), else
 * (5x5; 11 columns with 512-bit vectors) the rows. */
static const char *DR_NCHW =
    "kernel rnc(x: f32[2, 8, 9, 37], w: f32[13, 8, 3, 3], b: f32[13], w5: f32[6, 8, 5, 5], "
    "u: f32[8, 5, 11], m: f32[13], v: f32[13], z: f32[1, 8, 4, 50]) -> "
    "(f32[2, 13, 9, 37], f32[2, 6, 9, 37], f32[2, 13, 8, 37], f32[13, 5, 11], f32[2, 13, 9, 37], "
    "f32[2, 13, 5, 37], f32[1, 13, 4, 50]) {\n"
    "  return relu(conv2d(x, w, b, padding=1)), conv2d(x, w5, None, 1, [2, 4], [1, 2]), "
    "conv2d(x[:, :, 1:, :], w, None, 1, 1), conv2d(u, w, b, 1, 1), "
    "hardswish(batch_norm(conv2d(x, w, None, 1, 1), m, abs(v) + 0.5)), "
    "conv2d(x, w, None, 1, [0, 1], [2, 1]), conv2d(z, w, b, padding=1)\n}\n"
    "kernel rnd(a: f64[1, 8, 6, 7], wa: f64[5, 8, 3, 3], ba: f64[5], h: f16[1, 9, 6, 19], "
    "wh: f16[10, 9, 3, 3], g: bf16[1, 8, 6, 7], wg: bf16[7, 8, 2, 2], i: i32[1, 8, 6, 7], "
    "wi: i32[6, 8, 3, 3], bi: i32[6]) -> "
    "(f64[1, 5, 6, 7], f16[1, 10, 6, 19], bf16[1, 7, 7, 8], i32[1, 6, 6, 7], f16[1, 10, 6, 19]) {\n"
    "  return conv2d(a, wa, ba, 1, 1), relu(conv2d(h, wh, None, 1, 1)), conv2d(g, wg, None, 1, 1), "
    "conv2d(i, wi, bi, 1, 1), conv2d(h[:, :, :, :17], wh, None, 1, [1, 2])\n}\n";

START_TEST(direct_nchw) {
  static const int64_t si[8][4] = {{2, 8, 9, 37}, {13, 8, 3, 3}, {13}, {6, 8, 5, 5}, {8, 5, 11},
                                   {13}, {13}, {1, 8, 4, 50}};
  static const int rk[8] = {4, 4, 1, 4, 3, 1, 1, 4};
  static const int64_t so[7][4] = {{2, 13, 9, 37}, {2, 6, 9, 37}, {2, 13, 8, 37}, {13, 5, 11},
                                   {2, 13, 9, 37}, {2, 13, 5, 37}, {1, 13, 4, 50}};
  static const int ro[7] = {4, 4, 4, 3, 4, 4, 4};
  static const int64_t sd[10][4] = {{1, 8, 6, 7}, {5, 8, 3, 3}, {5}, {1, 9, 6, 19}, {10, 9, 3, 3},
                                    {1, 8, 6, 7}, {7, 8, 2, 2}, {1, 8, 6, 7}, {6, 8, 3, 3}, {6}};
  static const int rd[10] = {4, 4, 1, 4, 4, 4, 4, 4, 4, 1};
  static const DType dd[10] = {DT_F64, DT_F64, DT_F64, DT_F16, DT_F16, DT_BF16, DT_BF16,
                               DT_I32, DT_I32, DT_I32};
  static const int64_t sdo[5][4] = {{1, 5, 6, 7}, {1, 10, 6, 19}, {1, 7, 7, 8}, {1, 6, 6, 7},
                                    {1, 10, 6, 19}};
  static const DType ddo[5] = {DT_F64, DT_F16, DT_BF16, DT_I32, DT_F16};
  static const char *const flags[3] = {"--layout=nchw", "--target=x86-64 --layout=nchw",
                                       "-O0 --layout=nchw"};
  for (int t = 0; t < 3; t++) { /* nchw: every conv computed in NCHW */
    Lib L;
    build_flags(&L, DR_NCHW, "rnc", flags[t]);
    Ten in[10], out[7];
    for (int i = 0; i < 8; i++) ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    for (int i = 0; i < 7; i++) out_ten(&out[i], DT_F32, ro[i], so[i]);
    run_and_compare_k(&L, "rnc", in, 8, out, 7, false, 8 * 25);
    if (t == 0) same_at_threads(&L, "rnc", in, 8, out, 7);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 7; i++) ten_free(&out[i]);
    for (int i = 0; i < 10; i++) ten(&in[i], dd[i], rd[i], sd[i], NULL, i, false);
    for (int i = 0; i < 5; i++) out_ten(&out[i], ddo[i], 4, sdo[i]);
    run_and_compare_k(&L, "rnd", in, 10, out, 5, false, 81);
    for (int i = 0; i < 10; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* 1x1 f32 convs with channels-last outputs (the direct kernel; 4 x 6
 * register blocks with 512-bit vectors unless O is known and not a
 * multiple of 64): 64 output channels (no masked block) over rows of 19
 * (three blocks of 6 and one pixel), 83 (known: 2 x 12 blocks) at stride
 * 2 with padding 1 (border pixels of bias alone), rows of 9 (the
 * small-image form), an NCHW input, a sliced one, and symbolic sizes run
 * with 83 output channels over 13 input channels (a masked last block
 * of 64 channels) and 128 over 9. */
static const char *DR_1X1 =
    "kernel d1(x: f32[2, 24, 7, 19] channels_last, w: f32[64, 24, 1, 1], b: f32[64], "
    "w83: f32[83, 24, 1, 1], y: f32[1, 24, 6, 9] channels_last, xn: f32[2, 24, 7, 19]) -> "
    "(f32[2, 64, 7, 19] channels_last, f32[2, 83, 5, 11] channels_last, "
    "f32[1, 64, 6, 9] channels_last, f32[2, 83, 7, 19] channels_last, "
    "f32[2, 64, 7, 10] channels_last) {\n"
    "  return relu(conv2d(x, w, b)), conv2d(x, w83, None, 2, 1), conv2d(y, w, b), "
    "conv2d(xn, w83), conv2d(x[:, :, :, 0:19:2], w, b)\n}\n"
    "kernel d1s(x: f32[N, C, H, W] channels_last, w: f32[O, C, 1, 1]) -> "
    "f32[N, O, H, W] channels_last {\n"
    "  return conv2d(x, w)\n}\n";

START_TEST(direct_1x1) {
  static const int64_t si[6][4] = {{2, 24, 7, 19}, {64, 24, 1, 1}, {64}, {83, 24, 1, 1},
                                   {1, 24, 6, 9}, {2, 24, 7, 19}};
  static const int rk[6] = {4, 4, 1, 4, 4, 4};
  static const int64_t so[5][4] = {{2, 64, 7, 19}, {2, 83, 5, 11}, {1, 64, 6, 9},
                                   {2, 83, 7, 19}, {2, 64, 7, 10}};
  static const int64_t ss[2][2][4] = {{{2, 13, 5, 22}, {83, 13, 1, 1}},
                                      {{1, 9, 3, 20}, {128, 9, 1, 1}}};
  const char *const flags[3] = {"--layout=nhwc", "--target=x86-64 --layout=nhwc",
                                "-O0 --layout=nhwc"};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, DR_1X1, "d1", flags[t]);
    Ten in[6], out[5];
    for (int i = 0; i < 6; i++) {
      if (i == 0 || i == 4) cl_ten(&in[i], DT_F32, rk[i], si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 5; i++) cl_ten(&out[i], DT_F32, 4, so[i], true);
    run_and_compare_k(&L, "d1", in, 6, out, 5, false, 24);
    if (t == 0) same_at_threads(&L, "d1", in, 6, out, 5);
    for (int s = 0; s < 2; s++) {
      Ten x, w, o;
      int64_t os_[4] = {ss[s][0][0], ss[s][1][0], ss[s][0][2], ss[s][0][3]};
      cl_ten(&x, DT_F32, 4, ss[s][0], false);
      ten(&w, DT_F32, 4, ss[s][1], NULL, 7, false);
      cl_ten(&o, DT_F32, 4, os_, true);
      Ten rin[2] = {x, w};
      run_and_compare_k(&L, "d1s", rin, 2, &o, 1, false, 13);
      if (t == 0) same_at_threads(&L, "d1s", rin, 2, &o, 1);
      ten_free(&x), ten_free(&w), ten_free(&o);
    }
    for (int i = 0; i < 6; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* ---- 1x1: a plain GEMM (NCHW outputs) ------------------------------------------ */

static const char *G1_NCHW =
    "kernel g1n(x: f32[3, 7, 9, 11], w: f32[13, 7, 1, 1], b: f32[13], y: f32[9, 5, 8], "
    "wy: f32[37, 9, 1, 1], by: f32[37], wz: f32[3, 7, 1, 1], "
    "xc: f32[3, 7, 9, 11] channels_last) -> "
    "(f32[3, 13, 9, 11], f32[37, 5, 8], f32[3, 13, 9, 11], f32[3, 3, 9, 11], f32[3, 13, 9, 10], "
    "f32[3, 13, 5, 6], f32[3, 13, 9, 11]) {\n"
    "  return relu(conv2d(x, w, b)), conv2d(y, wy, by), "
    "hardswish(conv2d(x, w) * 2.5 + 0.5), conv2d(x, wz), "
    "conv2d(x[:, :, :, 1:], w, b), conv2d(x, w, None, 2), relu(conv2d(xc, w, b))\n}\n"
    "kernel g1d(a: f64[2, 9, 4, 5], wa: f64[6, 9, 1, 1], ba: f64[6], i: i32[2, 8, 3, 7], "
    "wi: i32[5, 8, 1, 1], h: f16[1, 8, 3, 5], wh: f16[4, 8, 1, 1], bh: f16[4]) -> "
    "(f64[2, 6, 4, 5], i32[2, 5, 3, 7], f16[1, 4, 3, 5]) {\n"
    "  return conv2d(a, wa, ba), conv2d(i, wi), conv2d(h, wh, bh)\n}\n";

static const char *G1_CL =
    "kernel g1c(x: f32[3, 7, 9, 11] channels_last, w: f32[13, 7, 1, 1], b: f32[13], "
    "y: f32[1, 9, 5, 8] channels_last, wy: f32[37, 9, 1, 1], by: f32[37], wz: f32[3, 7, 1, 1], "
    "xn: f32[3, 7, 9, 11]) -> "
    "(f32[3, 13, 9, 11] channels_last, f32[1, 37, 5, 8] channels_last, "
    "f32[3, 3, 9, 11] channels_last, f32[3, 13, 9, 11] channels_last, "
    "f32[3, 13, 9, 10] channels_last) {\n"
    "  return relu(conv2d(x, w, b)), conv2d(y, wy, by), conv2d(x, wz), relu(conv2d(xn, w, b)), "
    "conv2d(x[:, :, :, 1:], w, b)\n}\n"
    "kernel g1e(a: f64[2, 9, 4, 5] channels_last, wa: f64[6, 9, 1, 1], ba: f64[6], "
    "i: i32[2, 8, 3, 7] channels_last, wi: i32[5, 8, 1, 1]) -> "
    "(f64[2, 6, 4, 5] channels_last, i32[2, 5, 3, 7] channels_last) {\n"
    "  return conv2d(a, wa, ba), conv2d(i, wi)\n}\n";

START_TEST(gemm_1x1_nchw) {
  static const int64_t si[8][4] = {{3, 7, 9, 11}, {13, 7, 1, 1}, {13}, {9, 5, 8}, {37, 9, 1, 1},
                                   {37}, {3, 7, 1, 1}, {3, 7, 9, 11}};
  static const int rk[8] = {4, 4, 1, 3, 4, 1, 4, 4};
  static const int64_t so[7][4] = {{3, 13, 9, 11}, {37, 5, 8}, {3, 13, 9, 11}, {3, 3, 9, 11},
                                   {3, 13, 9, 10}, {3, 13, 5, 6}, {3, 13, 9, 11}};
  static const int ro[7] = {4, 3, 4, 4, 4, 4, 4};
  static const int64_t sd[8][4] = {{2, 9, 4, 5}, {6, 9, 1, 1}, {6}, {2, 8, 3, 7}, {5, 8, 1, 1},
                                   {1, 8, 3, 5}, {4, 8, 1, 1}, {4}};
  static const int rd[8] = {4, 4, 1, 4, 4, 4, 4, 1};
  static const DType dd[8] = {DT_F64, DT_F64, DT_F64, DT_I32, DT_I32, DT_F16, DT_F16, DT_F16};
  static const int64_t sdo[3][4] = {{2, 6, 4, 5}, {2, 5, 3, 7}, {1, 4, 3, 5}};
  static const DType ddo[3] = {DT_F64, DT_I32, DT_F16};
  static const char *const flags[3] = {"--layout=nchw", "--target=x86-64 --layout=nchw",
                                       "-O0 --layout=nchw"};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, G1_NCHW, "g1n", flags[t]);
    Ten in[8], out[7];
    for (int i = 0; i < 8; i++) {
      if (i == 7) cl_ten(&in[i], DT_F32, 4, si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 7; i++) out_ten(&out[i], DT_F32, ro[i], so[i]);
    run_and_compare_k(&L, "g1n", in, 8, out, 7, false, 9);
    if (t == 0) same_at_threads(&L, "g1n", in, 8, out, 7);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 7; i++) ten_free(&out[i]);
    for (int i = 0; i < 8; i++) ten(&in[i], dd[i], rd[i], sd[i], NULL, i, false);
    for (int i = 0; i < 3; i++) out_ten(&out[i], ddo[i], 4, sdo[i]);
    run_and_compare_k(&L, "g1d", in, 8, out, 3, false, 9);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 3; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

START_TEST(conv_1x1_channels_last) {
  static const int64_t si[8][4] = {{3, 7, 9, 11}, {13, 7, 1, 1}, {13}, {1, 9, 5, 8},
                                   {37, 9, 1, 1}, {37}, {3, 7, 1, 1}, {3, 7, 9, 11}};
  static const int rk[8] = {4, 4, 1, 4, 4, 1, 4, 4};
  static const int64_t so[5][4] = {{3, 13, 9, 11}, {1, 37, 5, 8}, {3, 3, 9, 11}, {3, 13, 9, 11},
                                   {3, 13, 9, 10}};
  static const int ro[5] = {4, 4, 4, 4, 4};
  static const int64_t sd[5][4] = {{2, 9, 4, 5}, {6, 9, 1, 1}, {6}, {2, 8, 3, 7}, {5, 8, 1, 1}};
  static const int rd[5] = {4, 4, 1, 4, 4};
  static const DType dd[5] = {DT_F64, DT_F64, DT_F64, DT_I32, DT_I32};
  static const int64_t sdo[2][4] = {{2, 6, 4, 5}, {2, 5, 3, 7}};
  static const DType ddo[2] = {DT_F64, DT_I32};
  static const char *const flags[3] = {"--layout=nhwc", "--target=x86-64 --layout=nhwc",
                                       "-O0 --layout=nhwc"};
  for (int t = 0; t < 3; t++) {
    Lib L;
    build_flags(&L, G1_CL, "g1c", flags[t]);
    Ten in[8], out[5];
    for (int i = 0; i < 8; i++) {
      if (i == 0 || i == 3) cl_ten(&in[i], DT_F32, rk[i], si[i], false);
      else ten(&in[i], DT_F32, rk[i], si[i], NULL, i, false);
    }
    for (int i = 0; i < 5; i++) cl_ten(&out[i], DT_F32, ro[i], so[i], true);
    run_and_compare_k(&L, "g1c", in, 8, out, 5, false, 9);
    if (t == 0) same_at_threads(&L, "g1c", in, 8, out, 5);
    for (int i = 0; i < 8; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
    for (int i = 0; i < 5; i++) {
      if (i == 0 || i == 3) cl_ten(&in[i], dd[i], rd[i], sd[i], false);
      else ten(&in[i], dd[i], rd[i], sd[i], NULL, i, false);
    }
    for (int i = 0; i < 2; i++) cl_ten(&out[i], ddo[i], 4, sdo[i], true);
    run_and_compare_k(&L, "g1e", in, 5, out, 2, false, 9);
    for (int i = 0; i < 5; i++) ten_free(&in[i]);
    for (int i = 0; i < 2; i++) ten_free(&out[i]);
    unbuild(&L);
  }
}
END_TEST

/* ---- the loop form names the algorithm ------------------------------------ */

static int loops_count(const char *src, const char *flags, const char *what) {
  char dir[] = "/tmp/tdsl_conv_XXXXXX", path[64], cmd[512], line[4096];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/k.tdsl", dir);
  write_text(path, src);
  snprintf(cmd, sizeof cmd, "%s %s --emit=loops %s -o %s/k.loops && cat %s/k.loops", TDSL_TDSLC,
           path, flags, dir, dir);
  FILE *p = popen(cmd, "r");
  ck_assert_ptr_nonnull(p);
  int n = 0;
  while (fgets(line, sizeof line, p))
    if (strstr(line, what)) n++;
  ck_assert_int_eq(pclose(p), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  ck_assert_int_eq(sh(cmd), 0);
  return n;
}

START_TEST(loop_form_algorithm) {
  ck_assert_int_eq(loops_count(DW_CL, "", "algorithm: depthwise"), 5);
  ck_assert_int_eq(loops_count(DW_NCHW, "", "algorithm: depthwise"), 7);
  static const char *dense =
      "kernel k(x: f32[1, 4, 8, 8], w: f32[6, 4, 3, 3], wg: f32[4, 2, 3, 3]) -> "
      "(f32[1, 6, 6, 6], f32[1, 4, 6, 6]) {\n  return conv2d(x, w), conv2d(x, wg, None, 1, 0, 1, 2)\n}\n";
  ck_assert_int_eq(loops_count(dense, "", "algorithm: implicit GEMM"), 2);
  ck_assert_int_eq(loops_count(DW_CL, "--target=cuda", "algorithm:"), 0);
  ck_assert_int_eq(loops_count(DR_CL, "", "algorithm: direct"), 7);
  ck_assert_int_eq(loops_count(DR_BLK, "", "algorithm: direct"), 7);
  ck_assert_int_eq(loops_count(DR_DT, "--layout=nhwc", "algorithm: direct"), 4);
  ck_assert_int_eq(loops_count(DR_NCHW, "--layout=nchw", "algorithm: direct"), 12);
  ck_assert_int_eq(loops_count(DR_1X1, "--layout=nhwc", "algorithm: direct"), 6);
  /* 3 input channels and NCHW outputs at stride 2 stay implicit GEMMs;
   * the 1x1 with an NCHW output is a plain one */
  static const char *gemms =
      "kernel k(x: f32[1, 8, 8, 8] channels_last, w: f32[6, 8, 1, 1], y: f32[1, 3, 8, 8] channels_last, "
      "w3: f32[6, 3, 3, 3], w8: f32[6, 8, 3, 3]) -> (f32[1, 6, 8, 8] channels_last, "
      "f32[1, 6, 6, 6] channels_last, f32[1, 6, 3, 3]) {\n"
      "  return conv2d(x, w), conv2d(y, w3), conv2d(x, w8, None, 2)\n}\n";
  ck_assert_int_eq(loops_count(gemms, "--layout=nchw", "algorithm: implicit GEMM"), 2);
  ck_assert_int_eq(loops_count(gemms, "--layout=nchw", "algorithm: GEMM (1x1, no im2col)"), 1);
  /* sliced rows, stride 2 and the f16 bias stay implicit GEMMs */
  ck_assert_int_eq(loops_count(G1_NCHW, "--layout=nchw", "algorithm: GEMM (1x1, no im2col)"), 7);
  ck_assert_int_eq(loops_count(G1_NCHW, "--layout=nchw", "algorithm: implicit GEMM"), 3);
  /* channels-last: the f32 one over 9 input channels is direct */
  ck_assert_int_eq(loops_count(G1_CL, "--layout=nhwc", "algorithm: implicit GEMM"), 6);
  ck_assert_int_eq(loops_count(G1_CL, "--layout=nhwc", "algorithm: direct"), 1);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen_conv");
  TCase *t = tcase_create("conv");
  tcase_set_timeout(t, 300);
  tcase_add_test(t, depthwise_channels_last);
  tcase_add_test(t, depthwise_nchw);
  tcase_add_test(t, depthwise_dtypes);
  tcase_add_test(t, direct_channels_last);
  tcase_add_test(t, direct_blocks);
  tcase_add_test(t, direct_image);
  tcase_add_test(t, direct_packing);
  tcase_add_test(t, direct_dtypes);
  tcase_add_test(t, direct_nchw);
  tcase_add_test(t, direct_1x1);
  tcase_add_test(t, gemm_1x1_nchw);
  tcase_add_test(t, conv_1x1_channels_last);
  tcase_add_test(t, loop_form_algorithm);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
