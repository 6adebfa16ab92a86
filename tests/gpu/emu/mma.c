/* mma.c — the CUDA tensor-core matmul kernels (cuda/gemm.c "tensor
 * cores") run on the CPU through emu.c and checked against references
 * computed here in double from the rounded inputs.  First emu.c's mma
 * alone: each warp's lanes build their fragments of a 16 x 16 A, a
 * 16 x 8 B and C by the PTX ISA's layout (from lane and element to row
 * and column, the other direction from emu.c's), and D must be A B + C.
 * Then the kernels of mma.tdsl: f16 and bf16, M, N and K not multiples
 * of 16, 8, 32 or the tiles (zero-filled edges), the 16-byte vector and
 * the element loads, both tile shapes (the 128 x 128 tiles need 256
 * tiles: batched), grids smaller than the rows or batches (grid-stride),
 * a bias + relu epilogue, transposed operands, an f32 result, a
 * broadcast batch; and
 * conv2d as an implicit GEMM (padding, bias, stride, groups, a
 * channels-last input; the weight's vector loads).  An
 * output passes when within the f32 accumulation's error bound plus
 * the output's rounding (an ulp of the output type, two with the
 * epilogue's second rounding) of the exact result, and within spec §9's
 * f16/bf16 tolerance.  The kernels' parameters are listed in cuda.h's
 * order (buffers as `--emit=loops` numbers them, symbols, output
 * strides).  Built and run by run.sh; exit 0 when all pass. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

extern void mm_f16__n0(void), mm_bf16__n0(void), bmm_f16__n0(void), mm_bias_relu_bf16__n0(void),
    mm_tn_f16__n0(void), mm_nt_bf16__n0(void), mm_f16_f32__n0(void), conv_f16__n0(void), conv_bf16_groups__n0(void),
    bmm_bcast_bf16__n0(void);
int emu_tid(void) __asm__("emu.read.ptx.sreg.tid.x");

#define U(p) ((uint64_t)(uintptr_t)(p))
static int fails, checks;

/* ---- f16 / bf16 bits ---- */

static uint16_t f16_of(double d) {
  _Float16 h = (_Float16)d; /* one rounding, to nearest even */
  uint16_t u;
  memcpy(&u, &h, 2);
  return u;
}
static double of_f16(uint16_t u) {
  _Float16 h;
  memcpy(&h, &u, 2);
  return (double)h;
}
static uint16_t bf16_of(double d) { /* via f32: within the ulp the bounds allow */
  float f = (float)d;
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}
static double of_bf16(uint16_t u) {
  uint32_t x = (uint32_t)u << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}
static uint16_t bits_of(bool bf, double d) { return bf ? bf16_of(d) : f16_of(d); }
static double val_of(bool bf, uint16_t u) { return bf ? of_bf16(u) : of_f16(u); }
/* An ulp of the output type at |v| (normal range; the smallest normal's below). */
static double ulp_at(bool bf, double v) {
  int e;
  frexp(fabs(v) > 0 ? fabs(v) : 1e-30, &e);
  double min_e = bf ? -125 : -13;
  return ldexp(1.0, (int)fmax(e - 1, min_e) - (bf ? 7 : 10));
}

static double urand(void) { return (double)rand() / RAND_MAX * 4.0 - 2.0; }

/* ---- emu.c's mma alone ---- */

static uint16_t ga[8][16][16], gb[8][16][8];
static float gc[8][16][8], gd[8][16][8];

static void alone_kernel(void) {
  int t = emu_tid(), w = t / 32, lane = t % 32, group = lane >> 2, tig = lane % 4;
  uint32_t a[4] = {0}, b[2] = {0};
  float c[4], d[4];
  for (int i = 0; i < 8; i++) { /* the ISA: row, column of a_i */
    int row = group + 8 * (i == 2 || i == 3 || i == 6 || i == 7), col = tig * 2 + (i & 1) + 8 * (i >= 4);
    a[i / 2] |= (uint32_t)ga[w][row][col] << (16 * (i % 2));
  }
  for (int i = 0; i < 4; i++) {
    int row = tig * 2 + (i & 1) + 8 * (i >= 2), col = group;
    b[i / 2] |= (uint32_t)gb[w][row][col] << (16 * (i % 2));
  }
  for (int i = 0; i < 4; i++) c[i] = gc[w][group + 8 * (i >= 2)][tig * 2 + (i & 1)];
  emu_mma(w % 2, d, a[0], a[1], a[2], a[3], b[0], b[1], c[0], c[1], c[2], c[3]);
  for (int i = 0; i < 4; i++) gd[w][group + 8 * (i >= 2)][tig * 2 + (i & 1)] = d[i];
}

