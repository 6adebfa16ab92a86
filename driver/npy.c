/* npy.c — NumPy .npy reading and writing for `tdslc run` and the tests.
 *
 * Reads format versions 1.0 (u16 header length), 2.0 and 3.0 (u32), whose
 * header is a Python dict literal with exactly the keys 'descr',
 * 'fortran_order' and 'shape' in any order.  Produces a freshly allocated
 * row-major HostTensor: Fortran-order data is transposed and big-endian
 * data byte-swapped on load, bools normalised to 0/1.  Every malformed
 * input gives a message, never a crash: all lengths are checked against
 * the buffer, and sizes against int64/size_t overflow.
 *
 * Writes version 1.0, C order, little-endian, header padded to 64 bytes;
 * bf16 goes out as '<u2' (NumPy has no bf16).
 * Needs: interp.h (HostTensor, host_tensor_alloc), dtype.h. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAGIC_LEN 6
#define NPY_DTYPES_READ \
  "|b1 |i1 |u1 <i2 <i4 <i8 <f2 <f4 <f8, and <u2 as bf16"

static void fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void fail(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static bool host_is_little(void) {
  uint16_t x = 1;
  unsigned char c;
  memcpy(&c, &x, 1);
  return c == 1;
}

static void swap_bytes(unsigned char *p, int n) {
  for (int i = 0; i < n / 2; i++) {
    unsigned char t = p[i];
    p[i] = p[n - 1 - i];
    p[n - 1 - i] = t;
  }
}

/* ---- the header dict ---------------------------------------------- */

/* The parsed header. */
typedef struct NpyHeader {
  DType dtype;
  bool swap;          /* file byte order differs from the host's */
  bool fortran;
  int rank;
  int64_t shape[TDSL_MAX_RANK];
  unsigned seen;      /* bit per key: 1 descr, 2 fortran_order, 4 shape */
} NpyHeader;

/* A cursor over the header text; `err` set once something failed. */
typedef struct Cur {
  const char *p, *end;
  char *err;
  size_t errlen;
  bool failed;
} Cur;

