/* test_npy.c — .npy reading and writing: round trips for every dtype
 * (bf16 as <u2, 0-dim, size-0 shapes, strided views), hand-made v2.0/3.0,
 * Fortran-order and big-endian files, and malformed inputs that must each
 * give their specific message.  Needs: driver/npy.c, a temp directory. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "driver/npy.h"

static char tmpdir[64];
static char errbuf[512];

static void make_tmpdir(void) {
  snprintf(tmpdir, sizeof tmpdir, "/tmp/test_npy_XXXXXX");
  ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
  ck_assert_int_eq(system(cmd), 0);
}

static const char *tmp_path(const char *name) {
  static char p[128];
  snprintf(p, sizeof p, "%s/%s", tmpdir, name);
  return p;
}

/* Builds a .npy image: preamble of version major.0, the header text
 * padded with spaces to end in '\n', then `data`.  Returns its length. */
static size_t make_npy(unsigned char *out, int major, const char *dict,
                       const void *data, size_t datalen) {
  size_t pre = major == 1 ? 10 : 12;
  size_t hlen = strlen(dict) + 1;
  hlen += (64 - (pre + hlen) % 64) % 64;
  memcpy(out, "\x93NUMPY", 6);
  out[6] = (unsigned char)major;
  out[7] = 0;
  out[8] = (unsigned char)(hlen & 0xff);
  out[9] = (unsigned char)(hlen >> 8);
  if (major != 1) out[10] = out[11] = 0;
  memset(out + pre, ' ', hlen);
  memcpy(out + pre, dict, strlen(dict));
  out[pre + hlen - 1] = '\n';
  if (datalen) memcpy(out + pre + hlen, data, datalen);
  return pre + hlen + datalen;
}

static int parse_dict(const char *dict, const void *data, size_t n,
                      DType want, HostTensor *t) {
  static unsigned char buf[4096];
  size_t len = make_npy(buf, 1, dict, data, n);
  return npy_parse(buf, len, want, t, errbuf, sizeof errbuf);
}

/* Fills a 2x3 tensor of dtype dt with distinct element bit patterns. */
static void fill_pattern(HostTensor *t, DType dt) {
  int64_t shape[2] = {2, 3};
  ck_assert_int_eq(host_tensor_alloc(t, dt, 2, shape), 0);
  unsigned char *p = t->data;
  int es = dtype_size(dt);
  for (int i = 0; i < 6 * es; i++)
    p[i] = dt == DT_BOOL ? (unsigned char)(i % 2) : (unsigned char)(17 * i + 3);
}

START_TEST(round_trip_every_dtype) {
  make_tmpdir();
  for (int dt = 0; dt < DT_COUNT; dt++) {
    HostTensor t, r;
    fill_pattern(&t, (DType)dt);
    const char *path = tmp_path("rt.npy");
    ck_assert_msg(npy_write(path, &t, errbuf, sizeof errbuf) == 0, "%s",
                  errbuf);
    DType want = dt == DT_BF16 ? DT_BF16 : DT_NONE;
    ck_assert_msg(npy_read(path, want, &r, errbuf, sizeof errbuf) == 0, "%s",
                  errbuf);
    ck_assert_int_eq(r.dtype, dt);
    ck_assert_int_eq(r.rank, 2);
    ck_assert_int_eq(r.shape[0], 2);
    ck_assert_int_eq(r.shape[1], 3);
    ck_assert_int_eq(r.stride[0], 3);
    ck_assert_int_eq(r.stride[1], 1);
    ck_assert_mem_eq(r.data, t.data, (size_t)(6 * dtype_size((DType)dt)));
    host_tensor_free(&t);
    host_tensor_free(&r);
  }
  remove_tmpdir();
}
END_TEST

