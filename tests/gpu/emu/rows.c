/* rows.c — the CUDA row-group kernels (cuda/nest.c "row groups in
 * registers") run on the CPU through emu.c and checked against references
 * computed here in double (f16/bf16: rounded as PyTorch's): softmax,
 * layer_norm and RMSNorm (bench/kernels.tdsl), a mean over two dims and
 * half-precision statistics (tests/pytorch/cases/rowfuse_views.tdsl),
 * logsumexp with a one-value-per-row member (stats_logsumexp.tdsl) and
 * group norm (layers_norm.tdsl, its first group).  Row lengths cover each
 * tier (a warp per row up to 256 and 1024 elements, a block up to 4096),
 * the general kernel beyond and for rows that are not a multiple of 4 or
 * a misaligned input, row counts that are not a multiple of 8 and grids
 * smaller than the rows (grid-stride).  The kernels' parameters are listed here in
 * cuda.h's order (buffers as `--emit=loops` numbers them, symbols,
 * output strides).  Built and run by run.sh; exit 0 when all pass. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

extern void softmax_last__n0(void), layer_norm_last__n0(void), rmsnorm_hand__n0(void),
    softmax_hand__n0(void), layernorm_hand__n0(void), rowfuse_two_dims__n0(void),
    rowfuse_f16__n0(void), rowfuse_f16__n2(void), lse_wide__n0(void), gn_basic__n0(void);

#define U(p) ((uint64_t)(uintptr_t)(p))
static int fails, checks;

static float frand(void) { return (float)rand() / (float)RAND_MAX * 8.0f - 4.0f; }

/* The grid the host gives a group with rows of E elements (cu_group_blocks). */
static int grid_of(int64_t rows, int64_t E) {
  int64_t per = E >= 1 && E <= 1024 && E % 4 == 0 ? 8 : 1; /* aligned here */
  return (int)((rows + per - 1) / per);
}

/* Worst error of got against want: |d| / (|want| + floor). */
static double worst_err(const float *got, const double *want, int64_t n, double floor) {
  double w = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs(got[i] - want[i]) / (fabs(want[i]) + floor);
    if (!(e <= w)) w = e; /* NaN counts */
  }
  return w;
}

static void report(const char *what, int64_t a, int64_t b, int grid, double err, double tol) {
  int bad = !(err <= tol);
  checks++;
  fails += bad;
  if (bad) printf("FAIL %s %lld x %lld grid %d: error %.3g > %.3g\n", what, (long long)a, (long long)b, grid, err, tol);
}

/* ---- softmax, layer_norm, RMSNorm over [M, K] (bench/kernels.tdsl) ---- */

typedef enum { SOFTMAX, SOFTMAX_HAND, LAYER_NORM, LAYERNORM_HAND, RMSNORM } Norm;
static const char *norm_name[] = {"softmax_last", "softmax_hand", "layer_norm_last", "layernorm_hand",
                                  "rmsnorm_hand"};

static void norm_ref(Norm k, const float *x, const float *w, const float *b, int64_t K, double *o) {
  double s = 0, m = -INFINITY, v = 0;
  if (k == SOFTMAX || k == SOFTMAX_HAND) {
    for (int64_t j = 0; j < K; j++) m = fmax(m, x[j]);
    for (int64_t j = 0; j < K; j++) s += exp(x[j] - m);
    for (int64_t j = 0; j < K; j++) o[j] = exp(x[j] - m) / s;
  } else if (k == RMSNORM) {
    for (int64_t j = 0; j < K; j++) s += (double)x[j] * x[j];
    for (int64_t j = 0; j < K; j++) o[j] = x[j] / sqrt(s / K + 1e-6) * w[j];
  } else {
    for (int64_t j = 0; j < K; j++) s += x[j];
    m = s / K;
    for (int64_t j = 0; j < K; j++) v += (x[j] - m) * (x[j] - m);
    for (int64_t j = 0; j < K; j++) o[j] = (x[j] - m) / sqrt(v / K + 1e-5) * w[j] + b[j];
  }
}

/* grid 0: the host's; shift: x starts that many elements after an
 * aligned address. */