static void mma_alone(void) {
  for (int w = 0; w < 8; w++) {
    bool bf = w % 2;
    for (int r = 0; r < 16; r++)
      for (int k = 0; k < 16; k++) ga[w][r][k] = bits_of(bf, urand());
    for (int k = 0; k < 16; k++)
      for (int n = 0; n < 8; n++) gb[w][k][n] = bits_of(bf, urand());
    for (int r = 0; r < 16; r++)
      for (int n = 0; n < 8; n++) gc[w][r][n] = (float)urand(), gd[w][r][n] = NAN;
  }
  emu_launch(alone_kernel, 1, NULL, 0);
  double worst = 0;
  for (int w = 0; w < 8; w++)
    for (int r = 0; r < 16; r++)
      for (int n = 0; n < 8; n++) {
        double s = gc[w][r][n];
        for (int k = 0; k < 16; k++) s += val_of(w % 2, ga[w][r][k]) * val_of(w % 2, gb[w][k][n]);
        double e = fabs(gd[w][r][n] - s) / (fabs(s) + 1);
        if (!(e <= worst)) worst = e;
      }
  checks++;
  if (!(worst <= 1e-7)) fails++, printf("FAIL mma alone: error %.3g\n", worst);
  printf("mma alone (8 warps, f16 and bf16): max error %.3g\n", worst);
}

/* ---- the kernels ---- */

typedef enum { MM_F16, MM_BF16, BMM_F16, MM_BIAS_RELU, MM_TN, MM_NT, MM_F32, BMM_BCAST } Kind;
static const char *kind_name[] = {"mm_f16", "mm_bf16", "bmm_f16", "mm_bias_relu_bf16", "mm_tn_f16", "mm_nt_bf16",
                                  "mm_f16_f32", "bmm_bcast_bf16"};

/* The host's grid (cu_gemm_grid): 128 x 128 tiles when M, N >= 128 and
 * at least 256 of them over the batch, else 64 x 64. */
static void grid_of(int64_t B, int64_t M, int64_t N, int g[3]) {
  int64_t t = (M + 127) / 128 * ((N + 127) / 128) * B;
  int bm = M >= 128 && N >= 128 && t >= 256 ? 128 : 64;
  g[0] = (int)((N + bm - 1) / bm), g[1] = (int)((M + bm - 1) / bm), g[2] = (int)B;
}

static double worst_rel, worst_abs;

