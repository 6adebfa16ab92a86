/* npy.h — reading and writing NumPy .npy files (format versions 1.0,
 * 2.0 and 3.0; C and Fortran order; little- and big-endian; all tdsl
 * dtypes: |b1 |i1 |u1 <i2 <i4 <i8 <f2 <f4 <f8, and bf16 as raw <u2 bits
 * when the caller asks for bf16). */
#ifndef TDSL_NPY_H
#define TDSL_NPY_H

#include <stddef.h>

#include "../ir/interp.h"

/* Reads `path` into a freshly allocated row-major HostTensor (Fortran
 * order files are transposed on load; big-endian data swapped).
 * `want` resolves the one ambiguity: a <u2 file is read as bf16 when want
 * is DT_BF16; pass DT_NONE otherwise.  Returns 0, or -1 with a message in
 * err ("x.npy: unsupported dtype '<c8'"). */
int npy_read(const char *path, DType want, HostTensor *out, char *err,
             size_t errlen);
/* Same, from memory (the fuzzer's entry). */
int npy_parse(const unsigned char *buf, size_t len, DType want,
              HostTensor *out, char *err, size_t errlen);
/* Writes a tensor (any strides) as a C-order v1.0 file; bf16 as <u2. */
int npy_write(const char *path, const HostTensor *t, char *err,
              size_t errlen);

#endif
