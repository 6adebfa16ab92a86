/* preprocess_cuda.c — the preprocessing kernel of preprocess.tdsl on the
 * GPU (compiled with --target=cuda by tdsl_add_library(... TARGET cuda)).
 *
 * Needs: preprocess.h / preprocess.o built for CUDA, libtdsl_runtime (which
 * loads libcuda.so.1 at run time: no CUDA toolkit is needed to build).
 * Produces: exit status 0 when the GPU result matches the C reference
 * within spec §9's f32 tolerance, or when the machine has no GPU and the
 * kernel refuses cleanly (TDSL_E_NO_DEVICE, output untouched, the shape
 * query still answered); 1 otherwise.
 *
 * The steps of a GPU application: pinned host buffers, device buffers,
 * an asynchronous upload, the kernel (enqueued on the runtime's current
 * stream, it returns without waiting), an asynchronous download, and one
 * synchronization, where a fault of the kernel would be reported. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "example_util.h"
#include "preprocess.h"

enum { N = 4, H = 64, W = 48, C = 3 };

static const float k_mean[C] = {0.485f, 0.456f, 0.406f};
static const float k_std[C] = {0.229f, 0.224f, 0.225f};

static DLTensor cuda_tensor(void *data, DLDataType dt, int ndim, int64_t *shape) {
  DLTensor t = {0};
  t.data = data;
  t.device.device_type = kDLCUDA;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = dt;
  t.shape = shape;
  return t;
}

/* out[n, c, h, w] = (frames[n, h, w, c] / 255 - mean[c]) / std[c] in f32. */
static int compare(const uint8_t *px, const float *out) {
  int bad = 0;
  double max_err = 0;
  for (int n = 0; n < N; n++)
    for (int c = 0; c < C; c++)
      for (int h = 0; h < H; h++)
        for (int w = 0; w < W; w++) {
          float x = (float)px[((n * H + h) * W + w) * C + c] / 255.0f;
          float want = (x - k_mean[c]) / k_std[c];
          float got = out[((n * C + c) * H + h) * W + w];
          max_err = fmax(max_err, fabs((double)got - want));
          if (!ex_close(got, want, 1e-5, 1e-6) && bad++ == 0)
            fprintf(stderr, "out0[%d, %d, %d, %d] = %.9g, want %.9g\n", n, c, h, w, got, want);
        }
  printf("preprocess_cuda: max |error| %.3g against the C reference: %s\n", max_err,
         bad ? "FAILED" : "OK");
  return bad ? 1 : 0;
}

/* No GPU: the kernel must answer the shape query and refuse the call
 * with TDSL_E_NO_DEVICE, writing nothing. */
static int without_gpu(void) {
  int64_t fshape[4] = {N, H, W, C}, cshape[1] = {C}, oshape[4] = {0};
  static uint8_t frames_mem[N * H * W * C];
  static float mean_mem[C], std_mem[C], out_mem[N * C * H * W];
  DLTensor frames = cuda_tensor(frames_mem, TDSL_U8, 4, fshape);
  DLTensor mean = cuda_tensor(mean_mem, TDSL_F32, 1, cshape);
  DLTensor std = cuda_tensor(std_mem, TDSL_F32, 1, cshape);
  DLTensor q = cuda_tensor(NULL, TDSL_F32, 4, oshape);
  int rc = preprocess(&frames, &mean, &std, &q);
  printf("shape query without a GPU: %s, out0 [%lld, %lld, %lld, %lld]\n", tdsl_strerror(rc),
         (long long)oshape[0], (long long)oshape[1], (long long)oshape[2], (long long)oshape[3]);
  if (rc != TDSL_OK || oshape[1] != C || oshape[2] != H) return 1;
  memset(out_mem, 0x5a, sizeof out_mem);
  DLTensor out = cuda_tensor(out_mem, TDSL_F32, 4, oshape);
  rc = preprocess(&frames, &mean, &std, &out);
  printf("call without a GPU: %s: %s\n", tdsl_strerror(rc), tdsl_last_error());
  for (size_t i = 0; i < sizeof out_mem; i++)
    if (((unsigned char *)out_mem)[i] != 0x5a) return 1;
  return rc == TDSL_E_NO_DEVICE ? 0 : 1;
}

static int check(int rc, const char *what) {
  if (rc != TDSL_OK) fprintf(stderr, "preprocess_cuda: %s: %s: %s\n", what, tdsl_strerror(rc),
                             tdsl_last_error());
  return rc != TDSL_OK;
}

int main(void) {
  int ndev = 0;
  if (tdsl_cuda_device_count(&ndev) != TDSL_OK) {
    printf("preprocess_cuda: no GPU here (%s); checking the clean refusal instead\n",
           tdsl_last_error());
    return without_gpu();
  }
  ex_print_signature(preprocess_info());
  size_t in_bytes = (size_t)N * H * W * C, out_bytes = (size_t)N * C * H * W * sizeof(float);
  uint8_t *px = NULL;
  float *host_out = NULL;
  void *d_frames = NULL, *d_mean = NULL, *d_std = NULL, *d_out = NULL;
  int bad = check(tdsl_cuda_malloc_host((void **)&px, in_bytes), "pinned frames") ||
            check(tdsl_cuda_malloc_host((void **)&host_out, out_bytes), "pinned output") ||
            check(tdsl_cuda_malloc(&d_frames, in_bytes, 0), "device frames") ||
            check(tdsl_cuda_malloc(&d_mean, sizeof k_mean, 0), "device mean") ||
            check(tdsl_cuda_malloc(&d_std, sizeof k_std, 0), "device std") ||
            check(tdsl_cuda_malloc(&d_out, out_bytes, 0), "device output");
  if (!bad) {
    ex_rng rng = {0x5eed0002u};
    for (size_t i = 0; i < in_bytes; i++) px[i] = (uint8_t)(ex_next(&rng) >> 56);
    int64_t fshape[4] = {N, H, W, C}, cshape[1] = {C}, oshape[4] = {N, C, H, W};
    DLTensor frames = cuda_tensor(d_frames, TDSL_U8, 4, fshape);
    DLTensor mean = cuda_tensor(d_mean, TDSL_F32, 1, cshape);
    DLTensor std = cuda_tensor(d_std, TDSL_F32, 1, cshape);
    DLTensor out = cuda_tensor(d_out, TDSL_F32, 4, oshape);
    bad = check(tdsl_cuda_memcpy_htod(d_frames, px, in_bytes), "upload") ||
          check(tdsl_cuda_memcpy_htod(d_mean, k_mean, sizeof k_mean), "upload") ||
          check(tdsl_cuda_memcpy_htod(d_std, k_std, sizeof k_std), "upload") ||
          check(preprocess(&frames, &mean, &std, &out), "preprocess") ||
          check(tdsl_cuda_memcpy_dtoh(host_out, d_out, out_bytes), "download") ||
          check(tdsl_cuda_synchronize(), "synchronize");
    if (!bad) bad = compare(px, host_out);
  }
  tdsl_cuda_free(d_frames);
  tdsl_cuda_free(d_mean);
  tdsl_cuda_free(d_std);
  tdsl_cuda_free(d_out);
  tdsl_cuda_free_host(px);
  tdsl_cuda_free_host(host_out);
  return bad;
}
