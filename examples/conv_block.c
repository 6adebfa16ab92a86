/* conv_block.c — calls the compiled kernel of conv_block.tdsl from C.
 *
 * Needs: conv_block.h / conv_block.o from tdslc (tdsl_add_library) and
 * libtdsl_runtime.
 * Produces: exit status 0 when the result matches the reference below
 * within spec §9's f32 tolerance for conv, and an input in the wrong
 * layout is rejected as documented; 1 otherwise.
 *
 * Shows a channels_last parameter: the input is allocated with
 * tdsl_tensor_alloc_channels_last (NCHW shape, NHWC strides) and filled
 * through its strides; the same values in plain NCHW layout are refused
 * with TDSL_E_LAYOUT. */
#include <stdio.h>

#include "conv_block.h"
#include "example_util.h"

enum { N = 2, C = 3, H = 32, W = 32, O = 16, KS = 3, PH = 16, PW = 16 };

#define RTOL 1e-4
#define ATOL 1e-5

typedef struct conv_args {
  DLTensor x, w, b, out;
} conv_args;

/* Fills t (any layout) element by element in logical NCHW order. */
static void fill4(DLTensor *t, ex_rng *rng, float scale) {
  int64_t i[4];
  for (i[0] = 0; i[0] < t->shape[0]; i[0]++)
    for (i[1] = 0; i[1] < t->shape[1]; i[1]++)
      for (i[2] = 0; i[2] < t->shape[2]; i[2]++)
        for (i[3] = 0; i[3] < t->shape[3]; i[3]++)
          *(float *)ex_elem(t, i) = ex_uniform(rng, -scale, scale);
}

static int make_inputs(conv_args *a) {
  const int64_t xs[4] = {N, C, H, W}, ws[4] = {O, C, KS, KS}, bs[1] = {O};
  if (tdsl_tensor_alloc_channels_last(&a->x, TDSL_F32, 4, xs) != TDSL_OK ||
      tdsl_tensor_alloc(&a->w, TDSL_F32, 4, ws) != TDSL_OK ||
      tdsl_tensor_alloc(&a->b, TDSL_F32, 1, bs) != TDSL_OK)
    return -1;
  ex_rng rng = {0x5eed0003u};
  fill4(&a->x, &rng, 1.0f);
  fill4(&a->w, &rng, 0.19f); /* about 1/sqrt(C*KS*KS) */
  float *b = a->b.data;
  for (int o = 0; o < O; o++)
    b[o] = ex_uniform(&rng, -0.19f, 0.19f);
  return 0;
}

static double x_at(const DLTensor *x, int64_t n, int64_t c, int64_t h,
                   int64_t w) {
  if (h < 0 || h >= H || w < 0 || w >= W)
    return 0.0; /* padding=1 pads with zeros */
  const int64_t i[4] = {n, c, h, w};
  return *(const float *)ex_elem(x, i);
}

/* relu(conv2d(x, w, b, padding=1))[n, o, h, w], stride 1, in double. */
static double conv_relu(const conv_args *a, int64_t n, int64_t o, int64_t h,
                        int64_t w) {
  const float *wt = a->w.data;
  double s = ((const float *)a->b.data)[o];
  for (int64_t c = 0; c < C; c++)
    for (int64_t kh = 0; kh < KS; kh++)
      for (int64_t kw = 0; kw < KS; kw++)
        s += x_at(&a->x, n, c, h + kh - 1, w + kw - 1) *
             wt[((o * C + c) * KS + kh) * KS + kw];
  return s > 0.0 ? s : 0.0;
}

/* max_pool2d(y, 2): kernel 2, stride 2 (stride defaults to the kernel).
 * Returns the largest |error| against the kernel's output, or INFINITY. */
static double compare(const conv_args *a) {
  double max_err = 0.0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t o = 0; o < O; o++)
      for (int64_t i = 0; i < PH; i++)
        for (int64_t j = 0; j < PW; j++) {
          double want = conv_relu(a, n, o, 2 * i, 2 * j);
          want = fmax(want, conv_relu(a, n, o, 2 * i, 2 * j + 1));
          want = fmax(want, conv_relu(a, n, o, 2 * i + 1, 2 * j));
          want = fmax(want, conv_relu(a, n, o, 2 * i + 1, 2 * j + 1));
          const int64_t oi[4] = {n, o, i, j};
          double got = *(const float *)ex_elem(&a->out, oi);
          if (!ex_close(got, want, RTOL, ATOL)) {
            fprintf(stderr, "out0[%lld, %lld, %lld, %lld] = %.9g, want %.9g\n",
                    (long long)n, (long long)o, (long long)i, (long long)j,
                    got, want);
            return INFINITY;
          }
          if (fabs(got - want) > max_err)
            max_err = fabs(got - want);
        }
  return max_err;
}

static int query_and_alloc(conv_args *a) {
  int64_t shape[4] = {0};
  DLTensor q = ex_query_tensor(TDSL_F32, 4, shape);
  int rc = conv_block(&a->x, &a->w, &a->b, &q);
  if (rc != TDSL_OK) {
    fprintf(stderr, "shape query failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return -1;
  }
  char buf[64];
  printf("shape query: out0 is %s\n", ex_shape_str(&q, buf, sizeof buf));
  if (shape[0] != N || shape[1] != O || shape[2] != PH || shape[3] != PW)
    return -1;
  if (tdsl_tensor_alloc(&a->out, TDSL_F32, 4, shape) != TDSL_OK) {
    fprintf(stderr, "conv_block: %s\n", tdsl_last_error());
    return -1;
  }
  return 0;
}

/* x in plain NCHW (row-major) strides where channels_last is declared. */
static int show_rejection(conv_args *a) {
  const int64_t xs[4] = {N, C, H, W};
  DLTensor nchw;
  if (tdsl_tensor_alloc(&nchw, TDSL_F32, 4, xs) != TDSL_OK)
    return -1;
  int rc = conv_block(&nchw, &a->w, &a->b, &a->out);
  printf("x in NCHW strides: %s: %s\n", tdsl_strerror(rc), tdsl_last_error());
  tdsl_tensor_free(&nchw);
  return rc == TDSL_E_LAYOUT && tdsl_last_error()[0] != '\0' ? 0 : -1;
}

static int run(conv_args *a) {
  ex_print_signature(conv_block_info());
  if (make_inputs(a) != 0) {
    fprintf(stderr, "conv_block: %s\n", tdsl_last_error());
    return 1;
  }
  if (query_and_alloc(a) != 0)
    return 1;
  int rc = conv_block(&a->x, &a->w, &a->b, &a->out);
  if (rc != TDSL_OK) {
    fprintf(stderr, "conv_block failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return 1;
  }
  double err = compare(a);
  if (show_rejection(a) != 0) {
    fprintf(stderr, "conv_block: the bad call was not rejected as expected\n");
    return 1;
  }
  printf("conv_block: out0 %dx%dx%dx%d f32 from channels_last %dx%dx%dx%d, "
         "max |error| %.3g: %s\n",
         N, O, PH, PW, N, C, H, W, err, isfinite(err) ? "OK" : "FAILED");
  return isfinite(err) ? 0 : 1;
}

int main(void) {
  conv_args a = {0};
  int status = run(&a);
  tdsl_tensor_free(&a.x);
  tdsl_tensor_free(&a.w);
  tdsl_tensor_free(&a.b);
  tdsl_tensor_free(&a.out);
  return status;
}