/* bf16 goes out as <u2; read without asking for bf16 it is refused. */
START_TEST(bf16_is_u2) {
  make_tmpdir();
  HostTensor t, r;
  fill_pattern(&t, DT_BF16);
  const char *path = tmp_path("bf.npy");
  ck_assert_int_eq(npy_write(path, &t, errbuf, sizeof errbuf), 0);
  FILE *f = fopen(path, "rb");
  char head[128] = {0};
  ck_assert_uint_gt(fread(head, 1, sizeof head - 1, f), 64);
  fclose(f);
  ck_assert_ptr_nonnull(strstr(head + 10, "'descr': '<u2'"));
  ck_assert_int_eq(npy_read(path, DT_F32, &r, errbuf, sizeof errbuf), -1);
  ck_assert_ptr_nonnull(strstr(errbuf, "bf16"));
  ck_assert_ptr_nonnull(strstr(errbuf, "'<u2'"));
  host_tensor_free(&t);
  remove_tmpdir();
}
END_TEST

/* The written header: v1.0, data aligned to 64, C order, (3,) for rank 1. */
START_TEST(header_layout) {
  make_tmpdir();
  HostTensor t, r;
  int64_t shape[1] = {3};
  ck_assert_int_eq(host_tensor_alloc(&t, DT_F32, 1, shape), 0);
  float v[3] = {1.5f, -2.0f, 0.25f};
  memcpy(t.data, v, sizeof v);
  const char *path = tmp_path("h.npy");
  ck_assert_int_eq(npy_write(path, &t, errbuf, sizeof errbuf), 0);
  unsigned char buf[256];
  FILE *f = fopen(path, "rb");
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  ck_assert_mem_eq(buf, "\x93NUMPY\x01\x00", 8);
  size_t hlen = buf[8] | (size_t)buf[9] << 8;
  ck_assert_uint_eq((10 + hlen) % 64, 0);
  ck_assert_uint_eq(n, 10 + hlen + 12);
  ck_assert_int_eq(buf[10 + hlen - 1], '\n');
  buf[10 + hlen - 1] = 0;
  ck_assert_ptr_nonnull(strstr((char *)buf + 10, "'fortran_order': False"));
  ck_assert_ptr_nonnull(strstr((char *)buf + 10, "'shape': (3,)"));
  ck_assert_ptr_nonnull(strstr((char *)buf + 10, "'descr': '<f4'"));
  ck_assert_int_eq(npy_read(path, DT_NONE, &r, errbuf, sizeof errbuf), 0);
  ck_assert_mem_eq(r.data, v, sizeof v);
  host_tensor_free(&t);
  host_tensor_free(&r);
  remove_tmpdir();
}
END_TEST

START_TEST(zero_dim_and_size_zero) {
  make_tmpdir();
  HostTensor t, r;
  ck_assert_int_eq(host_tensor_alloc(&t, DT_F64, 0, NULL), 0);
  *(double *)t.data = 3.25;
  const char *path = tmp_path("s.npy");
  ck_assert_int_eq(npy_write(path, &t, errbuf, sizeof errbuf), 0);
  ck_assert_int_eq(npy_read(path, DT_NONE, &r, errbuf, sizeof errbuf), 0);
  ck_assert_int_eq(r.rank, 0);
  ck_assert_double_eq(*(double *)r.data, 3.25);
  host_tensor_free(&t);
  host_tensor_free(&r);

  int64_t shapes[2][3] = {{0, 3, 1}, {2, 0, 4}};
  for (int s = 0; s < 2; s++) {
    ck_assert_int_eq(host_tensor_alloc(&t, DT_I32, 3, shapes[s]), 0);
    ck_assert_int_eq(npy_write(path, &t, errbuf, sizeof errbuf), 0);
    ck_assert_int_eq(npy_read(path, DT_NONE, &r, errbuf, sizeof errbuf), 0);
    ck_assert_int_eq(r.rank, 3);
    for (int d = 0; d < 3; d++) ck_assert_int_eq(r.shape[d], shapes[s][d]);
    ck_assert_int_eq(host_tensor_numel(&r), 0);
    host_tensor_free(&t);
    host_tensor_free(&r);
  }
  remove_tmpdir();
}
END_TEST

/* A transposed view with an offset and a broadcast (stride-0) view are
 * written in logical row-major order. */
