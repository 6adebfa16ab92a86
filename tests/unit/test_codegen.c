/* test_codegen.c — the CPU backend end to end: tdslc --emit=obj,header on
 * small kernels, the object linked with the runtime sources into a shared
 * object (plus a C file that includes the generated header, so the header
 * must compile), dlopen'ed, called on random inputs with real strides and
 * byte offsets, and compared with the reference interpreter (interp_run)
 * on the same storage, with spec §9's tolerances.  Also: entry-check
 * error codes with outputs left untouched, the shape query, K_info, and
 * the textual emits.
 * Needs: codegen_util.h (tdslc, a C compiler, runtime sources, the front
 * end and interpreter, dlopen). */
#include "codegen_util.h"

/* ---- kernels -------------------------------------------------------------- */

static const char *EW =
    "kernel ew(x: f32[N, 4], y: i32[4], z: f16[N, 1]) -> (f32[N, 4], f16[N, 4], bool[N, 4]) {\n"
    "  a = x * y + z.exp()\n"
    "  b = where(a > 0.5, a.sqrt(), -a) // 0.25 + x % 3.0 - maximum(x, a)\n"
    "  c = z.sigmoid() + z.tanh() - z.abs().log1p() * z.gelu() + z.gelu(approximate=\"tanh\") * y.to(f16)\n"
    "  return b + x.sin() * a.cos() + x.relu().expm1() + x.erf() - x.floor(), c, (a <= x) ^ (y > 0)\n"
    "}\n";

START_TEST(elementwise_broadcast_mixed) {
  Lib L;
  build(&L, EW, "ew");
  for (int trial = 0; trial < 3; trial++) {
    int64_t n = trial == 2 ? 0 : 5 + trial * 7;
    int64_t sx[2] = {n, 4}, sy[1] = {4}, sz[2] = {n, 1};
    Ten in[3], out[3];
    ten(&in[0], DT_F32, 2, sx, NULL, 3, trial == 1);
    ten(&in[1], DT_I32, 1, sy, NULL, 1, false);
    ten(&in[2], DT_F16, 2, sz, NULL, 0, false);
    out_ten(&out[0], DT_F32, 2, sx);
    out_ten(&out[1], DT_F16, 2, sx);
    out_ten(&out[2], DT_BOOL, 2, sx);
    run_and_compare(&L, "ew", in, 3, out, 3, false);
    for (int i = 0; i < 3; i++) ten_free(&in[i]), ten_free(&out[i]);
  }
  unbuild(&L);
}
END_TEST

/* maximum/minimum with a Python number (spec §4.3): the number
 * promotes as in `x + 2` (i32 with 1.5 is f32), on either side. */
