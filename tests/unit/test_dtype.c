/* test_dtype.c — dtype names and categories, torch.promote_types (all 100
 * pairs, transcribed from pytorch-semantics.md §5 with i16 placed between
 * i8 and i32), IEEE half conversions at known bit patterns, and the scalar
 * cast rules of tdsl.md §5.4 (ir/dtype.c). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ir/dtype.h"

static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static Scalar F(double d) { return (Scalar){.f = d}; }
static Scalar I(int64_t i) { return (Scalar){.i = i}; }

START_TEST(test_names_sizes) {
  static const char *const want[] = {"bool", "i8", "u8", "i16", "i32",
                                     "i64", "f16", "bf16", "f32", "f64"};
  static const int size[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8};
  ck_assert_int_eq(DT_COUNT, 10);
  for (int t = 0; t < DT_COUNT; t++) {
    ck_assert_str_eq(dtype_name((DType)t), want[t]);
    ck_assert_int_eq(dtype_from_name(want[t]), t);
    ck_assert_int_eq(dtype_size((DType)t), size[t]);
  }
  ck_assert_int_eq(dtype_from_name("float32"), DT_NONE);
  ck_assert_int_eq(dtype_from_name(""), DT_NONE);
  ck_assert_int_eq(dtype_from_name("F32"), DT_NONE);
}
END_TEST

START_TEST(test_categories) {
  for (int t = 0; t < DT_COUNT; t++) {
    bool fl = t >= DT_F16, in = t >= DT_I8 && t <= DT_I64;
    ck_assert_int_eq(dtype_is_float((DType)t), fl);
    ck_assert_int_eq(dtype_is_int((DType)t), in);
  }
  ck_assert(!dtype_is_signed(DT_BOOL));
  ck_assert(!dtype_is_signed(DT_U8));
  ck_assert(dtype_is_signed(DT_I8));
  ck_assert(dtype_is_signed(DT_I64));
  ck_assert(dtype_is_signed(DT_BF16));
  ck_assert(dtype_is_signed(DT_F64));
}
END_TEST

START_TEST(test_promote_table) {
  enum { b1 = DT_BOOL, i8 = DT_I8, u8 = DT_U8, i16 = DT_I16, i32 = DT_I32,
         i64 = DT_I64, f16 = DT_F16, bf = DT_BF16, f32 = DT_F32, f64 = DT_F64 };
  /* Rows and columns in enum order: b1 i8 u8 i16 i32 i64 f16 bf16 f32 f64. */
  static const int want[10][10] = {
      {b1, i8, u8, i16, i32, i64, f16, bf, f32, f64},
      {i8, i8, i16, i16, i32, i64, f16, bf, f32, f64},
      {u8, i16, u8, i16, i32, i64, f16, bf, f32, f64},
      {i16, i16, i16, i16, i32, i64, f16, bf, f32, f64},
      {i32, i32, i32, i32, i32, i64, f16, bf, f32, f64},
      {i64, i64, i64, i64, i64, i64, f16, bf, f32, f64},
      {f16, f16, f16, f16, f16, f16, f16, f32, f32, f64},
      {bf, bf, bf, bf, bf, bf, f32, bf, f32, f64},
      {f32, f32, f32, f32, f32, f32, f32, f32, f32, f64},
      {f64, f64, f64, f64, f64, f64, f64, f64, f64, f64},
  };
  for (int a = 0; a < DT_COUNT; a++)
    for (int b = 0; b < DT_COUNT; b++) {
      ck_assert_msg(want[a][b] == want[b][a], "table not symmetric at %d,%d", a, b);
      ck_assert_msg((int)dtype_promote((DType)a, (DType)b) == want[a][b],
                    "promote(%s, %s) = %s", dtype_name((DType)a), dtype_name((DType)b),
                    dtype_name(dtype_promote((DType)a, (DType)b)));
    }
}
END_TEST