/* One run: B x (M x K) @ (K x N); gy, gz > 0: grid y, z instead of the host's. */
static void run(Kind kd, int64_t B, int64_t M, int64_t N, int64_t K, int gy, int gz) {
  bool bf = kd == MM_BF16 || kd == MM_BIAS_RELU || kd == MM_NT || kd == BMM_BCAST;
  bool f32 = kd == MM_F32;
  int64_t na = B * M * K, nb = B * K * N, nc = B * M * N;
  uint16_t *a = malloc(2 * (size_t)(na + 8)), *b = malloc(2 * (size_t)(nb + 8)), *bias = malloc(2 * (size_t)(N + 8));
  void *out = malloc((f32 ? 4 : 2) * (size_t)(nc + 8));
  double *A = malloc(8 * (size_t)(na + 1)), *Bv = malloc(8 * (size_t)(nb + 1));
  /* A[bt][m][k], Bv[bt][k][n] as values; a, b in their own layouts */
  for (int64_t bt = 0; bt < B; bt++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t k = 0; k < K; k++) {
        uint16_t h = bits_of(bf, urand());
        A[(bt * M + m) * K + k] = val_of(bf, h);
        a[kd == MM_TN ? k * M + m : (bt * M + m) * K + k] = h;
      }
  for (int64_t bt = 0; bt < B; bt++)
    for (int64_t k = 0; k < K; k++)
      for (int64_t n = 0; n < N; n++) { /* BMM_BCAST: one b for every batch */
        uint16_t h = kd == BMM_BCAST && bt ? b[k * N + n] : bits_of(bf, urand());
        Bv[(bt * K + k) * N + n] = val_of(bf, h);
        b[kd == MM_NT ? n * K + k : kd == BMM_BCAST ? k * N + n : (bt * K + k) * N + n] = h;
      }
  for (int64_t n = 0; n < N; n++) bias[n] = bits_of(bf, urand());
  memset(out, 0xff, (f32 ? 4 : 2) * (size_t)nc); /* NaN */
  int g[3];
  grid_of(B, M, N, g);
  if (gy) g[1] = gy;
  if (gz) g[2] = gz;
  switch (kd) { /* buffers as --emit=loops numbers them, symbols, output strides */
  case MM_F16: case MM_BF16:
    emu_launch3(kd == MM_F16 ? mm_f16__n0 : mm_bf16__n0, g, (uint64_t[]){U(a), U(b), U(out), M, K, N, N, 1}, 8);
    break;
  case MM_F32: /* out, a, b, the (unused) scratch */
    emu_launch3(mm_f16_f32__n0, g, (uint64_t[]){U(out), U(a), U(b), 0, M, K, N, N, 1}, 9);
    break;
  case BMM_F16: emu_launch3(bmm_f16__n0, g, (uint64_t[]){U(a), U(b), U(out), B, M, K, N, M * N, N, 1}, 10); break;
  case BMM_BCAST:
    emu_launch3(bmm_bcast_bf16__n0, g, (uint64_t[]){U(a), U(b), U(out), B, M, K, N, M * N, N, 1}, 10);
    break;
  case MM_BIAS_RELU:
    emu_launch3(mm_bias_relu_bf16__n0, g, (uint64_t[]){U(bias), U(out), U(a), U(b), 0, M, K, N, N, 1}, 10);
    break;
  case MM_TN: emu_launch3(mm_tn_f16__n0, g, (uint64_t[]){U(a), U(b), U(out), K, M, N, N, 1}, 8); break;
  case MM_NT: emu_launch3(mm_nt_bf16__n0, g, (uint64_t[]){U(a), U(b), U(out), M, K, N, N, 1}, 8); break;
  }
  double wr = 0, wa = 0;
  for (int64_t bt = 0; bt < B; bt++)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
          double p = A[(bt * M + m) * K + k] * Bv[(bt * K + k) * N + n];
          s += p, mag += fabs(p);
        }
        double ref = val_of(bf, bits_of(bf, s)), bound = ulp_at(bf, ref);
        if (kd == MM_BIAS_RELU) {
          double y = val_of(bf, bits_of(bf, (double)(float)(ref + val_of(bf, bias[n]))));
          bound = ulp_at(bf, ref) + ulp_at(bf, y); /* an ulp of the sum, then its own rounding */
          ref = y > 0 ? y : 0;
        }
        bound += ldexp(mag, -22) * (double)(K / 16 + 2); /* f32 partial sums, each mma's and across */
        int64_t i = (bt * M + m) * N + n;
        double got = f32 ? ((float *)out)[i] : val_of(bf, ((uint16_t *)out)[i]);
        double d = fabs(got - ref), rel = d / bound;
        if (!(rel <= wr)) wr = rel;
        if (!(d <= wa)) wa = d;
        if (!(d <= 1e-2 + 1e-2 * fabs(ref))) wr = INFINITY; /* spec §9 */
      }
  checks++;
  if (!(wr <= 1)) {
    fails++;
    printf("FAIL %s B %lld M %lld N %lld K %lld grid %d %d %d: error %.3g of the bound (max abs %.3g)\n",
           kind_name[kd], (long long)B, (long long)M, (long long)N, (long long)K, g[0], g[1], g[2], wr, wa);
  }
  if (wr > worst_rel) worst_rel = wr;
  if (wa > worst_abs) worst_abs = wa;
  free(a), free(b), free(bias), free(out), free(A), free(Bv);
}

/* ---- conv2d ---- */

/* conv_f16 (3 x 3, stride 1, padding 1, bias; NCHW), or conv_bf16_groups
 * (x [2, 6, 9, 11] channels-last, w [10, 3, 3, 3], stride 2, padding 1,
 * 2 groups). */