static void norm(Norm k, int64_t M, int64_t K, int grid, int shift) {
  int64_t n = M * K;
  float *x0 = malloc(4 * (size_t)(n + 4)), *x = x0 + shift, *y = malloc(4 * (size_t)(n + 1));
  float *w = malloc(4 * (size_t)(K + 1)), *b = malloc(4 * (size_t)(K + 1));
  float *s1 = malloc(4 * (size_t)(M + 1)), *s2 = malloc(4 * (size_t)(M + 1));
  double *ref = malloc(8 * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) x[i] = frand(), y[i] = NAN;
  for (int64_t i = 0; i < K; i++) w[i] = frand(), b[i] = frand();
  if (n > 7) x[n / 2] = 60.0f; /* a dominant one */
  for (int64_t r = 0; r < M; r++) norm_ref(k, x + r * K, w, b, K, ref + r * K);
  grid = grid ? grid : grid_of(M, K);
  switch (k) {
  case SOFTMAX: emu_launch(softmax_last__n0, grid, (uint64_t[]){U(x), U(s1), U(y), U(s2), M, K, K, 1}, 8); break;
  case SOFTMAX_HAND:
    emu_launch(softmax_hand__n0, grid, (uint64_t[]){U(x), U(s1), U(s2), U(y), M, K, K, 1}, 8);
    break;
  case LAYER_NORM:
    emu_launch(layer_norm_last__n0, grid, (uint64_t[]){U(x), U(s1), U(s2), U(w), U(b), U(y), M, K, K, 1}, 10);
    break;
  case LAYERNORM_HAND:
    emu_launch(layernorm_hand__n0, grid, (uint64_t[]){U(x), U(s1), U(s2), U(w), U(b), U(y), M, K, K, 1}, 10);
    break;
  case RMSNORM: emu_launch(rmsnorm_hand__n0, grid, (uint64_t[]){U(x), U(s1), U(w), U(y), M, K, K, 1}, 8); break;
  }
  bool soft = k == SOFTMAX || k == SOFTMAX_HAND;
  report(norm_name[k], M, K, grid, worst_err(y, ref, n, soft ? 1e-3 : 1), 1e-4);
  free(x0), free(y), free(w), free(b), free(s1), free(s2), free(ref);
}

/* ---- x - x.mean([1, 2]) and the mean (rowfuse_two_dims) ---- */

static void two_dims(int64_t A, int64_t B, int64_t C, int grid) {
  int64_t n = A * B * C, E = B * C;
  float *x = malloc(4 * (size_t)n), *y = malloc(4 * (size_t)n), *m = malloc(4 * (size_t)A);
  double *ry = malloc(8 * (size_t)n), *rm = malloc(8 * (size_t)A);
  for (int64_t i = 0; i < n; i++) x[i] = frand(), y[i] = NAN;
  for (int64_t r = 0; r < A; r++) {
    double s = 0;
    for (int64_t j = 0; j < E; j++) s += x[r * E + j];
    rm[r] = s / (double)E;
    for (int64_t j = 0; j < E; j++) ry[r * E + j] = x[r * E + j] - rm[r];
    m[r] = NAN;
  }
  grid = grid ? grid : grid_of(A, E);
  emu_launch(rowfuse_two_dims__n0, grid, (uint64_t[]){U(x), U(m), U(y), A, B, C, B * C, C, 1, 1, 1, 1}, 12);
  double e = worst_err(y, ry, n, 1), em = worst_err(m, rm, A, 1);
  report("rowfuse_two_dims", A, E, grid, e > em ? e : em, 1e-5);
  free(x), free(y), free(m), free(ry), free(rm);
}

/* ---- f16 / bf16 statistics (rowfuse_f16) ---- */

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fff + ((u >> 16) & 1);
  return (uint16_t)(u >> 16);
}

static float f32_of_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void halves(int64_t M, int64_t K) {
  int64_t n = M * K;
  _Float16 *x = malloc(2 * (size_t)n), *o0 = malloc(2 * (size_t)n), *s = malloc(2 * (size_t)M);
  uint16_t *y = malloc(2 * (size_t)n), *o1 = malloc(2 * (size_t)n), *sb = malloc(2 * (size_t)M);
  for (int64_t i = 0; i < n; i++)
    x[i] = (_Float16)frand(), y[i] = bf16_of(frand()), o0[i] = (_Float16)NAN, o1[i] = 0xffff;
  uint64_t a[] = {U(x), U(s), U(o0), U(y), U(sb), U(o1), M, K, K, 1, K, 1};
  emu_launch(rowfuse_f16__n0, grid_of(M, K), a, 12);
  emu_launch(rowfuse_f16__n2, grid_of(M, K), a, 12);
  double e0 = 0, e1 = 0;
  for (int64_t r = 0; r < M; r++) {
    float sum = 0, mx = -INFINITY;
    for (int64_t j = 0; j < K; j++) sum += (float)x[r * K + j], mx = fmaxf(mx, f32_of_bf16(y[r * K + j]));
    _Float16 mean = (_Float16)(sum / (float)K); /* the statistic, stored as f16 */
    for (int64_t j = 0; j < K; j++) {
      double d = fabs((double)o0[r * K + j] - (double)(_Float16)((float)x[r * K + j] - (float)mean));
      if (!(d <= e0)) e0 = d;
      d = fabs(f32_of_bf16(o1[r * K + j]) - f32_of_bf16(bf16_of(f32_of_bf16(y[r * K + j]) * mx)));
      if (!(d <= e1)) e1 = d;
    }
  }
  report("rowfuse_f16 (f16)", M, K, grid_of(M, K), e0, 4e-3); /* an f16 ulp: the sum's order */
  report("rowfuse_f16 (bf16)", M, K, grid_of(M, K), e1, 0);
  free(x), free(o0), free(s), free(y), free(o1), free(sb);
}