START_TEST(test_f16_known) {
  ck_assert_uint_eq(f32_to_f16(1.0f), 0x3C00);
  ck_assert_uint_eq(f32_to_f16(-2.0f), 0xC000);
  ck_assert_uint_eq(f32_to_f16(0.0f), 0x0000);
  ck_assert_uint_eq(f32_to_f16(-0.0f), 0x8000);
  ck_assert_uint_eq(f32_to_f16(65504.0f), 0x7BFF);
  ck_assert_uint_eq(f32_to_f16(65519.0f), 0x7BFF);
  ck_assert_uint_eq(f32_to_f16(65520.0f), 0x7C00); /* tie, rounds to even = inf */
  ck_assert_uint_eq(f32_to_f16(-1e6f), 0xFC00);
  ck_assert_uint_eq(f32_to_f16(INFINITY), 0x7C00);
  ck_assert_uint_eq(f32_to_f16(0.1f), 0x2E66);
  ck_assert_uint_eq(f32_to_f16(1.0f / 3.0f), 0x3555);
  ck_assert_uint_eq(f32_to_f16(ldexpf(1, -14)), 0x0400); /* smallest normal */
  ck_assert_uint_eq(f32_to_f16(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
  ck_assert_uint_eq(f32_to_f16(ldexpf(1023, -24)), 0x03FF);
  ck_assert_uint_eq(f32_to_f16(ldexpf(1, -25)), 0x0000);  /* tie to even (0) */
  ck_assert_uint_eq(f32_to_f16(ldexpf(3, -25)), 0x0002);  /* tie to even (2) */
  ck_assert_uint_eq(f32_to_f16(ldexpf(5, -25)), 0x0002);  /* tie to even (2) */
  ck_assert_uint_eq(f32_to_f16(bitsf(0x33000001)), 0x0001); /* just over 2^-25 */
  ck_assert_uint_eq(f32_to_f16(ldexpf(1, -26)), 0x0000);
  ck_assert_uint_eq(f32_to_f16(bitsf(0x00000001)), 0x0000); /* f32 subnormal */
  ck_assert_uint_eq(f32_to_f16(1.0f + ldexpf(1, -11)), 0x3C00); /* tie, even */
  ck_assert_uint_eq(f32_to_f16(1.0f + ldexpf(3, -11)), 0x3C02); /* tie, up to even */
  /* Rounding up out of the subnormals into the smallest normal. */
  ck_assert_uint_eq(f32_to_f16(ldexpf(2047, -25)), 0x0400);
  /* NaN stays NaN (including a signalling NaN whose payload is low). */
  uint16_t n = f32_to_f16(NAN);
  ck_assert_uint_eq(n & 0x7C00, 0x7C00);
  ck_assert_uint_ne(n & 0x03FF, 0);
  n = f32_to_f16(bitsf(0x7F800001));
  ck_assert_uint_eq(n & 0x7E00, 0x7E00);

  ck_assert(f16_to_f32(0x3C00) == 1.0f);
  ck_assert(f16_to_f32(0x7BFF) == 65504.0f);
  ck_assert(f16_to_f32(0x0001) == ldexpf(1, -24));
  ck_assert(f16_to_f32(0x03FF) == ldexpf(1023, -24));
  ck_assert(f16_to_f32(0x3555) == 0.333251953125f);
  ck_assert(f16_to_f32(0xC000) == -2.0f);
  ck_assert_uint_eq(fbits(f16_to_f32(0x8000)), 0x80000000u);
  ck_assert(isinf(f16_to_f32(0xFC00)) && f16_to_f32(0xFC00) < 0);
  ck_assert(isnan(f16_to_f32(0x7E00)));
  ck_assert(isnan(f16_to_f32(0x7C01)));
}
END_TEST

START_TEST(test_f16_roundtrip_all) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = f16_to_f32((uint16_t)h);
    if (isnan(f)) continue;
    ck_assert_uint_eq(f32_to_f16(f), h);
  }
}
END_TEST

