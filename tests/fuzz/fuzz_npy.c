/* fuzz_npy.c — libFuzzer target over npy_parse: any byte sequence must
 * give either a tensor or a message, never a crash, leak or overread.
 * Alternates the bf16 request so the <u2 path is reached too.  When a
 * parse succeeds, the tensor is written back out and reread, which must
 * reproduce the same dtype, shape and bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_round_trip(const HostTensor *t, DType want) {
  char path[64], err[512];
  snprintf(path, sizeof path, "/tmp/fuzz_npy_%ld.npy", (long)getpid());
  if (npy_write(path, t, err, sizeof err)) abort();
  HostTensor r;
  if (npy_read(path, want, &r, err, sizeof err)) abort();
  if (r.dtype != t->dtype || r.rank != t->rank) abort();
  for (int d = 0; d < t->rank; d++)
    if (r.shape[d] != t->shape[d]) abort();
  size_t bytes = (size_t)host_tensor_numel(t) * (size_t)dtype_size(t->dtype);
  if (bytes && memcmp(r.data, t->data, bytes) != 0) abort();
  host_tensor_free(&r);
  unlink(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err[512];
  HostTensor t;
  DType want = size && (data[size - 1] & 1) ? DT_BF16 : DT_NONE;
  if (npy_parse(data, size, want, &t, err, sizeof err) == 0) {
    if (size < 1 << 16) check_round_trip(&t, want);
    host_tensor_free(&t);
  } else if (err[0] == '\0') {
    abort(); /* every failure must say why */
  }
  return 0;
}
