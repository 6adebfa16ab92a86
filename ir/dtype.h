/* dtype.h — element types, PyTorch's promotion table, and scalar
 * conversions (half types, saturating float->int casts). */
#ifndef TDSL_DTYPE_H
#define TDSL_DTYPE_H

#include <stdbool.h>
#include <stdint.h>

#define DTYPE_LIST(X)                                                     \
  X(BOOL, "bool", 1)                                                      \
  X(I8, "i8", 1)                                                          \
  X(U8, "u8", 1)                                                          \
  X(I16, "i16", 2)                                                        \
  X(I32, "i32", 4)                                                        \
  X(I64, "i64", 8)                                                        \
  X(F16, "f16", 2)                                                        \
  X(BF16, "bf16", 2)                                                      \
  X(F32, "f32", 4)                                                        \
  X(F64, "f64", 8)

typedef enum DType {
#define X(e, n, s) DT_##e,
  DTYPE_LIST(X)
#undef X
  DT_COUNT,
  DT_NONE = -1
} DType;

const char *dtype_name(DType t);
DType dtype_from_name(const char *s); /* DT_NONE if not a dtype */
int dtype_size(DType t);              /* bytes */
bool dtype_is_float(DType t);
bool dtype_is_int(DType t); /* integral, excluding bool */
bool dtype_is_signed(DType t);
/* Whether converting from -> to keeps every value and only widens it:
 * an integer to a wider integer, f16/bf16 to f32 (a GEMM or conv operand
 * so converted is read narrow and converted while packing). */
bool dtype_widens(DType from, DType to);
/* torch.promote_types */
DType dtype_promote(DType a, DType b);

/* Half conversions: round to nearest even, overflow to +-inf. */
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);

/* One scalar held in the widest form of its category. */
typedef union Scalar {
  double f;
  int64_t i; /* integers and bool (0/1) */
} Scalar;

/* Reads element `p` of dtype t: floats (and halves) into .f, others .i. */
Scalar scalar_load(DType t, const void *p);
void scalar_store(DType t, void *p, Scalar v);
/* Converts v from dtype `from` to dtype `to` with the spec's cast rules:
 * float->int truncates and saturates (NaN->0), int->int wraps, to half
 * rounds to nearest even, to bool is != 0. */
Scalar scalar_cast(Scalar v, DType from, DType to);

#endif