START_TEST(write_strided_views) {
  make_tmpdir();
  int32_t store[8] = {99, 0, 1, 2, 3, 4, 5, 99};
  HostTensor v = {.dtype = DT_I32, .rank = 2, .shape = {3, 2},
                  .stride = {1, 3}, .offset = 1, .data = store};
  HostTensor r;
  const char *path = tmp_path("v.npy");
  ck_assert_int_eq(npy_write(path, &v, errbuf, sizeof errbuf), 0);
  ck_assert_int_eq(npy_read(path, DT_NONE, &r, errbuf, sizeof errbuf), 0);
  int32_t want[6] = {0, 3, 1, 4, 2, 5}; /* transpose of [[0,1,2],[3,4,5]] */
  ck_assert_mem_eq(r.data, want, sizeof want);
  host_tensor_free(&r);

  HostTensor e = {.dtype = DT_I32, .rank = 2, .shape = {2, 3},
                  .stride = {0, 1}, .offset = 2, .data = store};
  ck_assert_int_eq(npy_write(path, &e, errbuf, sizeof errbuf), 0);
  ck_assert_int_eq(npy_read(path, DT_NONE, &r, errbuf, sizeof errbuf), 0);
  int32_t want2[6] = {1, 2, 3, 1, 2, 3};
  ck_assert_mem_eq(r.data, want2, sizeof want2);
  host_tensor_free(&r);
  remove_tmpdir();
}
END_TEST

START_TEST(version_2_and_3) {
  unsigned char buf[512];
  int16_t d[2] = {-7, 300};
  for (int major = 2; major <= 3; major++) {
    size_t n = make_npy(buf, major,
                        "{'descr': '<i2', 'fortran_order': False, "
                        "'shape': (2,), }", d, sizeof d);
    HostTensor t;
    ck_assert_msg(npy_parse(buf, n, DT_NONE, &t, errbuf, sizeof errbuf) == 0,
                  "%s", errbuf);
    ck_assert_int_eq(t.dtype, DT_I16);
    ck_assert_mem_eq(t.data, d, sizeof d);
    host_tensor_free(&t);
  }
}
END_TEST

/* Fortran order: element (i, j) of a 2x3 array is at file position
 * i + 2*j; it must land at row-major position 3*i + j. */
START_TEST(fortran_order_transposes) {
  float file[6] = {0, 10, 1, 11, 2, 12}; /* value 10*i + j */
  HostTensor t;
  ck_assert_int_eq(parse_dict("{'shape': (2, 3), 'fortran_order': True, "
                              "'descr': '<f4'}", file, sizeof file, DT_NONE,
                              &t), 0);
  float *p = t.data;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++)
      ck_assert_float_eq(p[3 * i + j], (float)(10 * i + j));
  host_tensor_free(&t);

  /* rank 3: file index i + 2*j + 4*k holds 100*i + 10*j + k */
  int64_t f3[2 * 2 * 3];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++) f3[i + 2 * j + 4 * k] = 100 * i + 10 * j + k;
  ck_assert_int_eq(parse_dict("{'descr': '<i8', 'fortran_order': True, "
                              "'shape': (2, 2, 3)}", f3, sizeof f3, DT_NONE,
                              &t), 0);
  int64_t *q = t.data;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      for (int k = 0; k < 3; k++)
        ck_assert_int_eq(q[6 * i + 3 * j + k], 100 * i + 10 * j + k);
  host_tensor_free(&t);
}
END_TEST

