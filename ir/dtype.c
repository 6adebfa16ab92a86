/* dtype.c — element types: names, sizes, categories, torch.promote_types,
 * IEEE half conversions and the spec's scalar cast rules (§5.4).
 *
 * Needs: nothing beyond libc and libm (C17 with IEEE 754 floats, Annex F).
 * Produces: the dtype.h API.
 *
 * Rounding to f16/bf16 is round-to-nearest-even with a single rounding:
 * a double (or int64) is first narrowed to f32 with round-to-odd, which
 * keeps enough information (24 >= 11 + 2 bits) for the following
 * nearest-even rounding to give the same result as rounding directly. */
#include "dtype.h"

#include <math.h>
#include <string.h>

static const char *const names[] = {
#define X(e, n, s) n,
    DTYPE_LIST(X)
#undef X
};

static const int sizes[] = {
#define X(e, n, s) s,
    DTYPE_LIST(X)
#undef X
};

static bool valid(DType t) { return t >= 0 && t < DT_COUNT; }

const char *dtype_name(DType t) { return valid(t) ? names[t] : "none"; }

DType dtype_from_name(const char *s) {
  for (int i = 0; i < DT_COUNT; i++)
    if (strcmp(s, names[i]) == 0) return (DType)i;
  return DT_NONE;
}

int dtype_size(DType t) { return valid(t) ? sizes[t] : 0; }

bool dtype_is_float(DType t) {
  return t == DT_F16 || t == DT_BF16 || t == DT_F32 || t == DT_F64;
}

bool dtype_is_int(DType t) {
  return t == DT_I8 || t == DT_U8 || t == DT_I16 || t == DT_I32 || t == DT_I64;
}

/* As torch.is_signed: signed integers and every float type. */
bool dtype_is_signed(DType t) { return dtype_is_float(t) || (dtype_is_int(t) && t != DT_U8); }

bool dtype_widens(DType from, DType to) {
  if (dtype_is_int(from) && dtype_is_int(to)) return dtype_size(to) > dtype_size(from);
  return (from == DT_F16 || from == DT_BF16) && to == DT_F32;
}

/* ---- promotion ---- */