static void cur_fail(Cur *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void cur_fail(Cur *c, const char *fmt, ...) {
  if (c->failed) return;
  c->failed = true;
  va_list ap;
  va_start(ap, fmt);
  if (c->err && c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
  va_end(ap);
}

static void skip_ws(Cur *c) {
  while (c->p < c->end &&
         (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

/* Consumes `ch` after optional whitespace; reports `what` if absent. */
static bool expect(Cur *c, char ch, const char *what) {
  skip_ws(c);
  if (c->p < c->end && *c->p == ch) {
    c->p++;
    return true;
  }
  cur_fail(c, "malformed header: expected %s", what);
  return false;
}

/* A Python string literal in single or double quotes, no escapes (none
 * of the valid keys or descrs need one).  Copies at most cap-1 chars. */
static bool parse_str(Cur *c, char *out, size_t cap, const char *what) {
  skip_ws(c);
  if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) {
    cur_fail(c, "malformed header: expected a quoted string for %s", what);
    return false;
  }
  char q = *c->p++;
  size_t n = 0;
  while (c->p + n < c->end && c->p[n] != q && c->p[n] != '\n') n++;
  if (c->p + n >= c->end || c->p[n] != q) {
    cur_fail(c, "malformed header: unterminated string");
    return false;
  }
  if (n >= cap || memchr(c->p, '\\', n)) {
    cur_fail(c, "malformed header: unsupported string for %s", what);
    return false;
  }
  memcpy(out, c->p, n);
  c->p += n + 1;
  out[n] = '\0';
  return true;
}

/* Maps a descr's kind and size to a tdsl dtype (DT_NONE if none). */
static DType descr_dtype(char kind, const char *size, DType want) {
  static const struct { char kind; const char *size; DType dt; } map[] = {
      {'b', "1", DT_BOOL}, {'i', "1", DT_I8},  {'u', "1", DT_U8},
      {'i', "2", DT_I16},  {'i', "4", DT_I32}, {'i', "8", DT_I64},
      {'f', "2", DT_F16},  {'f', "4", DT_F32}, {'f', "8", DT_F64},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (map[i].kind == kind && strcmp(map[i].size, size) == 0) return map[i].dt;
  if (kind == 'u' && strcmp(size, "2") == 0 && want == DT_BF16) return DT_BF16;
  return DT_NONE;
}

static void parse_descr(Cur *c, NpyHeader *h, DType want) {
  skip_ws(c);
  if (c->p < c->end && (*c->p == '[' || *c->p == '{')) {
    cur_fail(c, "unsupported dtype: structured arrays are not tensors "
                "(tdsl reads " NPY_DTYPES_READ ")");
    return;
  }
  char d[32];
  if (!parse_str(c, d, sizeof d, "'descr'")) return;
  char order = d[0];
  bool has_order = order == '<' || order == '>' || order == '=' ||
                   order == '|';
  const char *body = has_order ? d + 1 : d;
  DType dt = body[0] ? descr_dtype(body[0], body + 1, want) : DT_NONE;
  if (dt == DT_NONE && strcmp(body, "u2") == 0) {
    cur_fail(c, "dtype '%s' (uint16) is not a tdsl dtype; it is read as bf16 "
                "bits only for a bf16 parameter", d);
    return;
  }
  if (dt == DT_NONE) {
    cur_fail(c, "unsupported dtype '%s' (tdsl reads " NPY_DTYPES_READ ")", d);
    return;
  }
  /* '|' ("not applicable") and '=' (native) both mean host order. */
  bool little = order == '>' ? false : order == '<' ? true : host_is_little();
  h->dtype = dt;
  h->swap = dtype_size(dt) > 1 && little != host_is_little();
}

static void parse_bool(Cur *c, NpyHeader *h) {
  skip_ws(c);
  size_t left = (size_t)(c->end - c->p);
  if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
    h->fortran = true;
    c->p += 4;
  } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
    h->fortran = false;
    c->p += 5;
  } else {
    cur_fail(c, "malformed header: 'fortran_order' must be True or False");
  }
}

/* One non-negative decimal dim (a Python 2 'L' suffix is allowed). */
static bool parse_dim(Cur *c, int64_t *out) {
  skip_ws(c);
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
    if (c->p < c->end && *c->p == '-')
      cur_fail(c, "malformed header: negative dimension in 'shape'");
    else
      cur_fail(c, "malformed header: expected an integer in 'shape'");
    return false;
  }
  int64_t v = 0;
  while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
    int digit = *c->p++ - '0';
    if (v > (INT64_MAX - digit) / 10) {
      cur_fail(c, "dimension in 'shape' is too large");
      return false;
    }
    v = v * 10 + digit;
  }
  if (c->p < c->end && *c->p == 'L') c->p++;
  *out = v;
  return true;
}

/* (), (3,), (2, 3), (2, 3,) — and (3) leniently. */
static void parse_shape(Cur *c, NpyHeader *h) {
  if (!expect(c, '(', "'(' to open 'shape'")) return;
  h->rank = 0;
  skip_ws(c);
  while (c->p < c->end && *c->p != ')') {
    if (h->rank == TDSL_MAX_RANK) {
      cur_fail(c, "shape has more than %d dimensions (tdsl's limit)",
               TDSL_MAX_RANK);
      return;
    }
    if (!parse_dim(c, &h->shape[h->rank++])) return;
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
      c->p++;
      skip_ws(c);
    } else if (c->p < c->end && *c->p != ')') {
      cur_fail(c, "malformed header: expected ',' or ')' in 'shape'");
      return;
    }
  }
  expect(c, ')', "')' to close 'shape'");
}

static void parse_entry(Cur *c, NpyHeader *h, DType want) {
  static const char *keys[] = {"descr", "fortran_order", "shape"};
  char key[32];
  if (!parse_str(c, key, sizeof key, "a key")) return;
  int k = -1;
  for (int i = 0; i < 3; i++)
    if (strcmp(key, keys[i]) == 0) k = i;
  if (k < 0) {
    cur_fail(c, "malformed header: unexpected key '%s'", key);
    return;
  }
  if (h->seen & (1u << k)) {
    cur_fail(c, "malformed header: key '%s' appears twice", key);
    return;
  }
  h->seen |= 1u << k;
  if (!expect(c, ':', "':' after a key")) return;
  if (k == 0) parse_descr(c, h, want);
  else if (k == 1) parse_bool(c, h);
  else parse_shape(c, h);
}

static void parse_dict(Cur *c, NpyHeader *h, DType want) {
  if (!expect(c, '{', "'{' to open the header dict")) return;
  skip_ws(c);
  while (!c->failed && c->p < c->end && *c->p != '}') {
    parse_entry(c, h, want);
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') c->p++;
    else if (c->p < c->end && *c->p != '}')
      cur_fail(c, "malformed header: expected ',' or '}' in the header dict");
    skip_ws(c);
  }
  if (!expect(c, '}', "'}' to close the header dict")) return;
  skip_ws(c);
  /* NumPy pads with spaces and a final newline; allow NUL padding too. */
  while (c->p < c->end && *c->p == '\0') c->p++;
  if (c->p != c->end)
    cur_fail(c, "malformed header: unexpected text after the header dict");
  static const char *names[] = {"descr", "fortran_order", "shape"};
  for (int i = 0; i < 3; i++)
    if (!(h->seen & (1u << i)))
      cur_fail(c, "malformed header: missing key '%s'", names[i]);
}

