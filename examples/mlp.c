/* mlp.c — calls the compiled kernel of mlp.tdsl from C.
 *
 * Needs: mlp.h / mlp.o from tdslc (tdsl_add_library) and libtdsl_runtime.
 * Produces: exit status 0 when both results match the reference below
 * (softmax within spec §9's f32 tolerance for `@`, argmax exactly up to
 * near-ties) and a bad call is rejected as documented, 1 otherwise.
 *
 * Shows a kernel with a size symbol (N, taken from x) and two results:
 * one shape query fills both output shapes, then the outputs are
 * allocated from them. */
#include <stdio.h>
#include <string.h>

#include "example_util.h"
#include "mlp.h"

enum { N = 4, D = 64, HID = 128, K = 10 };

/* Spec §9 for `@` and reductions in f32. */
#define RTOL 1e-4
#define ATOL 1e-5

typedef struct mlp_args {
  DLTensor x, w1, b1, w2, b2; /* inputs */
  DLTensor probs, label;      /* results out0, out1 */
} mlp_args;

static int fill_uniform(DLTensor *t, int ndim, const int64_t *shape,
                        ex_rng *rng, float scale) {
  if (tdsl_tensor_alloc(t, TDSL_F32, ndim, shape) != TDSL_OK)
    return -1;
  float *p = t->data;
  for (int64_t i = 0; i < tdsl_tensor_numel(t); i++)
    p[i] = ex_uniform(rng, -scale, scale);
  return 0;
}

/* Weights scaled like PyTorch's nn.Linear init (about 1/sqrt(fan_in)). */
static int make_inputs(mlp_args *a) {
  ex_rng rng = {0x5eed0002u};
  const int64_t xs[2] = {N, D}, w1s[2] = {HID, D}, b1s[1] = {HID};
  const int64_t w2s[2] = {K, HID}, b2s[1] = {K};
  if (fill_uniform(&a->x, 2, xs, &rng, 1.0f) ||
      fill_uniform(&a->w1, 2, w1s, &rng, 0.125f) ||
      fill_uniform(&a->b1, 1, b1s, &rng, 0.125f) ||
      fill_uniform(&a->w2, 2, w2s, &rng, 0.09f) ||
      fill_uniform(&a->b2, 1, b2s, &rng, 0.09f))
    return -1;
  return 0;
}

/* gelu with PyTorch's default approximate='none': x * Phi(x). */
static double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }

/* logits[n][i] = (gelu(x @ w1.T + b1) @ w2.T + b2)[n][i], in double. */
static void reference_logits(const mlp_args *a, double logits[N][K]) {
  const float *x = a->x.data, *w1 = a->w1.data, *b1 = a->b1.data;
  const float *w2 = a->w2.data, *b2 = a->b2.data;
  for (int n = 0; n < N; n++) {
    double h[HID];
    for (int j = 0; j < HID; j++) {
      double s = b1[j];
      for (int k = 0; k < D; k++)
        s += (double)x[n * D + k] * w1[j * D + k];
      h[j] = gelu(s);
    }
    for (int i = 0; i < K; i++) {
      double s = b2[i];
      for (int j = 0; j < HID; j++)
        s += h[j] * w2[i * HID + j];
      logits[n][i] = s;
    }
  }
}

/* softmax over each row and argmax (first maximum, as PyTorch) against
 * the kernel's results; returns the largest |error| or INFINITY. An
 * argmax may differ from the reference only where the two logits are
 * within tolerance of each other, which f32 rounding may order either way. */