START_TEST(test_f16_midpoints) {
  /* Between consecutive finite halves a and b: just below the midpoint
   * gives a, just above gives b, the midpoint itself gives the even one. */
  for (uint32_t h = 0; h < 0x7BFF; h++) {
    float a = f16_to_f32((uint16_t)h), b = f16_to_f32((uint16_t)(h + 1));
    float mid = (float)(((double)a + (double)b) / 2); /* exact in f32 */
    ck_assert_uint_eq(f32_to_f16(nextafterf(mid, 0)), h);
    ck_assert_uint_eq(f32_to_f16(nextafterf(mid, INFINITY)), h + 1);
    ck_assert_uint_eq(f32_to_f16(mid), (h & 1) ? h + 1 : h);
  }
}
END_TEST

START_TEST(test_bf16_known) {
  ck_assert_uint_eq(f32_to_bf16(1.0f), 0x3F80);
  ck_assert_uint_eq(f32_to_bf16(-2.0f), 0xC000);
  ck_assert_uint_eq(f32_to_bf16(-0.0f), 0x8000);
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x3F808000)), 0x3F80); /* tie, even */
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x3F818000)), 0x3F82); /* tie, up */
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x3F808001)), 0x3F81);
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x3F807FFF)), 0x3F80);
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x7F7F7FFF)), 0x7F7F);
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x7F7FFFFF)), 0x7F80); /* FLT_MAX -> inf */
  ck_assert_uint_eq(f32_to_bf16(-INFINITY), 0xFF80);
  ck_assert_uint_eq(f32_to_bf16(bitsf(0x00018000)), 0x0002); /* subnormal tie */
  ck_assert_uint_eq(f32_to_bf16(0.1f), 0x3DCD);
  uint16_t n = f32_to_bf16(bitsf(0x7F800001)); /* truncation would give inf */
  ck_assert_uint_eq(n & 0x7FC0, 0x7FC0);
  ck_assert(isnan(bf16_to_f32(f32_to_bf16(-NAN))));
  ck_assert(bf16_to_f32(0x3F80) == 1.0f);
  ck_assert(bf16_to_f32(0x4049) == 3.140625f);
  ck_assert(bf16_to_f32(0x0001) == bitsf(0x00010000));
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = bf16_to_f32((uint16_t)h);
    if (!isnan(f)) ck_assert_uint_eq(f32_to_bf16(f), h);
  }
}
END_TEST

START_TEST(test_float_to_int) {
  ck_assert_int_eq(scalar_cast(F(1e10), DT_F64, DT_I32).i, INT32_MAX);
  ck_assert_int_eq(scalar_cast(F(-1e10), DT_F64, DT_I32).i, INT32_MIN);
  ck_assert_int_eq(scalar_cast(F(NAN), DT_F32, DT_I32).i, 0);
  ck_assert_int_eq(scalar_cast(F(NAN), DT_F64, DT_I64).i, 0);
  ck_assert_int_eq(scalar_cast(F(3.9), DT_F64, DT_I32).i, 3);
  ck_assert_int_eq(scalar_cast(F(-3.9), DT_F64, DT_I32).i, -3);
  ck_assert_int_eq(scalar_cast(F(-0.9), DT_F64, DT_U8).i, 0);
  ck_assert_int_eq(scalar_cast(F(300.0), DT_F32, DT_U8).i, 255);
  ck_assert_int_eq(scalar_cast(F(-5.0), DT_F32, DT_U8).i, 0);
  ck_assert_int_eq(scalar_cast(F(300.0), DT_F32, DT_I8).i, 127);
  ck_assert_int_eq(scalar_cast(F(-300.0), DT_F32, DT_I8).i, -128);
  ck_assert_int_eq(scalar_cast(F(40000.0), DT_F16, DT_I16).i, INT16_MAX);
  ck_assert_int_eq(scalar_cast(F(-127.5), DT_F64, DT_I8).i, -127);
  ck_assert_int_eq(scalar_cast(F(1e30), DT_F64, DT_I64).i, INT64_MAX);
  ck_assert_int_eq(scalar_cast(F(-1e30), DT_F64, DT_I64).i, INT64_MIN);
  ck_assert_int_eq(scalar_cast(F(ldexp(1, 63)), DT_F64, DT_I64).i, INT64_MAX);
  ck_assert_int_eq(scalar_cast(F(-ldexp(1, 63)), DT_F64, DT_I64).i, INT64_MIN);
  ck_assert_int_eq(scalar_cast(F(ldexp(1, 62)), DT_F64, DT_I64).i, INT64_C(1) << 62);
  ck_assert_int_eq(scalar_cast(F(INFINITY), DT_F64, DT_I32).i, INT32_MAX);
  ck_assert_int_eq(scalar_cast(F(-INFINITY), DT_F64, DT_I64).i, INT64_MIN);
}
END_TEST