START_TEST(big_endian_and_byte_order_forms) {
  unsigned char be32[8] = {0x00, 0x00, 0x01, 0x02, 0xff, 0xff, 0xff, 0xfe};
  HostTensor t;
  ck_assert_int_eq(parse_dict("{'descr': '>i4', 'fortran_order': False, "
                              "'shape': (2,)}", be32, 8, DT_NONE, &t), 0);
  ck_assert_int_eq(((int32_t *)t.data)[0], 0x102);
  ck_assert_int_eq(((int32_t *)t.data)[1], -2);
  host_tensor_free(&t);

  unsigned char be64[8] = {0x3f, 0xf8, 0, 0, 0, 0, 0, 0}; /* 1.5 */
  ck_assert_int_eq(parse_dict("{'descr': '>f8', 'fortran_order': False, "
                              "'shape': ()}", be64, 8, DT_NONE, &t), 0);
  ck_assert_int_eq(t.rank, 0);
  ck_assert_double_eq(*(double *)t.data, 1.5);
  host_tensor_free(&t);

  unsigned char bbf[2] = {0x3f, 0x80}; /* bf16 1.0, big-endian */
  ck_assert_int_eq(parse_dict("{'descr': '>u2', 'fortran_order': False, "
                              "'shape': (1,)}", bbf, 2, DT_BF16, &t), 0);
  ck_assert_int_eq(t.dtype, DT_BF16);
  ck_assert_uint_eq(*(uint16_t *)t.data, 0x3f80);
  host_tensor_free(&t);

  static const struct { const char *descr; DType dt; } forms[] = {
      {"|u1", DT_U8}, {"<u1", DT_U8},  {"|i1", DT_I8},  {"<i1", DT_I8},
      {"|b1", DT_BOOL}, {"=i2", DT_I16}, {"<f2", DT_F16}, {"=f4", DT_F32},
  };
  unsigned char data[4] = {1, 0, 1, 0};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    char dict[128];
    snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, "
             "'shape': (%d,)}", forms[i].descr,
             4 / dtype_size(forms[i].dt));
    ck_assert_msg(parse_dict(dict, data, 4, DT_NONE, &t) == 0, "%s: %s",
                  forms[i].descr, errbuf);
    ck_assert_int_eq(t.dtype, forms[i].dt);
    host_tensor_free(&t);
  }
}
END_TEST

/* Whitespace, double quotes, no trailing comma, bools normalised. */
START_TEST(lenient_header_forms) {
  unsigned char b[3] = {0, 2, 255};
  HostTensor t;
  ck_assert_msg(parse_dict("{ \"fortran_order\" :False ,\"shape\":( 3 , ) ,"
                           "\"descr\":\"|b1\" }", b, 3, DT_NONE, &t) == 0,
                "%s", errbuf);
  ck_assert_int_eq(t.dtype, DT_BOOL);
  unsigned char want[3] = {0, 1, 1};
  ck_assert_mem_eq(t.data, want, 3);
  host_tensor_free(&t);
}
END_TEST

/* Each malformed input gives its own message. */
START_TEST(malformed_inputs) {
  static const struct { const char *dict; size_t ndata; const char *msg; }
  cases[] = {
      {"{'descr': '<c8', 'fortran_order': False, 'shape': (1,)}", 8,
       "unsupported dtype '<c8' (tdsl reads |b1 |i1 |u1 <i2 <i4 <i8 <f2 "
       "<f4 <f8, and <u2 as bf16)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 20,
       "file is truncated: header says 24 bytes of data, found 20"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 8,
       "file has 4 bytes after the data (header says 4 bytes of data)"},
      {"{'descr': '<f4', 'shape': (1,)}", 4,
       "malformed header: missing key 'fortran_order'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4,
       "malformed header: unexpected key 'x'"},
      {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
       "'shape': (1,)}", 4, "malformed header: key 'descr' appears twice"},
      {"{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", 4,
       "malformed header: 'fortran_order' must be True or False"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4,
       "malformed header: negative dimension in 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(99999999999999999999,)}", 4, "dimension in 'shape' is too large"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(4294967296, 4294967296)}", 4,
       "shape is too large: its element count overflows 64 bits"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1 2)}", 4,
       "malformed header: expected ',' or ')' in 'shape'"},
      {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", 4,
       "unsupported dtype: structured arrays are not tensors"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", 4,
       "malformed header: unexpected text after the header dict"},
      {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", 4,
       "malformed header: expected ':' after a key"},
      {"{'descr': '<f4", 4, "malformed header: unterminated string"},
      {"{'descr': '<u2', 'fortran_order': False, 'shape': (1,)}", 2,
       "dtype '<u2' (uint16) is not a tdsl dtype; it is read as bf16 bits "
       "only for a bf16 parameter"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': "
       "(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1)}", 4,
       "shape has more than 16 dimensions"},
      {"['descr']", 0, "malformed header: expected '{' to open"},
  };
  unsigned char zeros[64] = {0};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    HostTensor t;
    errbuf[0] = 0;
    ck_assert_int_eq(parse_dict(cases[i].dict, zeros, cases[i].ndata,
                                DT_NONE, &t), -1);
    ck_assert_msg(strncmp(errbuf, cases[i].msg, strlen(cases[i].msg)) == 0,
                  "case %zu: got '%s', want '%s'", i, errbuf, cases[i].msg);
  }
}
END_TEST