START_TEST(maximum_minimum_numbers) {
  Lib L;
  build(&L,
        "kernel mm(x: f32[N], i: i32[N]) -> (f32[N], i32[N], f32[N], f32[N]) {\n"
        "  return maximum(x, 0.25), minimum(3, i), i.maximum(1.5), minimum(-1e30, x)\n"
        "}\n",
        "mm");
  int64_t n[1] = {37};
  Ten in[2], out[4];
  ten(&in[0], DT_F32, 1, n, NULL, 2, false);
  ten(&in[1], DT_I32, 1, n, NULL, 0, false);
  DType od[4] = {DT_F32, DT_I32, DT_F32, DT_F32};
  for (int i = 0; i < 4; i++) out_ten(&out[i], od[i], 1, n);
  run_and_compare(&L, "mm", in, 2, out, 4, false);
  const float *x = (const float *)in[0].store + 2;
  const int32_t *iv = (const int32_t *)in[1].store;
  for (int e = 0; e < 37; e++) {
    ck_assert_float_eq(((float *)out[0].store)[e], x[e] > 0.25f ? x[e] : 0.25f);
    ck_assert_int_eq(((int32_t *)out[1].store)[e], iv[e] < 3 ? iv[e] : 3);
    float fi = (float)iv[e];
    ck_assert_float_eq(((float *)out[2].store)[e], fi > 1.5f ? fi : 1.5f);
    ck_assert_float_eq(((float *)out[3].store)[e], -1e30f);
  }
  for (int i = 0; i < 2; i++) ten_free(&in[i]);
  for (int i = 0; i < 4; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

START_TEST(integer_ops_and_casts) {
  Lib L;
  const char *src =
      "kernel ints(a: i32[N], b: u8[N], c: bool[N]) -> (i32[N], u8[N], bool[N], i16[N], i8[N], i64[N]) {\n"
      "  d = b.to(i32) - 128\n"
      "  return a // (d % 7 - 3) + a % (d // 9 - 2) + a ** 3 - (-a).abs() * a.sign(), "
      "b * 7 + b % 5 - (b // 3) * (b // 3), c ^ (a > 0) | ~c & (b < 100), "
      "(a.to(f32) * 1000.7).to(i16), (a.to(f64) * 3.9).to(i8) + c.to(i8), "
      "maximum(a.to(i64), d.to(i64)) * minimum(a, d) + ~a\n"
      "}\n";
  build(&L, src, "ints");
  int64_t s[1] = {37};
  Ten in[3], out[6];
  ten(&in[0], DT_I32, 1, s, NULL, 2, false);
  ten(&in[1], DT_U8, 1, s, NULL, 0, false);
  ten(&in[2], DT_BOOL, 1, s, NULL, 5, false);
  DType od[6] = {DT_I32, DT_U8, DT_BOOL, DT_I16, DT_I8, DT_I64};
  for (int i = 0; i < 6; i++) out_ten(&out[i], od[i], 1, s);
  run_and_compare(&L, "ints", in, 3, out, 6, false);
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 6; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

static const char *VIEWS =
    "kernel views(x: f32[6, N] strided, y: f64[N, 6], w: bf16[2, N, 3]) -> (f64[N, 2], bf16[N, 2], f32[3, N]) {\n"
    "  a = x.t()[:, 1:5:2]\n"
    "  b = w.permute(1, 0, 2).select(2, 1) * w[:, :, 2].T\n"
    "  return a.to(f64) + y[:, 0:4:2] * y.diagonal(0, 0, 1)[0], b, x[1:4].T.unsqueeze(0).squeeze(0).T\n"
    "}\n";

START_TEST(views_of_params_with_strides_and_offsets) {
  Lib L;
  build(&L, VIEWS, "views");
  for (int trial = 0; trial < 2; trial++) {
    int64_t n = 5 + trial;
    int64_t sx[2] = {6, n}, stx[2] = {1, 7}; /* transposed storage, padded */
    int64_t sy[2] = {n, 6}, sw[3] = {2, n, 3}, so1[2] = {n, 2}, so2[2] = {3, n};
    Ten in[3], out[3];
    ten(&in[0], DT_F32, 2, sx, trial ? stx : NULL, 4, false);
    ten(&in[1], DT_F64, 2, sy, NULL, 2, false);
    ten(&in[2], DT_BF16, 3, sw, NULL, 1, true);
    out_ten(&out[0], DT_F64, 2, so1);
    out_ten(&out[1], DT_BF16, 2, so1);
    out_ten(&out[2], DT_F32, 2, so2);
    run_and_compare(&L, "views", in, 3, out, 3, false);
    for (int i = 0; i < 3; i++) ten_free(&in[i]), ten_free(&out[i]);
  }
  unbuild(&L);
}
END_TEST

static const char *RED =
    "kernel red(x: f32[B, N], h: f16[B, N], k: i32[B, N], d: f64[B, N]) -> "
    "(f32[B], f32[B, 1], f16[N], i64[B], i64[], i64[B], f32[], f64[N], bf16[B]) {\n"
    "  return x.sum(1), x.amax(1, keepdim=true), h.mean(0), k.sum(1), x.argmax(), "
    "k.argmin(1), (x * 0.1 + 1.0).prod(), d.amin(0) + d.mean(0), h.to(bf16).amax(1)\n"
    "}\n";

START_TEST(reductions) {
  Lib L;
  build(&L, RED, "red");
  int64_t s[2] = {4, 9}, sb[1] = {4}, sb1[2] = {4, 1}, sn[1] = {9};
  Ten in[4], out[9];
  ten(&in[0], DT_F32, 2, s, NULL, 0, false);
  ten(&in[1], DT_F16, 2, s, NULL, 0, false);
  ten(&in[2], DT_I32, 2, s, NULL, 0, false);
  ten(&in[3], DT_F64, 2, s, NULL, 0, false);
  out_ten(&out[0], DT_F32, 1, sb);
  out_ten(&out[1], DT_F32, 2, sb1);
  out_ten(&out[2], DT_F16, 1, sn);
  out_ten(&out[3], DT_I64, 1, sb);
  out_ten(&out[4], DT_I64, 0, NULL);
  out_ten(&out[5], DT_I64, 1, sb);
  out_ten(&out[6], DT_F32, 0, NULL);
  out_ten(&out[7], DT_F64, 1, sn);
  out_ten(&out[8], DT_BF16, 1, sb);
  run_and_compare(&L, "red", in, 4, out, 9, true);
  for (int i = 0; i < 4; i++) ten_free(&in[i]);
  for (int i = 0; i < 9; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* Long reductions to few outputs, which split over threads
 * (cpu/reduce_split.c): every op the split takes against the
 * interpreter, and bitwise equal at 1, 2 and 3 threads.  The values are
 * small integers, so maxima tie across chunks (the first position
 * wins); a second run puts NaNs in later chunks (the first NaN wins).
 * Lengths sit at the split's edges: 65535 and 65536 (a grain or two of
 * chunks), a chunk past a multiple of 16 blocks, 513 chunks of 16
 * blocks (the chunks grow to 256 blocks); columns of [R, 4], [R, 3] and
 * [R, 2] of f32, i32 and f64. */
static const char *LONGRED =
    "kernel lr(x: f32[N]) -> (f32[], f32[], f32[], f32[], i64[], i64[]) {\n"
    "  return x.sum(), x.mean(), x.amax(), x.amin(), x.argmax(), x.argmin()\n"
    "}\n"
    "kernel lri(k: i32[N], h: f16[N]) -> (i64[], i32[], i64[], i64[], f16[]) {\n"
    "  return k.sum(), k.amax(), k.argmin(), (k % 3 + 2).to(i64).prod(), h.mean()\n"
    "}\n"
    "kernel lr2(x: f32[R, C], k: i64[R, C]) -> (f32[R], i64[R], f32[C], i64[C], f32[]) {\n"
    "  return x.sum(1), x.argmax(1), x.mean(0), k.sum(0), ((x - 1.5) ** 2).mean()\n"
    "}\n"
    "kernel lc(x: f32[R, 4] strided, k: i32[R, 3], d: f64[R, 2]) -> (f32[4], f32[4], f32[4], "
    "i64[3], i32[3], i64[3], f64[2], f64[2]) {\n"
    "  return x.sum(0), x.amax(0), (x * 0.5 - 1.0).amin(0), k.sum(0), k.amax(0), "
    "(k % 3 + 2).to(i64).prod(0), d.mean(0), d.amin(0)\n"
    "}\n";

static void small_ints(Ten *t, int64_t n) {
  for (int64_t i = 0; i < n; i++) {
    int v = (int)(urand() * 11) - 5;
    if (t->h.dtype == DT_I64) ((int64_t *)t->store)[i] = v;
    else if (t->h.dtype == DT_I32) ((int32_t *)t->store)[i] = v;
    else if (t->h.dtype == DT_F16) ((uint16_t *)t->store)[i] = f32_to_f16((float)v);
    else ((float *)t->store)[i] = (float)v;
  }
}

/* ARGMAX/ARGMIN over short rows of 9 .. 16 f32 (cpu/reduce.c: the row's
 * first and last 8 lanes as two vectors) against the interpreter: small integers (ties keep the
 * first), then rows with NaNs (the first NaN wins), -0 before +0, rows
 * of -inf and of +inf; a row of 9 strided (padded to 12) through an
 * expression. */
static const char *SHORTARG =
    "kernel sa(x: f32[B, 10], y: f32[B, 16], z: f32[B, 9] strided) -> "
    "(i64[B], i64[B], i64[B], i64[B], i64[B]) {\n"
    "  return x.argmax(1), y.argmin(1), (z * 2.0 - 1.0).argmax(1), x.argmin(1), y.argmax(1)\n"
    "}\n";

START_TEST(short_row_argmax) {
  Lib L;
  build(&L, SHORTARG, "sa");
  int64_t B = 37, sx[2] = {B, 10}, sy[2] = {B, 16}, sz[2] = {B, 9}, stz[2] = {12, 1}, sb[1] = {B};
  Ten in[3], out[5];
  ten(&in[0], DT_F32, 2, sx, NULL, 0, false);
  ten(&in[1], DT_F32, 2, sy, NULL, 0, false);
  ten(&in[2], DT_F32, 2, sz, stz, 3, false);
  for (int i = 0; i < 5; i++) out_ten(&out[i], DT_I64, 1, sb);
  for (int i = 0; i < 3; i++) small_ints(&in[i], (int64_t)(in[i].bytes / 4));
  run_and_compare(&L, "sa", in, 3, out, 5, true);
  float *x = in[0].store, *y = in[1].store;
  for (int64_t r = 0; r < B; r += 2) x[r * 10 + (r % 10)] = NAN, y[r * 16 + 15 - (r % 16)] = NAN;
  for (int j = 0; j < 10; j++)
    x[10 + j] = -INFINITY, x[30 + j] = j == 4 ? -0.0f : j == 7 ? 0.0f : -1;
  for (int j = 0; j < 16; j++) y[16 + j] = INFINITY, y[48 + j] = j == 9 ? NAN : j == 12 ? NAN : 0;
  run_and_compare(&L, "sa", in, 3, out, 5, true);
  const int64_t *am = out[0].store, *an = out[1].store;
  ck_assert_int_eq(am[0], 0);
  ck_assert_int_eq(am[1], 0);
  ck_assert_int_eq(am[2], 2);
  ck_assert_int_eq(am[3], 4);
  ck_assert_int_eq(an[1], 0);
  ck_assert_int_eq(an[3], 9);
  for (int i = 0; i < 3; i++) ten_free(&in[i]);
  for (int i = 0; i < 5; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

START_TEST(long_reductions_split) {
  Lib L;
  build(&L, LONGRED, "lr");
  static const int64_t ns[] = {65535, 65536, 17 * 8192 + 1, 513 * 8192 - 7};
  for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
    int64_t n[1] = {ns[c]};
    Ten in[3], out[11];
    ten(&in[0], DT_F32, 1, n, NULL, 0, false);
    ten(&in[1], DT_I32, 1, n, NULL, 0, false);
    ten(&in[2], DT_F16, 1, n, NULL, 0, false);
    for (int i = 0; i < 3; i++) small_ints(&in[i], n[0]);
    static const DType od[11] = {DT_F32, DT_F32, DT_F32, DT_F32, DT_I64, DT_I64,
                                 DT_I64, DT_I32, DT_I64, DT_I64, DT_F16};
    for (int i = 0; i < 11; i++) out_ten(&out[i], od[i], 0, NULL);
    threads_and_reference(&L, "lr", in, 1, out, 6, true);
    threads_and_reference(&L, "lri", in + 1, 2, out + 6, 5, true);
    float *x = in[0].store;
    x[n[0] - 3] = NAN, x[n[0] / 2 + 1] = NAN;
    threads_and_reference(&L, "lr", in, 1, out, 6, true);
    ck_assert_int_eq(((int64_t *)out[4].store)[0], n[0] / 2 + 1);
    for (int i = 0; i < 3; i++) ten_free(&in[i]);
    for (int i = 0; i < 11; i++) ten_free(&out[i]);
  }
  static const int64_t rc[][2] = {{3, 70001}, {70001, 3}, {2, 65536 + 512 * 16 * 3}};
  for (size_t c = 0; c < sizeof rc / sizeof *rc; c++) {
    int64_t sr[1] = {rc[c][0]}, sc[1] = {rc[c][1]};
    Ten in[2], out[5];
    ten(&in[0], DT_F32, 2, rc[c], NULL, 0, false);
    ten(&in[1], DT_I64, 2, rc[c], NULL, 0, false);
    small_ints(&in[1], rc[c][0] * rc[c][1]);
    out_ten(&out[0], DT_F32, 1, sr);
    out_ten(&out[1], DT_I64, 1, sr);
    out_ten(&out[2], DT_F32, 1, sc);
    out_ten(&out[3], DT_I64, 1, sc);
    out_ten(&out[4], DT_F32, 0, NULL);
    threads_and_reference(&L, "lr2", in, 2, out, 5, true);
    for (int i = 0; i < 2; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
  }
  /* columns of a few known ones (reduce_split.c "columns"): rows around
   * blocks and groups of 4 blocks, x contiguous, transposed and sliced
   * (columns 1 .. 4 of rows of 7); then NaNs in two columns */
  static const int64_t cr[] = {65535, 65536 + 512 * 4 + 1, 17 * 8192 + 3, 1048577};
  for (size_t c = 0; c < sizeof cr / sizeof *cr; c++) {
    int64_t R = cr[c], s4[2] = {R, 4}, s3[2] = {R, 3}, s2[2] = {R, 2}, o4[1] = {4}, o3[1] = {3},
            o2[1] = {2}, st[3][2] = {{4, 1}, {1, R}, {7, 1}}, off[3] = {0, 0, 1};
    for (int lay = 0; lay < 3; lay++) {
      Ten in[3], out[8];
      ten(&in[0], DT_F32, 2, s4, st[lay], off[lay], false);
      ten(&in[1], DT_I32, 2, s3, NULL, 0, false);
      ten(&in[2], DT_F64, 2, s2, NULL, 0, false);
      small_ints(&in[0], (int64_t)(in[0].bytes / 4));
      small_ints(&in[1], R * 3);
      static const DType od[8] = {DT_F32, DT_F32, DT_F32, DT_I64, DT_I32, DT_I64, DT_F64, DT_F64};
      for (int i = 0; i < 8; i++) out_ten(&out[i], od[i], 1, i < 3 ? o4 : i < 6 ? o3 : o2);
      threads_and_reference(&L, "lc", in, 3, out, 8, true);
      if (lay == 2) {
        float *x = in[0].store;
        x[(R - 3) * 7 + 1 + 1] = NAN, x[(R / 2 + 1) * 7 + 1 + 3] = NAN;
        threads_and_reference(&L, "lc", in, 3, out, 8, true);
        ck_assert(isnan(((float *)out[1].store)[1]) && isnan(((float *)out[1].store)[3]));
        ck_assert(!isnan(((float *)out[1].store)[0]) && isnan(((float *)out[0].store)[3]));
      }
      for (int i = 0; i < 3; i++) ten_free(&in[i]);
      for (int i = 0; i < 8; i++) ten_free(&out[i]);
    }
  }
  unbuild(&L);
}
END_TEST

static const char *SRC =
    "kernel src(x: f32[N, 3]) -> (f32[3, N], f32[N], i64[N, 2]) {\n"
    "  r = x.t().reshape(3 * N)\n"
    "  return r.view(3, N) + tensor([[1.0], [2.0], [3.0]]), arange(N).to(f32) * 0.5 + N, "
    "full([N, 2], 7, i64) + zeros([1, 2], i64) + arange(1, 5, 2)\n"
    "}\n";

START_TEST(sources_and_reshape_copy) {
  Lib L;
  build(&L, SRC, "src");
  int64_t s[2] = {5, 3}, so[2] = {3, 5}, s1[1] = {5}, s2[2] = {5, 2};
  Ten in[1], out[3];
  ten(&in[0], DT_F32, 2, s, NULL, 1, false);
  out_ten(&out[0], DT_F32, 2, so);
  out_ten(&out[1], DT_F32, 1, s1);
  out_ten(&out[2], DT_I64, 2, s2);
  run_and_compare(&L, "src", in, 1, out, 3, false);
  ten_free(&in[0]);
  for (int i = 0; i < 3; i++) ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

/* Integer aranges (lowered as start + i * step in i64, lower.c
 * int_arange): with a start and a step, a negative step, i32, read at a
 * dynamic index (index_select) and as the causal mask of an attention,
 * whose compare of two aranges is the scores GEMM's epilogue; a float
 * arange beside them keeps the f64 path.  Sizes where L != S and where
 * the causal mask's rows reach past S. */
static const char *IAR =
    "kernel iar(q: f32[2, L, 8], k: f32[2, S, 8], v: f32[2, S, 8], ix: i64[M]) -> "
    "(f32[2, L, 8], i64[S], i32[S], i64[M], f32[3]) {\n"
    "  a = arange(3, 3 + 2 * S, 2)\n"
    "  return scaled_dot_product_attention(q, k, v, is_causal=true), "
    "a * 5 - arange(4, 4 - 3 * S, -3), arange(S).to(i32) * 3 - 7, a.index_select(0, ix), "
    "arange(0.5, 3.5) * 2.0\n"
    "}\n";

START_TEST(integer_aranges) {
  Lib L;
  build(&L, IAR, "iar");
  static const int64_t sz[][3] = {{5, 5, 4}, {3, 7, 1}, {9, 4, 6}, {1, 1, 1}};
  for (size_t c = 0; c < sizeof sz / sizeof sz[0]; c++) {
    int64_t Ls = sz[c][0], S = sz[c][1], M = sz[c][2];
    int64_t sq[3] = {2, Ls, 8}, sk[3] = {2, S, 8}, s1[1] = {S}, sm[1] = {M}, s3[1] = {3};
    Ten in[4], out[5];
    ten(&in[0], DT_F32, 3, sq, NULL, 0, false);
    ten(&in[1], DT_F32, 3, sk, NULL, 1, false);
    ten(&in[2], DT_F32, 3, sk, NULL, 2, false);
    ten(&in[3], DT_I64, 1, sm, NULL, 0, false);
    for (int64_t i = 0; i < M; i++) ((int64_t *)in[3].store)[i] = (i * 5 + 2) % S;
    out_ten(&out[0], DT_F32, 3, sq);
    out_ten(&out[1], DT_I64, 1, s1);
    out_ten(&out[2], DT_I32, 1, s1);
    out_ten(&out[3], DT_I64, 1, sm);
    out_ten(&out[4], DT_F32, 1, s3);
    threads_and_reference(&L, "iar", in, 4, out, 5, true);
    for (int i = 0; i < 4; i++) ten_free(&in[i]);
    for (int i = 0; i < 5; i++) ten_free(&out[i]);
  }
  unbuild(&L);
}
END_TEST

static const char *CL =
    "kernel cl(x: f32[N, C, H, W] channels_last) -> f32[N, C, H, W] channels_last {\n"
    "  return x * 2.0 + x.mean(1, keepdim=true) - x.amin([2, 3], keepdim=true)\n"
    "}\n"
    "kernel second(a: i16[K], b: i16[K]) -> (i16[K], f32[]) {\n"
    "  return a * b - (a + 1), (a.to(f32) / (b.abs() + 1)).sum()\n"
    "}\n";

START_TEST(channels_last_and_two_kernels) {
  Lib L;
  build(&L, CL, "cl");
  int64_t s[4] = {2, 3, 4, 5}, st[4] = {60, 1, 15, 3};
  Ten in[2], out[2];
  ten(&in[0], DT_F32, 4, s, st, 0, false);
  ten(&out[0], DT_F32, 4, s, st, 0, false);
  memset(out[0].store, 0x5A, out[0].bytes);
  run_and_compare(&L, "cl", in, 1, out, 1, true);
  ten_free(&in[0]), ten_free(&out[0]);
  int64_t k[1] = {11};
  ten(&in[0], DT_I16, 1, k, NULL, 0, false);
  ten(&in[1], DT_I16, 1, k, NULL, 3, false);
  out_ten(&out[0], DT_I16, 1, k);
  out_ten(&out[1], DT_F32, 0, NULL);
  run_and_compare(&L, "second", in, 2, out, 2, true);
  for (int i = 0; i < 2; i++) ten_free(&in[i]), ten_free(&out[i]);
  unbuild(&L);
}
END_TEST

START_TEST(scalar_parameters) {
  Lib L;
  build(&L, "kernel sc(x: f32[N], alpha: f32, h: f16, n: i64, flag: bool) -> f32[N] {\n"
            "  return where(flag, x * alpha + h, x - n)\n}\n", "sc");
  int64_t s[1] = {6};
  Ten x, o;
  ten(&x, DT_F32, 1, s, NULL, 0, false);
  out_ten(&o, DT_F32, 1, s);
  typedef int (*Fn)(const DLTensor *, float, uint16_t, int64_t, bool, DLTensor *);
  Fn f = (Fn)sym(&L, "sc");
  for (int flag = 0; flag < 2; flag++) {
    ck_assert_int_eq(f(&x.t, 1.5f, f32_to_f16(0.25f), 3, flag, &o.t), 0);
    for (int i = 0; i < 6; i++) {
      float xi = ((float *)x.store)[i], got = ((float *)o.store)[i];
      float want = flag ? xi * 1.5f + 0.25f : xi - 3.0f;
      ck_assert_float_eq_tol(got, want, 1e-6);
    }
  }
  ten_free(&x), ten_free(&o);
  unbuild(&L);
}
END_TEST

/* A view of a scalar parameter as a GEMM operand or a conv bias: the
 * GEMM reads operands through memory, scalars have none (cpu/gemm_nest.c
 * gemm_base makes a one-element copy).  x @ alpha.expand(3, 4) is
 * alpha * the row sums of x; a bias beta adds beta everywhere. */
START_TEST(scalar_views_as_gemm_operands) {
  const char *src =
      "kernel gv(x: f32[2, 3], alpha: f32) -> f32[2, 4] {\n  return x @ alpha.expand(3, 4)\n}\n"
      "kernel cb(x: f32[1, 2, 4, 4], w: f32[3, 2, 3, 3], beta: f32) -> f32[1, 3, 2, 2] {\n"
      "  return conv2d(x, w, beta.expand(3))\n}\n";
  for (int o = 0; o <= 2; o += 2) {
    Lib L;
    build_flags(&L, src, NULL, o ? "-O2" : "-O0");
    int64_t xs[2] = {2, 3}, os[2] = {2, 4}, cxs[4] = {1, 2, 4, 4}, ws[4] = {3, 2, 3, 3},
            cos_[4] = {1, 3, 2, 2};
    Ten x, out, cx, w, c0, c1;
    ten(&x, DT_F32, 2, xs, NULL, 0, false);
    out_ten(&out, DT_F32, 2, os);
    typedef int (*Gv)(const DLTensor *, float, DLTensor *);
    ck_assert_int_eq(((Gv)sym(&L, "gv"))(&x.t, 1.5f, &out.t), 0);
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++) {
        float want = 0;
        for (int k = 0; k < 3; k++) want += 1.5f * ((float *)x.store)[i * 3 + k];
        ck_assert_float_eq_tol(((float *)out.store)[i * 4 + j], want, 1e-5);
      }
    ten(&cx, DT_F32, 4, cxs, NULL, 0, false);
    ten(&w, DT_F32, 4, ws, NULL, 0, false);
    out_ten(&c0, DT_F32, 4, cos_);
    out_ten(&c1, DT_F32, 4, cos_);
    typedef int (*Cb)(const DLTensor *, const DLTensor *, float, DLTensor *);
    ck_assert_int_eq(((Cb)sym(&L, "cb"))(&cx.t, &w.t, 0.0f, &c0.t), 0);
    ck_assert_int_eq(((Cb)sym(&L, "cb"))(&cx.t, &w.t, 2.5f, &c1.t), 0);
    for (int i = 0; i < 12; i++)
      ck_assert_float_eq_tol(((float *)c1.store)[i] - ((float *)c0.store)[i], 2.5f, 1e-5);
    ten_free(&x), ten_free(&out), ten_free(&cx), ten_free(&w), ten_free(&c0), ten_free(&c1);
    unbuild(&L); /* the small GEMM path runs on the pool */
  }
}
END_TEST

/* Scalar parameters are SSA values from the arguments on (codegen/entry.c
 * cg_setup_buffers), never one-element buffers in memory: the kernel's
 * own function has no stack slot for them (the scalars' types here are
 * ones nothing else of an elementwise kernel allocates: the symbol and
 * check arrays are i64/i32, scratch slots and contexts pointers and
 * structs) and, at -O0, never stores an argument; at -O2 a parallel
 * nest gets them by value in its context (the context struct holds a
 * double, and the kernel stores %alpha into it).  Old code: `alloca double` + `store
 * double %alpha` at -O0, the slot's address in the context at -O2. */
static const char *SCAL =
    "kernel scal(x: f32[N], alpha: f64, beta: f32, h: f16, b: bf16, flag: bool) -> f32[N] {\n"
    "  return where(flag, x * alpha + h, x * beta - b)\n}\n";

START_TEST(scalars_by_value_in_llvm_ir) {
  char dir[] = "/tmp/tdsl_cgs_XXXXXX", cmd[2048], path[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/s.tdsl", dir);
  write_text(path, SCAL);
  for (int o = 0; o <= 2; o += 2) {
    snprintf(cmd, sizeof cmd, "%s %s -o %s/s%d.ll --emit=llvm -O%d && "
             "awk '/^define i32 @scal\\(/,/^}/' %s/s%d.ll > %s/entry%d.ll && "
             "grep -q 'define i32 @scal(ptr %%x, double %%alpha, float %%beta, i16 %%h, "
             "i16 %%b, i8 %%flag' %s/entry%d.ll",
             TDSL_TDSLC, path, dir, o, o, dir, o, dir, o, dir, o);
    ck_assert_int_eq(sh(cmd), 0);
    /* no stack slot of a scalar's type in the entry */
    snprintf(cmd, sizeof cmd, "grep -Eq 'alloca (double|float|half|i16|i8)([ ,]|$)' %s/entry%d.ll",
             dir, o);
    ck_assert_msg(sh(cmd) == 1, "-O%d: a scalar parameter in a stack slot (%s/entry%d.ll)", o,
                  dir, o);
    /* -O0: no argument stored anywhere (the nest is inline, no context);
     * -O2: into the context (checked below; no slot: above) */
    snprintf(cmd, sizeof cmd, "grep -Eq 'store [a-z0-9]+ %%(alpha|beta|h|b|flag),' %s/s%d.ll",
             dir, o);
    ck_assert_int_eq(sh(cmd), o ? 0 : 1);
  }
  /* -O2: the nest runs in parallel, the scalars in its context by value */
  snprintf(cmd, sizeof cmd, "grep -q 'define private void @scal.nest0.body' %s/s2.ll && "
           "grep -Eq 'alloca \\{ \\[[0-9]+ x ptr\\], \\[[0-9]+ x i64\\], \\{ [^}]*double' "
           "%s/entry2.ll", dir, dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

/* ---- entry checks ---------------------------------------------------------- */

static const char *CHK =
    "kernel chk(x: f32[N, 4], y: f32[N] strided) -> (f32[N, 4] strided, f32[3]) {\n"
    "  return x + y.unsqueeze(1), y.narrow(0, 2, 3)\n"
    "}\n";

typedef int (*ChkFn)(const DLTensor *, const DLTensor *, DLTensor *, DLTensor *);

typedef struct ChkCase {
  Ten x, y, o0, o1;
} ChkCase;

static void chk_setup(ChkCase *c, int64_t n) {
  int64_t sx[2] = {n, 4}, sy[1] = {n}, s3[1] = {3};
  ten(&c->x, DT_F32, 2, sx, NULL, 0, false);
  ten(&c->y, DT_F32, 1, sy, NULL, 0, false);
  out_ten(&c->o0, DT_F32, 2, sx);
  out_ten(&c->o1, DT_F32, 1, s3);
}

static void chk_free(ChkCase *c) {
  ten_free(&c->x), ten_free(&c->y), ten_free(&c->o0), ten_free(&c->o1);
}

/* Calls chk, expects code, and checks both outputs are untouched. */
static void expect(Lib *L, ChkCase *c, int code, const char *what) {
  ChkFn f = (ChkFn)sym(L, "chk");
  const char *(*last)(void) = (const char *(*)(void))sym(L, "tdsl_last_error");
  int rc = f(&c->x.t, &c->y.t, &c->o0.t, &c->o1.t);
  ck_assert_msg(rc == code, "%s: got %d, want %d (%s)", what, rc, code, last());
  if (code != 0) {
    ck_assert_msg(strlen(last()) > 0, "%s: no message", what);
    ck_assert_msg(strstr(last(), "chk") != NULL, "%s: message '%s' lacks the kernel",
                  what, last());
    ck_assert_msg(untouched(&c->o0) && untouched(&c->o1), "%s: outputs written", what);
  }
}

START_TEST(entry_checks) {
  Lib L;
  build(&L, CHK, "chk");
  ChkCase c;
  chk_setup(&c, 6);
  expect(&L, &c, 0, "valid call");
  chk_free(&c);

  chk_setup(&c, 6);
  ChkFn f = (ChkFn)sym(&L, "chk");
  ck_assert_int_eq(f(NULL, &c.y.t, &c.o0.t, &c.o1.t), TDSL_E_NULL);
  ck_assert(untouched(&c.o0) && untouched(&c.o1));
  c.x.t.ndim = 1;
  expect(&L, &c, TDSL_E_RANK, "rank");
  c.x.t.ndim = 2;
  c.x.t.dtype = TDSL_F64;
  expect(&L, &c, TDSL_E_DTYPE, "dtype");
  c.x.t.dtype = TDSL_F32;
  c.y.t.device.device_type = kDLCUDA;
  expect(&L, &c, TDSL_E_DEVICE, "device");
  c.y.t.device.device_type = kDLCPU;
  c.x.shape[1] = 5;
  expect(&L, &c, TDSL_E_SHAPE, "static dim");
  c.x.shape[1] = 4;
  c.y.shape[0] = 7;
  expect(&L, &c, TDSL_E_SYMBOL, "symbol N seen twice");
  c.y.shape[0] = 6;
  c.x.stride[0] = 5; /* x is contiguous: row stride must be 4 */
  expect(&L, &c, TDSL_E_LAYOUT, "layout");
  c.x.stride[0] = 4;
  c.x.t.byte_offset = 2;
  expect(&L, &c, TDSL_E_ALIGN, "alignment");
  c.x.t.byte_offset = 0;
  c.o1.shape[0] = 4;
  expect(&L, &c, TDSL_E_SHAPE, "output dim");
  c.o1.shape[0] = -5; /* a negative output dim outside a query is still wrong */
  expect(&L, &c, TDSL_E_SHAPE, "negative output dim");
  c.o1.shape[0] = 3;
  c.o0.t.data = c.x.store; /* an output over an input */
  ck_assert_int_eq(f(&c.x.t, &c.y.t, &c.o0.t, &c.o1.t), TDSL_E_OVERLAP);
  ck_assert(untouched(&c.o1));
  c.o0.t.data = c.o0.store;
  c.o0.stride[1] = 0; /* a strided output mapping two elements to one address */
  expect(&L, &c, TDSL_E_OVERLAP, "internal overlap");
  c.o0.stride[1] = 1;
  c.o1.t.data = NULL;
  expect(&L, &c, TDSL_E_NULL, "one output without data");
  c.o1.t.data = c.o1.store;
  chk_free(&c);

  /* narrow(0, 2, 3) needs N >= 5 */
  chk_setup(&c, 4);
  expect(&L, &c, TDSL_E_CHECK, "run-time check");
  const char *(*last)(void) = (const char *(*)(void))sym(&L, "tdsl_last_error");
  ck_assert_str_eq(last(), "kernel 'chk': narrow(): start 2 + length 3 exceeds the size "
                           "N (= 4) of dim 0 (shape [N])");
  chk_free(&c);

  /* shape query */
  chk_setup(&c, 6);
  /* a query's shape arrays may hold anything (docs/abi.md passes an
   * uninitialized one): negative and huge garbage must not be checked */
  int64_t shp0[2] = {-7, INT64_MIN}, shp1[1] = {-1}, st0[2] = {-1, -1};
  c.o0.t.data = c.o1.t.data = NULL;
  c.o0.t.shape = shp0, c.o0.t.strides = st0;
  c.o1.t.shape = shp1, c.o1.t.strides = NULL;
  ck_assert_int_eq(f(&c.x.t, &c.y.t, &c.o0.t, &c.o1.t), 0);
  ck_assert_int_eq(shp0[0], 6);
  ck_assert_int_eq(shp0[1], 4);
  ck_assert_int_eq(st0[0], 4);
  ck_assert_int_eq(st0[1], 1);
  ck_assert_int_eq(shp1[0], 3);
  chk_free(&c);

  /* a strided y with byte offset and a strided (column-major) output */
  chk_setup(&c, 6);
  int64_t ys[1] = {6}, yst[1] = {3};
  ten_free(&c.y);
  ten(&c.y, DT_F32, 1, ys, yst, 2, false);
  c.o0.stride[0] = 1, c.o0.stride[1] = 6;
  expect(&L, &c, 0, "strided arguments");
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 4; j++) {
      float xv = ((float *)c.x.store)[i * 4 + j];
      float yv = ((float *)c.y.store)[2 + 3 * i];
      ck_assert_float_eq(((float *)c.o0.store)[i + 6 * j], xv + yv);
    }
  for (int i = 0; i < 3; i++)
    ck_assert_float_eq(((float *)c.o1.store)[i], ((float *)c.y.store)[2 + 3 * (2 + i)]);
  chk_free(&c);
  unbuild(&L);
}
END_TEST

/* A shape query writes a `strided` result's PyTorch strides: (1, 6) for
 * (x - y).t() of [N, 6] operands, (3, 6, 1) for a permuted view of a sum;
 * the kernel then computes into storage laid out so. */
START_TEST(strided_result_query_strides) {
  Lib L;
  build(&L,
        "kernel tq(x: f32[N, 6], y: f32[N, 6]) -> (f32[6, N] strided, "
        "f32[2, N, 3] strided) {\n"
        "  return (x - y).t(), (x + y).view(N, 2, 3).permute(1, 0, 2)\n"
        "}\n",
        "tq");
  int64_t n = 5, sx[2] = {n, 6};
  Ten x, y, o0, o1;
  ten(&x, DT_F32, 2, sx, NULL, 0, false);
  ten(&y, DT_F32, 2, sx, NULL, 1, false);
  int64_t sh0[2] = {0, 0}, st0[2] = {-1, -1}, sh1[3] = {0, 0, 0},
          st1[3] = {-1, -1, -1};
  DLTensor q0 = {.ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = sh0,
                 .strides = st0, .device = {kDLCPU, 0}};
  DLTensor q1 = {.ndim = 3, .dtype = {kDLFloat, 32, 1}, .shape = sh1,
                 .strides = st1, .device = {kDLCPU, 0}};
  typedef int (*Fn)(const DLTensor *, const DLTensor *, DLTensor *, DLTensor *);
  Fn f = (Fn)sym(&L, "tq");
  ck_assert_int_eq(f(&x.t, &y.t, &q0, &q1), 0);
  ck_assert_int_eq(sh0[0], 6);
  ck_assert_int_eq(sh0[1], n);
  ck_assert_int_eq(st0[0], 1); /* PyTorch's; row-major would be (N, 1) */
  ck_assert_int_eq(st0[1], 6);
  ck_assert_int_eq(st1[0], 3);
  ck_assert_int_eq(st1[1], 6);
  ck_assert_int_eq(st1[2], 1);
  ten(&o0, DT_F32, 2, sh0, st0, 0, false);
  ten(&o1, DT_F32, 3, sh1, st1, 0, false);
  run_and_compare(&L, "tq", (Ten[]){x, y}, 2, (Ten[]){o0, o1}, 2, false);
  ten_free(&x), ten_free(&y), ten_free(&o0), ten_free(&o1);
  unbuild(&L);
}
END_TEST

START_TEST(intermediate_overflow) {
  Lib L;
  build(&L, "kernel big(x: f32[N] strided) -> f32[] {\n"
            /* the flattening view keeps the sum materialized under fusion */
            "  return (x.unsqueeze(1) + x.unsqueeze(0)).flatten().sum()\n}\n", "big");
  int64_t n[1] = {INT64_C(1) << 40}, st[1] = {0}; /* one stored element */
  Ten x, o;
  ten(&x, DT_F32, 1, n, st, 0, false);
  out_ten(&o, DT_F32, 0, NULL);
  int (*f)(const DLTensor *, DLTensor *) = (int (*)(const DLTensor *, DLTensor *))sym(&L, "big");
  ck_assert_int_eq(f(&x.t, &o.t), TDSL_E_OVERFLOW);
  ck_assert(untouched(&o));
  ten_free(&x), ten_free(&o);
  unbuild(&L);
}
END_TEST

START_TEST(info_and_unsupported) {
  Lib L;
  build(&L, EW, "ew");
  const tdsl_kernel_info *(*info)(void) = (const tdsl_kernel_info *(*)(void))sym(&L, "ew_info");
  const tdsl_kernel_info *ki = info();
  ck_assert_str_eq(ki->name, "ew");
  ck_assert_int_eq(ki->nparams, 3);
  ck_assert_int_eq(ki->nresults, 3);
  ck_assert_int_eq(ki->device_type, kDLCPU);
  ck_assert_str_eq(ki->params[0].name, "x");
  ck_assert_str_eq(ki->params[0].dims[0], "N");
  ck_assert_str_eq(ki->params[0].dims[1], "4");
  ck_assert(tdsl_dtype_equal(ki->params[2].dtype, TDSL_F16));
  ck_assert(tdsl_dtype_equal(ki->results[2].dtype, TDSL_BOOL));
  ck_assert_str_eq(ki->results[1].name, "out1");
  unbuild(&L);

  char dir[] = "/tmp/tdsl_cgu_XXXXXX", cmd[1024], path[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/m.tdsl", dir);
  write_text(path, "kernel mm(a: f32[2, 3], b: f32[3, 4]) -> f32[2, 4] {\n"
                   "  return a @ b\n}\n");
  /* every op compiles now (matmul: test_codegen_gemm.c): no message */
  snprintf(cmd, sizeof cmd, "%s %s -o %s/m.o 2> %s/err.txt", TDSL_TDSLC, path, dir, dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "test ! -s %s/err.txt", dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

START_TEST(emit_llvm_and_asm) {
  char dir[] = "/tmp/tdsl_cge_XXXXXX", cmd[1024], path[128];
  ck_assert_ptr_nonnull(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/e.tdsl", dir);
  write_text(path, EW);
  const char *targets[] = {"host", "x86-64", "x86-64-v3"};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "%s %s -o %s/e.o --emit=llvm,asm,obj --target=%s -O%d",
             TDSL_TDSLC, path, dir, targets[i], i + 1);
    ck_assert_int_eq(sh(cmd), 0);
    snprintf(cmd, sizeof cmd, "grep -q 'define.*i32 @ew(' %s/e.ll && grep -q 'ew_info' %s/e.s",
             dir, dir);
    ck_assert_int_eq(sh(cmd), 0);
  }
  snprintf(cmd, sizeof cmd, "%s %s -o - --emit=header | grep -q 'int ew(const DLTensor \\*x'",
           TDSL_TDSLC, path);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  sh(cmd);
}
END_TEST

/* Per-channel vectors broadcast over H, W (stride 0 on both) and sums
 * over H, W: the backend collapses H and W into one loop although x's
 * stride along H is W while dense strides are max(W, 1) (cpu/vloops.c
 * cpu_acc_collapses); odd sizes and zero-size H or W must stay exact. */
static const char *CHAN =
    "kernel chan(x: f32[N, C, H, W], a: f32[C], b: f32[C]) -> (f32[N, C, H, W], f32[N, C]) {\n"
    "  y = relu((x * a[:, None, None] + b[:, None, None]) * 0.5 - b[:, None, None]) / "
    "a[:, None, None]\n"
    "  return y, x.sum([2, 3]) + a\n"
    "}\n";

START_TEST(per_channel_broadcast_collapse) {
  Lib L;
  build(&L, CHAN, "chan");
  const int64_t shapes[4][4] = {{2, 3, 5, 7}, {1, 4, 1, 33}, {2, 3, 0, 7}, {2, 3, 5, 0}};
  for (int t = 0; t < 4; t++) {
    int64_t sc[1] = {shapes[t][1]}, so[2] = {shapes[t][0], shapes[t][1]};
    Ten in[3], out[2];
    ten(&in[0], DT_F32, 4, shapes[t], NULL, 0, false);
    ten(&in[1], DT_F32, 1, sc, NULL, 2, false);
    ten(&in[2], DT_F32, 1, sc, NULL, 0, false);
    out_ten(&out[0], DT_F32, 4, shapes[t]);
    out_ten(&out[1], DT_F32, 2, so);
    run_and_compare(&L, "chan", in, 3, out, 2, true);
    for (int i = 0; i < 3; i++) ten_free(&in[i]);
    for (int i = 0; i < 2; i++) ten_free(&out[i]);
  }
  unbuild(&L);
}
END_TEST

/* More tensor parameters than any fixed table (70): a kernel summing
 * them compiles, its header compiles, and the entry checks (overlap
 * included) see every one.  The 71-argument call goes through a driver
 * compiled against the generated header. */
enum { NMANY = 70 };

static char *many_source(void) {
  static char src[NMANY * 48 + 256];
  int n = snprintf(src, sizeof src, "kernel many(");
  for (int i = 0; i < NMANY; i++)
    n += snprintf(src + n, sizeof src - (size_t)n, "%sx%d: f32[2]", i ? ", " : "", i);
  n += snprintf(src + n, sizeof src - (size_t)n, ") -> f32[2] {\n  return x0");
  for (int i = 1; i < NMANY; i++)
    n += snprintf(src + n, sizeof src - (size_t)n, " + x%d * %d.0", i, i + 1);
  snprintf(src + n, sizeof src - (size_t)n, "\n}\n");
  return src;
}

typedef int (*ManyCall)(void *fn, const DLTensor *const *in, DLTensor *out);

static ManyCall many_driver(Lib *L, void **so) {
  char path[128], cmd[1024], drv[NMANY * 8 + 256];
  int n = snprintf(drv, sizeof drv,
                   "#include \"k.h\"\n"
                   "int call_many(void *fn, const DLTensor *const *a, DLTensor *o);\n"
                   "int call_many(void *fn, const DLTensor *const *a, DLTensor *o) {\n"
                   "  __typeof__(many) *f = (__typeof__(many) *)fn;\n  return f(");
  for (int i = 0; i < NMANY; i++) n += snprintf(drv + n, sizeof drv - (size_t)n, "a[%d], ", i);
  snprintf(drv + n, sizeof drv - (size_t)n, "o);\n}\n");
  snprintf(path, sizeof path, "%s/drv.c", L->dir);
  write_text(path, drv);
  snprintf(cmd, sizeof cmd,
           "%s -std=c17 -Wall -Werror -shared -fPIC -I%s/runtime/include -I%s "
           "%s -o %s/drv.so", TDSL_CC, TDSL_SOURCE_DIR, L->dir, path, L->dir);
  ck_assert_int_eq(sh(cmd), 0);
  snprintf(path, sizeof path, "%s/drv.so", L->dir);
  *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  ck_assert_msg(*so != NULL, "dlopen: %s", dlerror());
  return (ManyCall)dlsym(*so, "call_many");
}

START_TEST(many_tensor_parameters) {
  Lib L;
  build(&L, many_source(), "many");
  const tdsl_kernel_info *(*info)(void) =
      (const tdsl_kernel_info *(*)(void))sym(&L, "many_info");
  ck_assert_int_eq(info()->nparams, NMANY);
  void *dso;
  ManyCall call_many = many_driver(&L, &dso);
  int64_t shape[1] = {2};
  Ten x[NMANY], o;
  const DLTensor *args[NMANY];
  float want[2] = {0, 0};
  for (int i = 0; i < NMANY; i++) {
    ten(&x[i], DT_F32, 1, shape, NULL, 0, false);
    float v[2] = {(float)(i % 7), (float)(i % 3) - 1};
    memcpy(x[i].h.data, v, sizeof v);
    for (int j = 0; j < 2; j++) want[j] += v[j] * (float)(i ? i + 1 : 1);
    args[i] = &x[i].t;
  }
  out_ten(&o, DT_F32, 1, shape);
  ck_assert_int_eq(call_many(sym(&L, "many"), args, &o.t), 0);
  /* small integers: every partial sum is exact in f32 */
  ck_assert_mem_eq(o.h.data, want, sizeof want);
  /* the last input aliasing the output is seen by the overlap check */
  ck_assert_int_eq(call_many(sym(&L, "many"), args, &x[NMANY - 1].t),
                   TDSL_E_OVERLAP);
  dlclose(dso);
  for (int i = 0; i < NMANY; i++) ten_free(&x[i]);
  ten_free(&o);
  unbuild(&L);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("codegen");
  TCase *t = tcase_create("cpu");
  tcase_set_timeout(t, 120);
  tcase_add_test(t, elementwise_broadcast_mixed);
  tcase_add_test(t, maximum_minimum_numbers);
  tcase_add_test(t, integer_ops_and_casts);
  tcase_add_test(t, views_of_params_with_strides_and_offsets);
  tcase_add_test(t, reductions);
  tcase_add_test(t, short_row_argmax);
  tcase_add_test(t, long_reductions_split);
  tcase_add_test(t, sources_and_reshape_copy);
  tcase_add_test(t, integer_aranges);
  tcase_add_test(t, scalar_parameters);
  tcase_add_test(t, scalars_by_value_in_llvm_ir);
  tcase_add_test(t, scalar_views_as_gemm_operands);
  tcase_add_test(t, channels_last_and_two_kernels);
  tcase_add_test(t, entry_checks);
  tcase_add_test(t, strided_result_query_strides);
  tcase_add_test(t, intermediate_overflow);
  tcase_add_test(t, info_and_unsupported);
  tcase_add_test(t, emit_llvm_and_asm);
  tcase_add_test(t, per_channel_broadcast_collapse);
  tcase_add_test(t, many_tensor_parameters);
  suite_add_tcase(s, t);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
