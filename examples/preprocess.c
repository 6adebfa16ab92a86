/* preprocess.c — calls the compiled kernel of preprocess.tdsl from C.
 *
 * Needs: preprocess.h / preprocess.o from tdslc (tdsl_add_library) and
 * libtdsl_runtime.
 * Produces: exit status 0 when the kernel's result matches the reference
 * below within spec §9's elementwise f32 tolerance and the error checks
 * behave as documented, 1 otherwise; prints what it checked.
 *
 * Walks through the C ABI of spec §7: build DLPack inputs with the
 * runtime's helpers, ask the kernel for the output shape (data == NULL),
 * allocate the output, call, compare, then show a rejected call and
 * tdsl_last_error(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"
#include "preprocess.h"

enum { N = 2, H = 8, W = 8, C = 3 };

static const float k_mean[C] = {0.485f, 0.456f, 0.406f};
static const float k_std[C] = {0.229f, 0.224f, 0.225f};

/* frames: u8[N, H, W, 3] of pseudo-random pixels; mean, std: f32[3]. */
static int make_inputs(DLTensor *frames, DLTensor *mean, DLTensor *std) {
  const int64_t fshape[4] = {N, H, W, C};
  const int64_t cshape[1] = {C};
  if (tdsl_tensor_alloc(frames, TDSL_U8, 4, fshape) != TDSL_OK ||
      tdsl_tensor_alloc(mean, TDSL_F32, 1, cshape) != TDSL_OK ||
      tdsl_tensor_alloc(std, TDSL_F32, 1, cshape) != TDSL_OK)
    return -1;
  ex_rng rng = {0x5eed0001u};
  uint8_t *px = frames->data;
  for (int64_t i = 0; i < tdsl_tensor_numel(frames); i++)
    px[i] = (uint8_t)(ex_next(&rng) >> 56);
  memcpy(mean->data, k_mean, sizeof k_mean);
  memcpy(std->data, k_std, sizeof k_std);
  return 0;
}

/* The reference, straight from the kernel text and PyTorch's rules:
 * out[n, c, h, w] = (f32(frames[n, h, w, c]) / 255 - mean[c]) / std[c],
 * every step in f32 (a Python float does not promote an f32 tensor).
 * Returns the largest |error|, or INFINITY if any element is not close. */
static double compare(const DLTensor *frames, const DLTensor *out) {
  double max_err = 0.0;
  int ok = 1;
  for (int64_t n = 0; n < N; n++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t w = 0; w < W; w++) {
          const int64_t fi[4] = {n, h, w, c};
          const int64_t oi[4] = {n, c, h, w};
          float x = (float)*(const uint8_t *)ex_elem(frames, fi) / 255.0f;
          float want = (x - k_mean[c]) / k_std[c];
          float got = *(const float *)ex_elem(out, oi);
          double err = fabs((double)got - (double)want);
          if (!ex_close(got, want, 1e-5, 1e-6)) {
            if (ok)
              fprintf(stderr, "out0[%lld, %lld, %lld, %lld] = %.9g, want %.9g\n",
                      (long long)n, (long long)c, (long long)h, (long long)w,
                      got, want);
            ok = 0;
          }
          if (err > max_err)
            max_err = err;
        }
  return ok ? max_err : INFINITY;
}

/* Shape query: every output with data == NULL gets its shape written and
 * nothing is computed. Fills out_shape; 0 when it is [N, 3, H, W]. */
static int query_shape(const DLTensor *frames, const DLTensor *mean,
                       const DLTensor *std, int64_t out_shape[4]) {
  DLTensor q = ex_query_tensor(TDSL_F32, 4, out_shape);
  int rc = preprocess(frames, mean, std, &q);
  if (rc != TDSL_OK) {
    fprintf(stderr, "shape query failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return -1;
  }
  char buf[64];
  printf("shape query: out0 is %s\n", ex_shape_str(&q, buf, sizeof buf));
  const int64_t want[4] = {N, C, H, W};
  return memcmp(out_shape, want, sizeof want) == 0 ? 0 : -1;
}

/* A mean of 4 channels contradicts f32[3]: the kernel must refuse with
 * TDSL_E_SHAPE, say why, and leave the output untouched. */
static int show_rejection(const DLTensor *frames, const DLTensor *std,
                          DLTensor *out) {
  const int64_t bad_shape[1] = {4};
  DLTensor bad_mean;
  if (tdsl_tensor_alloc(&bad_mean, TDSL_F32, 1, bad_shape) != TDSL_OK)
    return -1;
  size_t bytes = (size_t)tdsl_tensor_numel(out) * sizeof(float);
  void *before = malloc(bytes);
  int ok = before != NULL;
  if (ok) {
    memcpy(before, out->data, bytes);
    int rc = preprocess(frames, &bad_mean, std, out);
    printf("bad mean f32[4]: %s: %s\n", tdsl_strerror(rc), tdsl_last_error());
    ok = rc == TDSL_E_SHAPE && tdsl_last_error()[0] != '\0' &&
         memcmp(before, out->data, bytes) == 0;
  }
  free(before);
  tdsl_tensor_free(&bad_mean);
  return ok ? 0 : -1;
}

/* Everything between allocation and release; returns the exit status. */
static int run(DLTensor *frames, DLTensor *mean, DLTensor *std,
               DLTensor *out) {
  int64_t out_shape[4] = {0};
  ex_print_signature(preprocess_info());
  if (make_inputs(frames, mean, std) != 0) {
    fprintf(stderr, "preprocess: %s\n", tdsl_last_error());
    return 1;
  }
  if (query_shape(frames, mean, std, out_shape) != 0)
    return 1;
  if (tdsl_tensor_alloc(out, TDSL_F32, 4, out_shape) != TDSL_OK) {
    fprintf(stderr, "preprocess: %s\n", tdsl_last_error());
    return 1;
  }
  int rc = preprocess(frames, mean, std, out);
  if (rc != TDSL_OK) {
    fprintf(stderr, "preprocess failed: %s: %s\n", tdsl_strerror(rc),
            tdsl_last_error());
    return 1;
  }
  double err = compare(frames, out);
  if (show_rejection(frames, std, out) != 0) {
    fprintf(stderr, "preprocess: the bad call was not rejected as expected\n");
    return 1;
  }
  char buf[64];
  printf("preprocess: out0 %s f32 on %d threads, max |error| %.3g: %s\n",
         ex_shape_str(out, buf, sizeof buf), tdsl_get_num_threads(), err,
         isfinite(err) ? "OK" : "FAILED");
  return isfinite(err) ? 0 : 1;
}

int main(void) {
  DLTensor frames = {0}, mean = {0}, std = {0}, out = {0};
  int status = run(&frames, &mean, &std, &out);
  tdsl_tensor_free(&frames);
  tdsl_tensor_free(&mean);
  tdsl_tensor_free(&std);
  tdsl_tensor_free(&out);
  return status;
}