/* ---- logsumexp(x * 20, 1) over [4, 300] (lse_wide's row group) ---- */

static void lse_wide(void) {
  float x[1200], o0[4], o1[300], s1[4], s2[4];
  double ref[4];
  for (int i = 0; i < 1200; i++) x[i] = frand() * 10;
  for (int r = 0; r < 4; r++) {
    double m = -INFINITY, s = 0;
    for (int j = 0; j < 300; j++) m = fmax(m, x[r * 300 + j] * 20.0);
    for (int j = 0; j < 300; j++) s += exp(x[r * 300 + j] * 20.0 - m);
    ref[r] = log(s) + m;
    o0[r] = NAN;
  }
  emu_launch(lse_wide__n0, 1, (uint64_t[]){U(x), U(s1), U(s2), U(o0), 0, 0, U(o1), 1, 1}, 9);
  report("lse_wide", 4, 300, 1, worst_err(o0, ref, 4, 0), 1e-6);
}

/* ---- group_norm(x, 3, w, b) of x [N, 6, L] (gn_basic's first group) ---- */

static void group_norm(int64_t N, int64_t L) {
  int64_t n = N * 6 * L, E = 2 * L, rows = 3 * N;
  float *x = malloc(4 * (size_t)n), *y = malloc(4 * (size_t)n), w[6], b[6];
  double *s1 = malloc(8 * (size_t)rows), *ref = malloc(8 * (size_t)n);
  float *s2 = malloc(4 * (size_t)rows), *s3 = malloc(4 * (size_t)rows);
  for (int64_t i = 0; i < n; i++) x[i] = frand() + 3, y[i] = NAN;
  for (int i = 0; i < 6; i++) w[i] = frand(), b[i] = frand();
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * E;
    double m = 0, v = 0;
    for (int64_t j = 0; j < E; j++) m += xr[j];
    m /= (double)E;
    for (int64_t j = 0; j < E; j++) v += (xr[j] - m) * (xr[j] - m);
    v /= (double)E;
    for (int64_t j = 0; j < E; j++) {
      int ch = (int)(r % 3) * 2 + (int)(j / L);
      ref[r * E + j] = (xr[j] - m) / sqrt(v + 1e-5) * w[ch] + b[ch];
    }
  }
  uint64_t a[EMU_MAX_ARGS] = {U(x), U(s1), U(s2), U(s3), U(w), U(b), U(y)};
  /* 19 buffers (y: the output out0, where plan-memory computes the
   * normalized value that the result views), then N and L (12 strides
   * unused) */
  a[19] = (uint64_t)N, a[20] = (uint64_t)L;
  emu_launch(gn_basic__n0, grid_of(rows, E), a, 33);
  report("gn_basic", rows, E, grid_of(rows, E), worst_err(y, ref, n, 1), 1e-4);
  free(x), free(y), free(s1), free(ref), free(s2), free(s3);
}

int main(void) {
  static const int64_t K[] = {1, 3, 100, 256, 257, 300, 512, 513, 1024, 1025, 2048, 2049, 4096, 4097};
  for (int k = SOFTMAX; k <= RMSNORM; k++)
    for (size_t i = 0; i < sizeof K / sizeof *K; i++) norm((Norm)k, 11, K[i], 0, 0);
  for (int k = SOFTMAX; k <= RMSNORM; k++) {
    norm((Norm)k, 19, 100, 2, 0);  /* a warp per row, fewer blocks than rows / 8 */
    norm((Norm)k, 19, 2049, 2, 0); /* a block per row, grid-stride */
    norm((Norm)k, 5, 100, 0, 1);   /* misaligned: the general kernel */
    norm((Norm)k, 5, 2048, 0, 1);
  }
  static const int64_t BC[][2] = {{3, 5}, {7, 40}, {33, 31}, {40, 40}, {50, 70}, {64, 64}, {65, 64}};
  for (size_t i = 0; i < sizeof BC / sizeof *BC; i++) two_dims(5, BC[i][0], BC[i][1], 0);
  two_dims(13, 7, 9, 1);
  static const int64_t H[] = {1, 7, 256, 300, 1024, 1500, 4096, 5000};
  for (size_t i = 0; i < sizeof H / sizeof *H; i++) halves(9, H[i]);
  lse_wide();
  static const int64_t L[] = {1, 3, 4, 50, 128, 130, 512, 513, 1024, 2048, 2100};
  for (size_t i = 0; i < sizeof L / sizeof *L; i++) group_norm(5, L[i]);
  printf("rows: %d of %d checks failed\n", fails, checks);
  return fails != 0;
}