START_TEST(test_int_wrap) {
  ck_assert_int_eq(scalar_cast(I(300), DT_I32, DT_U8).i, 44);
  ck_assert_int_eq(scalar_cast(I(-1), DT_I32, DT_U8).i, 255);
  ck_assert_int_eq(scalar_cast(I(128), DT_I32, DT_I8).i, -128);
  ck_assert_int_eq(scalar_cast(I(255), DT_U8, DT_I8).i, -1);
  ck_assert_int_eq(scalar_cast(I(65535), DT_I32, DT_I16).i, -1);
  ck_assert_int_eq(scalar_cast(I(32768), DT_I32, DT_I16).i, INT16_MIN);
  ck_assert_int_eq(scalar_cast(I(INT64_C(1) << 31), DT_I64, DT_I32).i, INT32_MIN);
  ck_assert_int_eq(scalar_cast(I(INT64_C(0x123456789)), DT_I64, DT_I32).i, 0x23456789);
  ck_assert_int_eq(scalar_cast(I(INT64_MIN), DT_I64, DT_I32).i, 0);
  ck_assert_int_eq(scalar_cast(I(-1), DT_I8, DT_I64).i, -1);
  ck_assert_int_eq(scalar_cast(I(INT64_MIN), DT_I64, DT_I64).i, INT64_MIN);
  ck_assert_int_eq(scalar_cast(I(-129), DT_I64, DT_I8).i, 127);
}
END_TEST

START_TEST(test_bool_casts) {
  ck_assert_int_eq(scalar_cast(I(256), DT_I32, DT_BOOL).i, 1); /* != 0, no wrap */
  ck_assert_int_eq(scalar_cast(I(0), DT_I32, DT_BOOL).i, 0);
  ck_assert_int_eq(scalar_cast(I(-1), DT_I8, DT_BOOL).i, 1);
  ck_assert_int_eq(scalar_cast(F(0.5), DT_F32, DT_BOOL).i, 1);
  ck_assert_int_eq(scalar_cast(F(0.0), DT_F32, DT_BOOL).i, 0);
  ck_assert_int_eq(scalar_cast(F(-0.0), DT_F64, DT_BOOL).i, 0);
  ck_assert_int_eq(scalar_cast(F(NAN), DT_F64, DT_BOOL).i, 1);
  ck_assert_int_eq(scalar_cast(F(ldexp(1, -30)), DT_F16, DT_BOOL).i, 1);
  ck_assert(scalar_cast(I(1), DT_BOOL, DT_F32).f == 1.0);
  ck_assert(scalar_cast(I(0), DT_BOOL, DT_BF16).f == 0.0);
  ck_assert_int_eq(scalar_cast(I(1), DT_BOOL, DT_I8).i, 1);
  ck_assert_int_eq(scalar_cast(I(1), DT_BOOL, DT_BOOL).i, 1);
}
END_TEST