static void run_conv(bool groups, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O) {
  bool bf = groups;
  int64_t G = groups ? 2 : 1, s = groups ? 2 : 1, p = 1, KH = 3, KW = 3, CG = C / G, OG = O / G;
  int64_t OH = (H + 2 * p - KH) / s + 1, OW = (W + 2 * p - KW) / s + 1;
  int64_t nx = N * C * H * W, nw = O * CG * KH * KW, no = N * O * OH * OW;
  uint16_t *x = malloc(2 * (size_t)nx), *w = malloc(2 * (size_t)nw), *bias = malloc(2 * (size_t)O);
  uint16_t *out = malloc(2 * (size_t)no);
  /* x's element (n, c, y, xx) at its layout's offset */
#define XOFF(n, c, y, xx) (groups ? (((n) * H + (y)) * W + (xx)) * C + (c) : (((n) * C + (c)) * H + (y)) * W + (xx))
  for (int64_t i = 0; i < nx; i++) x[i] = bits_of(bf, urand());
  for (int64_t i = 0; i < nw; i++) w[i] = bits_of(bf, urand());
  for (int64_t i = 0; i < O; i++) bias[i] = bits_of(bf, urand());
  memset(out, 0xff, 2 * (size_t)no);
  int g[3];
  grid_of(N * G, OG, OH * OW, g);
  if (groups)
    emu_launch3(conv_bf16_groups__n0, g, (uint64_t[]){U(x), U(w), U(out), 300, 30, 6, 1}, 7);
  else
    emu_launch3(conv_f16__n0, g, (uint64_t[]){U(x), U(w), U(bias), U(out), N, C, H, W, O, H * W * O, H * W, W, 1}, 13);
  double wr = 0, wa = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
          double acc = 0, mag = 0;
          for (int64_t ci = 0; ci < CG; ci++)
            for (int64_t ky = 0; ky < KH; ky++)
              for (int64_t kx = 0; kx < KW; kx++) {
                int64_t iy = oy * s - p + ky, ix = ox * s - p + kx;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                double v = val_of(bf, x[XOFF(n, o / OG * CG + ci, iy, ix)]) *
                           val_of(bf, w[((o * CG + ci) * KH + ky) * KW + kx]);
                acc += v, mag += fabs(v);
              }
          if (!groups) acc += val_of(bf, bias[o]), mag += fabs(val_of(bf, bias[o]));
          double ref = val_of(bf, bits_of(bf, acc));
          double bound = ulp_at(bf, ref) + ldexp(mag, -22) * (double)(CG * KH * KW / 16 + 3);
          double got = val_of(bf, out[((n * O + o) * OH + oy) * OW + ox]), d = fabs(got - ref);
          if (!(d / bound <= wr)) wr = d / bound;
          if (!(d <= wa)) wa = d;
          if (!(d <= 1e-2 + 1e-2 * fabs(ref))) wr = INFINITY; /* spec §9 */
        }
#undef XOFF
  checks++;
  if (!(wr <= 1)) {
    fails++;
    printf("FAIL %s N %lld C %lld H %lld W %lld O %lld: error %.3g of the bound (max abs %.3g)\n",
           groups ? "conv_bf16_groups" : "conv_f16", (long long)N, (long long)C, (long long)H, (long long)W,
           (long long)O, wr, wa);
  }
  if (wr > worst_rel) worst_rel = wr;
  if (wa > worst_abs) worst_abs = wa;
  free(x), free(w), free(bias), free(out);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  srand(7);
  mma_alone();
  static const int64_t S[][3] = {/* M, N, K */
                                 {1, 1, 1},   {5, 7, 3},    {16, 8, 16},  {17, 9, 33},   {64, 64, 32},
                                 {64, 64, 64}, {65, 63, 40}, {33, 72, 24}, {100, 130, 77}, {128, 136, 96}};
  for (int kd = MM_F16; kd <= MM_F32; kd++) {
    if (kd == BMM_F16) continue;
    for (size_t i = 0; i < sizeof S / sizeof *S; i++) run((Kind)kd, 1, S[i][0], S[i][1], S[i][2], 0, 0);
  }
  run(MM_F16, 1, 200, 72, 40, 1, 0); /* fewer row blocks than rows: grid-stride */
  run(BMM_F16, 3, 33, 40, 24, 0, 0);
  run(BMM_F16, 5, 70, 20, 19, 1, 2); /* grid-stride over rows and batches */
  run(BMM_F16, 256, 128, 128, 40, 0, 0); /* the 128 x 128 tiles, vector loads */
  run(BMM_F16, 64, 129, 130, 33, 0, 0);  /* the 128 x 128 tiles, edges, element loads */
  run(BMM_BCAST, 3, 40, 24, 32, 0, 0);   /* b's batch stride 0: vector loads */
  run(BMM_BCAST, 2, 17, 30, 21, 0, 0);   /* element loads */
  run_conv(false, 2, 3, 5, 7, 5);     /* K = 27: the weight's element loads */
  run_conv(false, 1, 8, 9, 9, 24);    /* K = 72: the weight's vector loads */
  run_conv(false, 3, 16, 12, 13, 70); /* several row and column blocks */
  run_conv(true, 2, 6, 9, 11, 10);
  printf("mma: %d of %d checks failed; worst error %.3g of the bound, %.3g absolute\n", fails, checks, worst_rel,
         worst_abs);
  return fails != 0;
}