/* ---- preamble and data --------------------------------------------- */

/* Validates magic and version; sets *hstart and *hlen of the header text. */
static int parse_preamble(const unsigned char *buf, size_t len, size_t *hstart,
                          size_t *hlen, char *err, size_t errlen) {
  if (len < NPY_MAGIC_LEN || memcmp(buf, NPY_MAGIC, NPY_MAGIC_LEN) != 0) {
    fail(err, errlen, "not a .npy file (it does not start with \\x93NUMPY)");
    return -1;
  }
  if (len < 10) {
    fail(err, errlen, "file is truncated: %zu bytes, too short for a .npy "
                      "preamble", len);
    return -1;
  }
  int major = buf[6], minor = buf[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    fail(err, errlen, "unsupported .npy format version %d.%d (tdsl reads "
                      "1.0, 2.0 and 3.0)", major, minor);
    return -1;
  }
  if (major == 1) {
    *hstart = 10;
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
  } else {
    if (len < 12) {
      fail(err, errlen, "file is truncated: %zu bytes, too short for a "
                        ".npy %d.0 preamble", len, major);
      return -1;
    }
    *hstart = 12;
    *hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 |
            (size_t)buf[11] << 24;
  }
  if (*hlen > len - *hstart) {
    fail(err, errlen, "file is truncated: header says %zu bytes of header, "
                      "found %zu", *hlen, len - *hstart);
    return -1;
  }
  return 0;
}

/* Element count and byte size with overflow checks. */
static int data_size(const NpyHeader *h, int64_t *numel, size_t *bytes,
                     char *err, size_t errlen) {
  int64_t n = 1;
  bool zero = false;
  for (int d = 0; d < h->rank; d++) zero |= h->shape[d] == 0;
  for (int d = 0; d < h->rank && !zero; d++) {
    if (n > INT64_MAX / h->shape[d]) {
      fail(err, errlen, "shape is too large: its element count overflows "
                        "64 bits");
      return -1;
    }
    n *= h->shape[d];
  }
  if (zero) n = 0;
  int64_t es = dtype_size(h->dtype);
  if (n > INT64_MAX / es || (uint64_t)(n * es) > SIZE_MAX) {
    fail(err, errlen, "shape is too large: its byte size overflows");
    return -1;
  }
  *numel = n;
  *bytes = (size_t)(n * es);
  return 0;
}

/* Copies element i of the file (in file order) into the row-major tensor;
 * for Fortran order the first index varies fastest in the file. */
static void copy_data(const NpyHeader *h, const unsigned char *src,
                      int64_t numel, HostTensor *t) {
  int es = dtype_size(h->dtype);
  unsigned char *dst = t->data;
  int64_t idx[TDSL_MAX_RANK] = {0};
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = i;
    if (h->fortran) {
      off = 0;
      for (int d = 0; d < h->rank; d++) off += idx[d] * t->stride[d];
      for (int d = 0; d < h->rank && ++idx[d] == h->shape[d]; d++) idx[d] = 0;
    }
    unsigned char *p = dst + off * es;
    memcpy(p, src + i * es, (size_t)es);
    if (h->swap) swap_bytes(p, es);
    if (h->dtype == DT_BOOL) *p = *p != 0;
  }
}

int npy_parse(const unsigned char *buf, size_t len, DType want,
              HostTensor *out, char *err, size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t hstart, hlen;
  if (parse_preamble(buf, len, &hstart, &hlen, err, errlen)) return -1;
  NpyHeader h = {.dtype = DT_NONE};
  Cur c = {(const char *)buf + hstart, (const char *)buf + hstart + hlen,
           err, errlen, false};
  parse_dict(&c, &h, want);
  if (c.failed) return -1;
  int64_t numel;
  size_t bytes;
  if (data_size(&h, &numel, &bytes, err, errlen)) return -1;
  size_t avail = len - hstart - hlen;
  if (avail < bytes) {
    fail(err, errlen, "file is truncated: header says %zu bytes of data, "
                      "found %zu", bytes, avail);
    return -1;
  }
  if (avail > bytes) {
    fail(err, errlen, "file has %zu bytes after the data (header says %zu "
                      "bytes of data)", avail - bytes, bytes);
    return -1;
  }
  if (host_tensor_alloc(out, h.dtype, h.rank, h.shape)) {
    fail(err, errlen, "cannot allocate %zu bytes for the data", bytes);
    memset(out, 0, sizeof *out);
    return -1;
  }
  copy_data(&h, buf + hstart + hlen, numel, out);
  return 0;
}