START_TEST(test_float_casts) {
  ck_assert(scalar_cast(F(0.1), DT_F64, DT_F32).f == (double)0.1f);
  ck_assert(isinf(scalar_cast(F(1e300), DT_F64, DT_F32).f));
  ck_assert(scalar_cast(F(0.1), DT_F64, DT_F64).f == 0.1);
  ck_assert(isinf(scalar_cast(F(65520.0), DT_F64, DT_F16).f));
  ck_assert(scalar_cast(F(65519.0), DT_F64, DT_F16).f == 65504.0);
  ck_assert(scalar_cast(F(0.1), DT_F64, DT_F16).f == (double)f16_to_f32(0x2E66));
  ck_assert(scalar_cast(F(0.1), DT_F64, DT_BF16).f == (double)bf16_to_f32(0x3DCD));
  ck_assert(isnan(scalar_cast(F(NAN), DT_F32, DT_F16).f));
  ck_assert(isnan(scalar_cast(F(NAN), DT_F64, DT_BF16).f));
  ck_assert(scalar_cast(F(1e-300), DT_F64, DT_F16).f == 0.0);
  /* A double just above a half-way point rounds up: rounding through f32
   * first would land exactly on the tie and round down to even. */
  ck_assert(scalar_cast(F(1 + ldexp(1, -11) + ldexp(1, -40)), DT_F64, DT_F16).f ==
            1 + ldexp(1, -10));
  ck_assert(scalar_cast(F(1 + ldexp(1, -11)), DT_F64, DT_F16).f == 1.0);
  ck_assert(scalar_cast(F(1 + ldexp(1, -8) + ldexp(1, -40)), DT_F64, DT_BF16).f ==
            1 + ldexp(1, -7));
  ck_assert(scalar_cast(F(-(1 + ldexp(1, -8) + ldexp(1, -40))), DT_F64, DT_BF16).f ==
            -(1 + ldexp(1, -7)));
  /* Beyond f32's range but below the half's: still rounds, not inf. */
  ck_assert(isinf(scalar_cast(F(1e39), DT_F64, DT_BF16).f));
  /* bf16 subnormals: exact ones stay, far smaller ones flush to 0. */
  ck_assert(scalar_cast(F(-3 * ldexp(1, -131)), DT_F64, DT_BF16).f == -3 * ldexp(1, -131));
  ck_assert(scalar_cast(F(1e-50), DT_F64, DT_BF16).f == 0.0);
}
END_TEST

START_TEST(test_int_to_float) {
  ck_assert(scalar_cast(I(16777217), DT_I64, DT_F32).f == 16777216.0); /* tie, even */
  ck_assert(scalar_cast(I(16777219), DT_I64, DT_F32).f == 16777220.0);
  ck_assert(scalar_cast(I(-7), DT_I32, DT_F64).f == -7.0);
  ck_assert(scalar_cast(I(65519), DT_I32, DT_F16).f == 65504.0);
  ck_assert(isinf(scalar_cast(I(65520), DT_I32, DT_F16).f));
  ck_assert(isinf(scalar_cast(I(INT64_MIN), DT_I64, DT_F16).f));
  ck_assert(scalar_cast(I(2049), DT_I32, DT_F16).f == 2048.0);
  ck_assert(scalar_cast(I(2051), DT_I32, DT_F16).f == 2052.0);
  ck_assert(scalar_cast(I(257), DT_I32, DT_BF16).f == 256.0);
  ck_assert(scalar_cast(I(259), DT_I32, DT_BF16).f == 260.0);
  ck_assert(scalar_cast(I(255), DT_U8, DT_BF16).f == 255.0); /* 8 bits: exact */
  ck_assert(scalar_cast(I(511), DT_I32, DT_BF16).f == 512.0);
  /* 2^40 + 2^32 + 1: just above a bf16 tie; via a rounded f32 it would
   * land on the tie and round to 2^40. */
  int64_t i = (INT64_C(1) << 40) + (INT64_C(1) << 32) + 1;
  ck_assert(scalar_cast(I(i), DT_I64, DT_BF16).f == ldexp(1, 40) + ldexp(1, 33));
  ck_assert(scalar_cast(I(-i), DT_I64, DT_BF16).f == -(ldexp(1, 40) + ldexp(1, 33)));
  ck_assert(scalar_cast(I(INT64_MIN), DT_I64, DT_BF16).f == -ldexp(1, 63));
  ck_assert(scalar_cast(I(INT64_MAX), DT_I64, DT_F64).f == ldexp(1, 63));
}
END_TEST