static double compare(const mlp_args *a) {
  double logits[N][K];
  reference_logits(a, logits);
  const float *probs = a->probs.data;
  const int64_t *label = a->label.data;
  double max_err = 0.0;
  for (int n = 0; n < N; n++) {
    int best = 0;
    for (int i = 1; i < K; i++)
      if (logits[n][i] > logits[n][best])
        best = i;
    double sum = 0.0;
    for (int i = 0; i < K; i++)
      sum += exp(logits[n][i] - logits[n][best]);
    for (int i = 0; i < K; i++) {
      double want = exp(logits[n][i] - logits[n][best]) / sum;
      double got = probs[n * K + i];
      if (!ex_close(got, want, RTOL, ATOL)) {
        fprintf(stderr, "out0[%d, %d] = %.9g, want %.9g\n", n, i, got, want);
        return INFINITY;
      }
      if (fabs(got - want) > max_err)
        max_err = fabs(got - want);
    }
    int64_t g = label[n];
    if (g < 0 || g >= K ||
        (g != best && !ex_close(logits[n][g], logits[n][best], RTOL, ATOL))) {
      fprintf(stderr, "out1[%d] = %lld, want %d\n", n, (long long)g, best);
      return INFINITY;
    }
  }
  return max_err;
}

/* One query fills both result shapes: [N, 10] and [N]. */
static int query_and_alloc(mlp_args *a) {
  int64_t pshape[2] = {0}, lshape[1] = {0};
  DLTensor qp = ex_query_tensor(TDSL_F32, 2, pshape);
  DLTensor ql = ex_query_tensor(TDSL_I64, 1, lshape);
  int rc = mlp(&a->x, &a->w1, &a->b1, &a->w2, &a->b2, &qp, &ql);
  if (rc != TDSL_OK) {
    fprintf(stderr, "shape query failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return -1;
  }
  char b0[64], b1[64];
  printf("shape query: out0 is %s, out1 is %s\n",
         ex_shape_str(&qp, b0, sizeof b0), ex_shape_str(&ql, b1, sizeof b1));
  if (pshape[0] != N || pshape[1] != K || lshape[0] != N)
    return -1;
  if (tdsl_tensor_alloc(&a->probs, TDSL_F32, 2, pshape) != TDSL_OK ||
      tdsl_tensor_alloc(&a->label, TDSL_I64, 1, lshape) != TDSL_OK) {
    fprintf(stderr, "mlp: %s\n", tdsl_last_error());
    return -1;
  }
  return 0;
}

/* w1 given as f64 where f32 is declared: TDSL_E_DTYPE and a message. */
static int show_rejection(mlp_args *a) {
  const int64_t w1s[2] = {HID, D};
  DLTensor w1_f64;
  if (tdsl_tensor_alloc(&w1_f64, TDSL_F64, 2, w1s) != TDSL_OK)
    return -1;
  int rc = mlp(&a->x, &w1_f64, &a->b1, &a->w2, &a->b2, &a->probs, &a->label);
  printf("w1 as f64: %s: %s\n", tdsl_strerror(rc), tdsl_last_error());
  tdsl_tensor_free(&w1_f64);
  return rc == TDSL_E_DTYPE && tdsl_last_error()[0] != '\0' ? 0 : -1;
}

static int run(mlp_args *a) {
  ex_print_signature(mlp_info());
  if (make_inputs(a) != 0) {
    fprintf(stderr, "mlp: %s\n", tdsl_last_error());
    return 1;
  }
  if (query_and_alloc(a) != 0)
    return 1;
  int rc = mlp(&a->x, &a->w1, &a->b1, &a->w2, &a->b2, &a->probs, &a->label);
  if (rc != TDSL_OK) {
    fprintf(stderr, "mlp failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return 1;
  }
  double err = compare(a);
  if (show_rejection(a) != 0) {
    fprintf(stderr, "mlp: the bad call was not rejected as expected\n");
    return 1;
  }
  const int64_t *label = a->label.data;
  printf("mlp: out0 %dx%d f32 (softmax) max |error| %.3g, out1 %d i64 "
         "(argmax) [%lld %lld %lld %lld]: %s\n",
         N, K, err, N, (long long)label[0], (long long)label[1],
         (long long)label[2], (long long)label[3],
         isfinite(err) ? "OK" : "FAILED");
  return isfinite(err) ? 0 : 1;
}

int main(void) {
  mlp_args a;
  memset(&a, 0, sizeof a);
  int status = run(&a);
  DLTensor *all[] = {&a.x, &a.w1, &a.b1, &a.w2, &a.b2, &a.probs, &a.label};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    tdsl_tensor_free(all[i]);
  return status;
}