/* ---- files ---------------------------------------------------------- */

/* Reads a whole file; returns NULL with a message (errno's) on failure. */
static unsigned char *read_file(const char *path, size_t *len, char *err,
                                size_t errlen) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0;
  unsigned char *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    unsigned char *nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
    if (!nb) free(buf);
    buf = nb;
    cap *= 2;
  }
  int bad = !buf || ferror(f);
  int saved = errno;
  fclose(f);
  if (bad) {
    fail(err, errlen, "%s: cannot read: %s", path,
         buf ? strerror(saved) : "out of memory");
    free(buf);
    return NULL;
  }
  *len = n;
  return buf;
}

int npy_read(const char *path, DType want, HostTensor *out, char *err,
             size_t errlen) {
  memset(out, 0, sizeof *out);
  size_t len;
  unsigned char *buf = read_file(path, &len, err, errlen);
  if (!buf) return -1;
  char msg[512];
  int rc = npy_parse(buf, len, want, out, msg, sizeof msg);
  free(buf);
  if (rc) fail(err, errlen, "%s: %s", path, msg);
  return rc;
}

static const char *write_descr(DType t) {
  switch (t) {
  case DT_BOOL: return "|b1";
  case DT_I8: return "|i1";
  case DT_U8: return "|u1";
  case DT_I16: return "<i2";
  case DT_I32: return "<i4";
  case DT_I64: return "<i8";
  case DT_F16: return "<f2";
  case DT_BF16: return "<u2";
  case DT_F32: return "<f4";
  case DT_F64: return "<f8";
  default: return NULL;
  }
}

/* The v1.0 preamble and header, padded with spaces so the data starts
 * at a multiple of 64 bytes.  Returns its length, 0 if it cannot fit. */
static size_t write_header(const HostTensor *t, char *out, size_t cap) {
  char dict[1024];
  int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': "
                   "False, 'shape': (", write_descr(t->dtype));
  for (int d = 0; d < t->rank; d++)
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", d ? ", " : "",
                  (long long)t->shape[d]);
  n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }",
                t->rank == 1 ? "," : "");
  size_t total = 10 + (size_t)n + 1; /* + final newline */
  total = (total + 63) / 64 * 64;
  if (total > cap || total - 10 > 65535) return 0;
  size_t hlen = total - 10;
  memcpy(out, NPY_MAGIC "\x01\x00", 8);
  out[8] = (char)(hlen & 0xff);
  out[9] = (char)(hlen >> 8);
  memcpy(out + 10, dict, (size_t)n);
  memset(out + 10 + n, ' ', hlen - (size_t)n - 1);
  out[total - 1] = '\n';
  return total;
}

/* Writes the elements in logical row-major order, little-endian. */
static int write_data(FILE *f, const HostTensor *t) {
  int64_t numel = host_tensor_numel(t);
  int es = dtype_size(t->dtype);
  const unsigned char *base = t->data;
  int64_t idx[TDSL_MAX_RANK] = {0};
  for (int64_t i = 0; i < numel; i++) {
    int64_t off = t->offset;
    for (int d = 0; d < t->rank; d++) off += idx[d] * t->stride[d];
    unsigned char e[8];
    memcpy(e, base + off * es, (size_t)es);
    if (!host_is_little()) swap_bytes(e, es);
    if (t->dtype == DT_BOOL) e[0] = e[0] != 0;
    if (fwrite(e, 1, (size_t)es, f) != (size_t)es) return -1;
    for (int d = t->rank - 1; d >= 0 && ++idx[d] == t->shape[d]; d--)
      idx[d] = 0;
  }
  return 0;
}

int npy_write(const char *path, const HostTensor *t, char *err,
              size_t errlen) {
  if (!write_descr(t->dtype) || t->rank < 0 || t->rank > TDSL_MAX_RANK) {
    fail(err, errlen, "%s: cannot write a tensor of dtype %d and rank %d",
         path, (int)t->dtype, t->rank);
    return -1;
  }
  char hdr[2048];
  size_t hn = write_header(t, hdr, sizeof hdr);
  if (hn == 0) {
    fail(err, errlen, "%s: header too long", path);
    return -1;
  }
  FILE *f = fopen(path, "wb");
  if (!f) {
    fail(err, errlen, "%s: cannot open for writing: %s", path,
         strerror(errno));
    return -1;
  }
  int bad = fwrite(hdr, 1, hn, f) != hn || write_data(f, t) != 0;
  int saved = errno;
  if (fclose(f) != 0 && !bad) {
    bad = 1;
    saved = errno;
  }
  if (bad) {
    fail(err, errlen, "%s: cannot write: %s", path, strerror(saved));
    return -1;
  }
  return 0;
}