START_TEST(test_load_store) {
  unsigned char buf[8];
  for (int t = 0; t < DT_COUNT; t++) {
    Scalar v = dtype_is_float((DType)t) ? F(-2.5) : I(t == DT_BOOL ? 1 : t == DT_U8 ? 200 : -100);
    memset(buf, 0xAA, sizeof buf);
    scalar_store((DType)t, buf, v);
    if (dtype_size((DType)t) < 8) ck_assert_uint_eq(buf[dtype_size((DType)t)], 0xAA);
    Scalar r = scalar_load((DType)t, buf);
    if (dtype_is_float((DType)t)) ck_assert(r.f == -2.5);
    else ck_assert_int_eq(r.i, v.i);
  }
  uint16_t h;
  scalar_store(DT_F16, buf, F(1.0));
  memcpy(&h, buf, 2);
  ck_assert_uint_eq(h, 0x3C00);
  scalar_store(DT_BF16, buf, F(1.0));
  memcpy(&h, buf, 2);
  ck_assert_uint_eq(h, 0x3F80);
  scalar_store(DT_F16, buf, F(70000.0));
  memcpy(&h, buf, 2);
  ck_assert_uint_eq(h, 0x7C00);
  int16_t s;
  scalar_store(DT_I16, buf, I(-2));
  memcpy(&s, buf, 2);
  ck_assert_int_eq(s, -2);
  /* bool is one byte holding 0 or 1. */
  scalar_store(DT_BOOL, buf, I(5));
  ck_assert_uint_eq(buf[0], 1);
  scalar_store(DT_BOOL, buf, I(0));
  ck_assert_uint_eq(buf[0], 0);
  buf[0] = 2;
  ck_assert_int_eq(scalar_load(DT_BOOL, buf).i, 1);
  buf[0] = 0xFF;
  ck_assert_int_eq(scalar_load(DT_U8, buf).i, 255);
  ck_assert_int_eq(scalar_load(DT_I8, buf).i, -1);
  /* Halves load as their exact value; f32 loads exactly. */
  h = 0x2E66;
  memcpy(buf, &h, 2);
  ck_assert(scalar_load(DT_F16, buf).f == (double)f16_to_f32(0x2E66));
  float f = 0.1f;
  memcpy(buf, &f, 4);
  ck_assert(scalar_load(DT_F32, buf).f == (double)0.1f);
  int64_t big = INT64_MIN;
  memcpy(buf, &big, 8);
  ck_assert_int_eq(scalar_load(DT_I64, buf).i, INT64_MIN);
}
END_TEST

static Suite *dtype_suite(void) {
  Suite *s = suite_create("dtype");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_names_sizes);
  tcase_add_test(tc, test_categories);
  tcase_add_test(tc, test_promote_table);
  tcase_add_test(tc, test_f16_known);
  tcase_add_test(tc, test_f16_roundtrip_all);
  tcase_add_test(tc, test_f16_midpoints);
  tcase_add_test(tc, test_bf16_known);
  tcase_add_test(tc, test_float_to_int);
  tcase_add_test(tc, test_int_wrap);
  tcase_add_test(tc, test_bool_casts);
  tcase_add_test(tc, test_float_casts);
  tcase_add_test(tc, test_int_to_float);
  tcase_add_test(tc, test_load_store);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(dtype_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