START_TEST(malformed_preambles) {
  unsigned char buf[256];
  HostTensor t;
  ck_assert_int_eq(npy_parse((const unsigned char *)"hello", 5, DT_NONE, &t,
                             errbuf, sizeof errbuf), -1);
  ck_assert_str_eq(errbuf,
                   "not a .npy file (it does not start with \\x93NUMPY)");
  ck_assert_int_eq(npy_parse(NULL, 0, DT_NONE, &t, errbuf, sizeof errbuf), -1);
  ck_assert_int_eq(npy_parse((const unsigned char *)"\x93NUMPY\x01", 7,
                             DT_NONE, &t, errbuf, sizeof errbuf), -1);
  ck_assert_str_eq(errbuf, "file is truncated: 7 bytes, too short for a .npy "
                           "preamble");
  size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, "
                      "'shape': ()}", "abcd", 4);
  buf[6] = 4;
  ck_assert_int_eq(npy_parse(buf, n, DT_NONE, &t, errbuf, sizeof errbuf), -1);
  ck_assert_str_eq(errbuf, "unsupported .npy format version 4.0 (tdsl reads "
                           "1.0, 2.0 and 3.0)");
  buf[6] = 1;
  ck_assert_int_eq(npy_parse(buf, n, DT_NONE, &t, errbuf, sizeof errbuf), 0);
  host_tensor_free(&t);
  ck_assert_int_eq(npy_parse(buf, 50, DT_NONE, &t, errbuf, sizeof errbuf), -1);
  ck_assert_str_eq(errbuf, "file is truncated: header says 54 bytes of "
                           "header, found 40");
}
END_TEST

START_TEST(read_errors_name_the_file) {
  make_tmpdir();
  HostTensor t;
  const char *path = tmp_path("missing.npy");
  ck_assert_int_eq(npy_read(path, DT_NONE, &t, errbuf, sizeof errbuf), -1);
  ck_assert_ptr_nonnull(strstr(errbuf, "missing.npy: cannot open"));
  unsigned char buf[256];
  size_t n = make_npy(buf, 1, "{'descr': '<c8', 'fortran_order': False, "
                      "'shape': ()}", "abcdefgh", 8);
  path = tmp_path("x.npy");
  FILE *f = fopen(path, "wb");
  ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
  fclose(f);
  ck_assert_int_eq(npy_read(path, DT_NONE, &t, errbuf, sizeof errbuf), -1);
  char want[256];
  snprintf(want, sizeof want, "%s: unsupported dtype '<c8'", path);
  ck_assert_msg(strncmp(errbuf, want, strlen(want)) == 0, "%s", errbuf);
  remove_tmpdir();
}
END_TEST

static Suite *npy_suite(void) {
  Suite *s = suite_create("npy");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, round_trip_every_dtype);
  tcase_add_test(tc, bf16_is_u2);
  tcase_add_test(tc, header_layout);
  tcase_add_test(tc, zero_dim_and_size_zero);
  tcase_add_test(tc, write_strided_views);
  tcase_add_test(tc, version_2_and_3);
  tcase_add_test(tc, fortran_order_transposes);
  tcase_add_test(tc, big_endian_and_byte_order_forms);
  tcase_add_test(tc, lenient_header_forms);
  tcase_add_test(tc, malformed_inputs);
  tcase_add_test(tc, malformed_preambles);
  tcase_add_test(tc, read_errors_name_the_file);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(npy_suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
