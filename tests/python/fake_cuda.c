/* fake_cuda.c — a stand-in for a `tdslc --target=cuda --emit=so` library,
 * so test_cuda.py exercises the Python package's CUDA path (device checks,
 * the stream handed to tdsl_cuda_set_stream and to __dlpack__(stream=),
 * results on the device, out=) on a machine without a GPU or a CUDA
 * backend.  It exports what spec §7 and the brief of the CUDA runtime
 * promise: one kernel
 *
 *   scale(x: f32[N], a: f32) -> f32[N]      (K_info.device_type == kDLCUDA)
 *
 * whose "device pointers" are host memory, tdsl_so_kernel_count/info,
 * tdsl_last_error/strerror and tdsl_cuda_set_stream/get_stream/synchronize
 * (per thread), plus fake_calls()/fake_last_stream()/fake_last_data()/
 * fake_syncs() for the test to read back.  fake_set_touch(0) makes the
 * kernel leave the data alone (only record it): then real PyTorch CUDA
 * tensors can go through the whole Python path on a GPU machine.  Built by the test with the system C compiler against
 * runtime/include (for the structs); links nothing else. */
#include <stdint.h>
#include <stdio.h>

#include "tdsl/runtime.h"

static _Thread_local char last_error[256];
static _Thread_local void *cur_stream;
static int calls, syncs, touch = 1;
static void *last_stream;
static const void *last_data;

const char *tdsl_last_error(void) { return last_error; }

const char *tdsl_strerror(int code) {
  switch (code) {
  case TDSL_E_NULL: return "TDSL_E_NULL";
  case TDSL_E_RANK: return "TDSL_E_RANK";
  case TDSL_E_DTYPE: return "TDSL_E_DTYPE";
  case TDSL_E_DEVICE: return "TDSL_E_DEVICE";
  default: return "TDSL_E_UNKNOWN";
  }
}

int tdsl_cuda_set_stream(void *stream) {
  cur_stream = stream;
  return TDSL_OK;
}

void *tdsl_cuda_get_stream(void) { return cur_stream; }

int tdsl_cuda_synchronize(void) {
  syncs++;
  return TDSL_OK;
}

int fake_calls(void) { return calls; }
int fake_syncs(void) { return syncs; }
void *fake_last_stream(void) { return last_stream; }
const void *fake_last_data(void) { return last_data; }
void fake_set_touch(int on) { touch = on; }

static int fail(int code, const char *arg, const char *what) {
  snprintf(last_error, sizeof last_error, "kernel scale: argument '%s': %s",
           arg, what);
  return code;
}

static int check(const DLTensor *t, const char *arg) {
  if (!t)
    return fail(TDSL_E_NULL, arg, "tensor descriptor is NULL");
  if (t->ndim != 1)
    return fail(TDSL_E_RANK, arg, "expected rank 1");
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1)
    return fail(TDSL_E_DTYPE, arg, "expected dtype f32");
  if (t->device.device_type != kDLCUDA)
    return fail(TDSL_E_DEVICE, arg, "expected device cuda, got cpu");
  return TDSL_OK;
}

int scale(const DLTensor *x, float a, DLTensor *out0) {
  int rc = check(x, "x");
  if (rc == TDSL_OK)
    rc = check(out0, "out0");
  if (rc != TDSL_OK)
    return rc;
  if (x->device.device_id != out0->device.device_id)
    return fail(TDSL_E_DEVICE, "out0", "on another device than x");
  int64_t n = x->shape[0];
  if (!out0->data) { /* shape query */
    out0->shape[0] = n;
    if (out0->strides)
      out0->strides[0] = 1;
    return TDSL_OK;
  }
  if (out0->shape[0] != n)
    return fail(-5, "out0", "dim 0: expected N");
  int64_t sx = x->strides ? x->strides[0] : 1;
  int64_t so = out0->strides ? out0->strides[0] : 1;
  const float *px = (const float *)((const char *)x->data + x->byte_offset);
  float *po = (float *)((char *)out0->data + out0->byte_offset);
  for (int64_t i = 0; touch && i < n; i++)
    po[i * so] = px[i * sx] * a;
  calls++;
  last_data = px;
  last_stream = cur_stream;
  return TDSL_OK;
}

static const char *const dims_n[] = {"N"};
static const tdsl_param_info params[] = {
    {"x", 1, {kDLFloat, 32, 1}, 1, dims_n, TDSL_LAYOUT_CONTIGUOUS},
    {"a", 0, {kDLFloat, 32, 1}, 0, NULL, TDSL_LAYOUT_CONTIGUOUS},
};
static const tdsl_param_info results[] = {
    {"out0", 1, {kDLFloat, 32, 1}, 1, dims_n, TDSL_LAYOUT_CONTIGUOUS},
};
static const tdsl_kernel_info info = {"scale", 2, params, 1, results,
                                      kDLCUDA, 0, "0"};

const tdsl_kernel_info *scale_info(void) { return &info; }
int tdsl_so_kernel_count(void) { return 1; }
const tdsl_kernel_info *tdsl_so_kernel_info(int i) {
  return i == 0 ? &info : NULL;
}