static DType promote_ints(DType a, DType b) {
  if (a == DT_U8 || b == DT_U8) {
    DType s = a == DT_U8 ? b : a; /* the signed one (or u8 itself) */
    if (s == DT_U8) return DT_U8;
    return s == DT_I8 ? DT_I16 : s; /* u8 fits in any wider signed type */
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

static DType promote_floats(DType a, DType b) {
  if ((a == DT_F16 && b == DT_BF16) || (a == DT_BF16 && b == DT_F16)) return DT_F32;
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

/* torch.promote_types (pytorch-semantics.md §5): bool yields to anything;
 * a float beats any integer; within a category the wider wins, with u8
 * and i8 meeting at i16 and f16 and bf16 meeting at f32. */
DType dtype_promote(DType a, DType b) {
  if (!valid(a) || !valid(b)) return DT_NONE;
  if (a == b || b == DT_BOOL) return a;
  if (a == DT_BOOL) return b;
  bool fa = dtype_is_float(a), fb = dtype_is_float(b);
  if (fa && fb) return promote_floats(a, b);
  if (fa) return a;
  if (fb) return b;
  return promote_ints(a, b);
}

/* ---- half conversions ---- */

static uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Shifts m right by s (1 <= s <= 31) rounding to nearest even. */
static uint32_t shift_rne(uint32_t m, int s) {
  uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
  if (rem > half || (rem == half && (q & 1))) q++;
  return q;
}

uint16_t f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int exp = (int)((x >> 23) & 0xff);
  uint32_t mant = x & 0x7fffff;
  if (exp == 0xff) /* inf, or NaN made quiet with its top payload bits */
    return (uint16_t)(sign | 0x7c00 | (mant ? 0x200 | (mant >> 13) : 0));
  int e = exp - 127;
  if (e > 15) return sign | 0x7c00;
  if (e >= -14) {
    /* Normal: a carry out of the mantissa bumps the exponent, and out of
     * exponent 30 gives exactly the infinity encoding. */
    uint32_t v = ((uint32_t)(e + 15) << 10 | mant >> 13);
    uint32_t rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) v++;
    return (uint16_t)(sign | v);
  }
  /* Subnormal result, in units of 2^-24: value = (mant|1<<23) * 2^(e+1). */
  if (exp == 0 || e < -25) return sign; /* below half the smallest step */
  return (uint16_t)(sign | shift_rne(mant | 0x800000, -e - 1));
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  int exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in f32 */
    float v = ldexpf((float)mant, -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_f32(sign | 0x7f800000 | (mant ? 0x400000 | mant << 13 : 0));
  return bits_f32(sign | (uint32_t)(exp - 15 + 127) << 23 | mant << 13);
}

uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
  /* Nearest even on the low 16 bits; overflow carries into infinity. */
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

float bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

/* ---- narrowing with round-to-odd ---- */

/* d truncated toward zero to f32, with the last bit set when inexact. */
static float f32_odd_from_f64(double d) {
  if (isnan(d) || isinf(d)) return (float)d;
  float f = (float)d;
  if ((double)f == d) return f;
  uint32_t u = f32_bits(f);
  if (fabs((double)f) > fabs(d)) u--; /* step toward zero (inf -> max) */
  return bits_f32(u | 1);
}

/* i as f32 with round-to-odd, computed on the integer. */
static float f32_odd_from_i64(int64_t i) {
  uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
  int s = 0;
  while ((u >> s) >= (UINT64_C(1) << 24)) s++;
  uint64_t m = u >> s;
  if (s && (u & ((UINT64_C(1) << s) - 1))) m |= 1;
  float f = ldexpf((float)m, s);
  return i < 0 ? -f : f;
}

static uint16_t f64_to_f16(double d) { return f32_to_f16(f32_odd_from_f64(d)); }
static uint16_t f64_to_bf16(double d) { return f32_to_bf16(f32_odd_from_f64(d)); }

/* ---- scalars ---- */

/* The low bits of v as a value of integer type t (two's complement). */
static int64_t wrap_int(uint64_t v, DType t) {
  switch (t) {
  case DT_BOOL: return v != 0;
  case DT_U8: return (int64_t)(v & 0xff);
  case DT_I8: v &= 0xff; return v & 0x80 ? (int64_t)v - 0x100 : (int64_t)v;
  case DT_I16: v &= 0xffff; return v & 0x8000 ? (int64_t)v - 0x10000 : (int64_t)v;
  case DT_I32:
    v &= 0xffffffffu;
    return v & 0x80000000u ? (int64_t)v - INT64_C(0x100000000) : (int64_t)v;
  default: /* i64: reinterpret without an out-of-range conversion */
    return v >> 63 ? -(int64_t)(~v) - 1 : (int64_t)v;
  }
}

Scalar scalar_load(DType t, const void *p) {
  Scalar r = {.i = 0};
  uint8_t u8;
  int8_t i8;
  int16_t i16;
  int32_t i32;
  uint16_t h;
  float f;
  switch (t) {
  case DT_BOOL: memcpy(&u8, p, 1); r.i = u8 != 0; break;
  case DT_U8: memcpy(&u8, p, 1); r.i = u8; break;
  case DT_I8: memcpy(&i8, p, 1); r.i = i8; break;
  case DT_I16: memcpy(&i16, p, 2); r.i = i16; break;
  case DT_I32: memcpy(&i32, p, 4); r.i = i32; break;
  case DT_I64: memcpy(&r.i, p, 8); break;
  case DT_F16: memcpy(&h, p, 2); r.f = f16_to_f32(h); break;
  case DT_BF16: memcpy(&h, p, 2); r.f = bf16_to_f32(h); break;
  case DT_F32: memcpy(&f, p, 4); r.f = f; break;
  case DT_F64: memcpy(&r.f, p, 8); break;
  default: break;
  }
  return r;
}

/* v is in t's category (.f for floats, .i otherwise); integers are
 * stored modulo 2^bits, floats rounded to nearest even. */
void scalar_store(DType t, void *p, Scalar v) {
  int64_t w = dtype_is_float(t) ? 0 : wrap_int((uint64_t)v.i, t);
  uint8_t b = (uint8_t)(w & 0xff);
  int16_t i16 = (int16_t)w; /* w already in range: no wrap here */
  int32_t i32 = (int32_t)w;
  uint16_t h;
  float f;
  switch (t) {
  case DT_BOOL:
  case DT_U8:
  case DT_I8: memcpy(p, &b, 1); break;
  case DT_I16: memcpy(p, &i16, 2); break;
  case DT_I32: memcpy(p, &i32, 4); break;
  case DT_I64: memcpy(p, &w, 8); break;
  case DT_F16: h = f64_to_f16(v.f); memcpy(p, &h, 2); break;
  case DT_BF16: h = f64_to_bf16(v.f); memcpy(p, &h, 2); break;
  case DT_F32: f = (float)v.f; memcpy(p, &f, 4); break;
  case DT_F64: memcpy(p, &v.f, 8); break;
  default: break;
  }
}

/* Truncation toward zero, saturated to t's range; NaN gives 0. */
static int64_t float_to_int(double d, DType t) {
  static const int64_t lo[] = {[DT_I8] = INT8_MIN, [DT_U8] = 0, [DT_I16] = INT16_MIN,
                               [DT_I32] = INT32_MIN, [DT_I64] = INT64_MIN};
  static const int64_t hi[] = {[DT_I8] = INT8_MAX, [DT_U8] = UINT8_MAX, [DT_I16] = INT16_MAX,
                               [DT_I32] = INT32_MAX, [DT_I64] = INT64_MAX};
  if (isnan(d)) return 0;
  double x = trunc(d);
  /* (double)INT64_MAX is 2^63, so >= catches everything out of range. */
  if (x <= (double)lo[t]) return lo[t];
  if (x >= (double)hi[t]) return hi[t];
  return (int64_t)x;
}

/* A double rounded to dtype t (a float type), returned as a double. */
static double round_float(double d, DType t) {
  switch (t) {
  case DT_F16: return f16_to_f32(f64_to_f16(d));
  case DT_BF16: return bf16_to_f32(f64_to_bf16(d));
  case DT_F32: return (float)d;
  default: return d;
  }
}

static double int_to_float(int64_t i, DType t) {
  switch (t) {
  case DT_F16: return f16_to_f32(f32_to_f16(f32_odd_from_i64(i)));
  case DT_BF16: return bf16_to_f32(f32_to_bf16(f32_odd_from_i64(i)));
  case DT_F32: return (float)i; /* one correctly rounded conversion */
  default: return (double)i;
  }
}

Scalar scalar_cast(Scalar v, DType from, DType to) {
  Scalar r = {.i = 0};
  if (dtype_is_float(from)) {
    if (to == DT_BOOL) r.i = v.f != 0; /* NaN != 0: true, as in PyTorch */
    else if (dtype_is_float(to)) r.f = round_float(v.f, to);
    else r.i = float_to_int(v.f, to);
  } else {
    if (dtype_is_float(to)) r.f = int_to_float(v.i, to);
    else r.i = wrap_int((uint64_t)v.i, to);
  }
  return r;
}
