/* ops.h — the op table of the tensor IR: every fact about an op that the
 * front end, the interpreter, the passes and the code generators consult.
 * One row per op:
 *
 *   OP(ENUM, "name", nargs, KIND, DTYPE, COST, MATH)
 *
 *  - nargs: the number of tensor operands (-1: variable, see the row).
 *  - KIND: the op's family (OpKind below).
 *  - DTYPE: for elementwise ops, how the compute and result dtypes follow
 *    from the input dtype (the operand's, or the operands' promoted dtype
 *    for binary ops), and which dtypes PyTorch rejects (OpDtype below;
 *    sema checks it and inserts the casts, ir/verify.c checks the result).
 *  - COST: the relative cost of one element, for pass fuse's choice
 *    between inlining an elementwise producer into each reader and
 *    computing it once (1: an add; 8: a division or a transcendental).
 *  - MATH: how the CPU code generator computes it for floating-point
 *    dtypes: a function of the math layer (MATH_<MATH>, codegen/math.h),
 *    or NONE: a case of its own in codegen/expr.c (IR instructions,
 *    intrinsics).  The interpreter (ir/interp.c) computes every op in
 *    double with C's libm.
 *
 * The meaning of each op's integer attributes (IrValue.attrs), float
 * attributes (fattr: parameters such as softplus's beta) and flags is in the comment beside its row; every
 * op's result geometry (shape, semantic strides, offset) is in the value.
 *
 * Adding an elementwise op (the checklist):
 *  1. a row here: name, arity, dtype rule, cost, math-layer function;
 *  2. frontend/sema_elementwise.c: a `sema_elementwise_builtins[]` entry
 *     (function, method or both, as PyTorch spells it) and its arguments
 *     in the handler (h_unary, h_binary, or its own); errors PyTorch
 *     raises at the call's line:col;
 *  3. ir/interp_scalar.c: unary_f/unary_i or binary_f/binary_i (libm, in
 *     double);
 *  4. codegen/expr.c: unary_f/unary_i or binary_f/binary_i, unless MATH
 *     names a math-layer function (then only the integer cases); a new
 *     math-layer function goes in codegen/math.c with its libm reference
 *     in tests/unit/test_math.c and its ulps in docs/numerics.md;
 *  5. tests: kernels in tests/pytorch/cases/ for every accepted dtype,
 *     with `# @special x` (+-0, +-inf, NaN, large) and `# @opt O0`, each
 *     error PyTorch raises as an `# @error` kernel in an err_*.tdsl file
 *     of its own; tests/pytorch/gen.py's ENV binds the name to torch
 *     (through _half where torch 1.13 lacks an f16 kernel); run
 *     `gen.py cases/X.tdsl ...` to make their data; test_pytorch replays
 *     them in the interpreter, test_exec compiled at -O2 and -O0;
 *     messages as golden diagnostics in tests/golden/; test_ir checks
 *     the table's own consistency;
 *  6. the name in the spec-facing lists: README's tour, docs/language.md,
 *     editors/ (ctest 'editors' checks it), tests/random/progen.c and
 *     tests/pytorch/fuzz_programs.py where the generators can use it.
 *
 * Conventions that hold for every op:
 *  - Operands of elementwise ops have exactly the result's shape (sema
 *    inserts EXPAND views for broadcasting, flagged IRF_IMPLICIT) and the
 *    op's compute dtype (sema inserts CAST ops); DR_TO_BOOL ops compute
 *    in their operands' dtype and give bool.
 *  - View ops (kind IRK_VIEW) produce a value that aliases the storage of
 *    operand 0; their shape/stride/offset are absolute in that storage
 *    (the storage of the first non-view ancestor).
 *  - Every other op produces a fresh dense value whose semantic strides
 *    are PyTorch's.
 *  - Half-precision math is done in f32 and rounded when stored. */
#ifndef TDSL_OPS_H
#define TDSL_OPS_H

/* clang-format off */
#define OP_LIST(OP)                                                                   \
  /* sources */                                                                       \
  OP(PARAM, "param", 0, IRK_SOURCE, DR_NA, 1, NONE)   /* ival: parameter index */     \
  OP(CONST, "const", 0, IRK_SOURCE, DR_NA, 1, NONE)   /* 0-dim; fval or ival by       \
                                     dtype; IRF_WRAPPED for literals */               \
  OP(SYMVAL, "symval", 0, IRK_SOURCE, DR_NA, 1, NONE) /* 0-dim i64 wrapped;           \
                                     attrs[0] = the symbolic value */                 \
  OP(TENSOR, "tensor", 0, IRK_SOURCE, DR_NA, 1, NONE) /* data: row-major elements */  \
  OP(FULL, "full", 0, IRK_SOURCE, DR_NA, 1, NONE)     /* every element fval/ival */   \
  OP(ARANGE, "arange", 0, IRK_SOURCE, DR_NA, 1, NONE) /* fattr[0] start, fattr[1]     \
                                     step (ints exact in doubles up to 2^53);         \
                                     length is shape[0] */                            \
  /* views */                                                                         \
  OP(VIEW, "view", 1, IRK_VIEW, DR_NA, 1, NONE)       /* also reshape-as-view,        \
                                     flatten, unflatten; attrs: new shape */          \
  OP(PERMUTE, "permute", 1, IRK_VIEW, DR_NA, 1, NONE) /* attrs: permutation; also     \
                                     transpose, t, .T, .mT */                         \
  OP(EXPAND, "expand", 1, IRK_VIEW, DR_NA, 1, NONE)   /* attrs: new shape;            \
                                     IRF_IMPLICIT for broadcasting */                 \
  OP(UNSQUEEZE, "unsqueeze", 1, IRK_VIEW, DR_NA, 1, NONE) /* attrs[0]: new dim */     \
  OP(SQUEEZE, "squeeze", 1, IRK_VIEW, DR_NA, 1, NONE) /* attrs: removed dims */       \
  OP(SLICE, "slice", 1, IRK_VIEW, DR_NA, 1, NONE)     /* attrs: dim, start, end,      \
                                     step (normalized); also narrow */                \
  OP(SELECT, "select", 1, IRK_VIEW, DR_NA, 1, NONE)   /* attrs: dim, index          \
                                     (normalized) */                                  \
  OP(DIAGONAL, "diagonal", 1, IRK_VIEW, DR_NA, 1, NONE) /* attrs: offset, dim1,      \
                                     dim2 */                                          \
  OP(UNFOLD, "unfold", 1, IRK_VIEW, DR_NA, 1, NONE)   /* attrs: dim, size, step */    \
  OP(AS_STRIDED, "as_strided", 1, IRK_VIEW, DR_NA, 1, NONE) /* geometry is the       \
                                     attribute */                                     \
  /* copies */                                                                        \
  OP(COPY, "copy", 1, IRK_COPY, DR_NA, 1, NONE)       /* same shape, strides as this  \
                                     value's; IRF_CL: to channels-last, IRF_CLONE:    \
                                     clone() */                                       \
  OP(RESHAPE, "reshape", 1, IRK_COPY, DR_NA, 1, NONE) /* row-major element order of   \
                                     the operand into this shape */                   \
  OP(CAST, "cast", 1, IRK_COPY, DR_NA, 1, NONE)       /* dtype conversion, same       \
                                     shape */                                         \
  /* elementwise unary */                                                             \
  OP(NEG, "neg", 1, IRK_UNARY, DR_KEEP, 1, NONE)                                      \
  OP(ABS, "abs", 1, IRK_UNARY, DR_KEEP, 1, NONE)                                      \
  OP(EXP, "exp", 1, IRK_UNARY, DR_FLOAT, 8, EXP)                                      \
  OP(LOG, "log", 1, IRK_UNARY, DR_FLOAT, 8, LOG)                                      \
  OP(LOG1P, "log1p", 1, IRK_UNARY, DR_FLOAT, 8, LOG1P)                                \
  OP(EXPM1, "expm1", 1, IRK_UNARY, DR_FLOAT, 8, EXPM1)                                \
  OP(SQRT, "sqrt", 1, IRK_UNARY, DR_FLOAT, 8, NONE)                                   \
  OP(RSQRT, "rsqrt", 1, IRK_UNARY, DR_FLOAT, 8, NONE)                                 \
  OP(SIN, "sin", 1, IRK_UNARY, DR_FLOAT, 8, NONE)     /* f64: libm's on the CPU;      \
                                     f32: the math layer's (expr.c trig_fn) */        \
  OP(COS, "cos", 1, IRK_UNARY, DR_FLOAT, 8, NONE)                                     \
  OP(TANH, "tanh", 1, IRK_UNARY, DR_FLOAT, 8, TANH)                                   \
  OP(SIGMOID, "sigmoid", 1, IRK_UNARY, DR_FLOAT, 8, NONE) /* 1 / (1 + exp(-x)) */    \
  OP(RELU, "relu", 1, IRK_UNARY, DR_KEEP, 1, NONE)                                    \
  OP(GELU, "gelu", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE) /* IRF_TANH:               \
                                     approximate="tanh" */                            \
  OP(SILU, "silu", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE)                              \
  OP(ERF, "erf", 1, IRK_UNARY, DR_FLOAT, 8, ERF)                                      \
  OP(FLOOR, "floor", 1, IRK_UNARY, DR_KEEP, 1, NONE)                                  \
  OP(CEIL, "ceil", 1, IRK_UNARY, DR_KEEP, 1, NONE)                                    \
  OP(ROUND, "round", 1, IRK_UNARY, DR_KEEP, 1, NONE)  /* half to even */             \
  OP(SIGN, "sign", 1, IRK_UNARY, DR_ANY, 1, NONE)                                     \
  OP(RECIPROCAL, "reciprocal", 1, IRK_UNARY, DR_FLOAT, 8, NONE)                       \
  OP(LOGICAL_NOT, "logical_not", 1, IRK_UNARY, DR_TO_BOOL, 1, NONE)                   \
  OP(BITNOT, "bitnot", 1, IRK_UNARY, DR_BITS, 1, NONE) /* ~: bool not, integer      \
                                     bitwise */                                       \
  OP(TAN, "tan", 1, IRK_UNARY, DR_FLOAT, 8, NONE)     /* as sin */                    \
  OP(ASIN, "asin", 1, IRK_UNARY, DR_FLOAT, 8, ASIN)                                   \
  OP(ACOS, "acos", 1, IRK_UNARY, DR_FLOAT, 8, ACOS)                                   \
  OP(ATAN, "atan", 1, IRK_UNARY, DR_FLOAT, 8, ATAN)                                   \
  OP(SINH, "sinh", 1, IRK_UNARY, DR_FLOAT, 8, SINH)                                   \
  OP(COSH, "cosh", 1, IRK_UNARY, DR_FLOAT, 8, COSH)                                   \
  OP(ASINH, "asinh", 1, IRK_UNARY, DR_FLOAT, 8, ASINH)                                \
  OP(ACOSH, "acosh", 1, IRK_UNARY, DR_FLOAT, 8, ACOSH)                                \
  OP(ATANH, "atanh", 1, IRK_UNARY, DR_FLOAT, 8, ATANH)                                \
  OP(EXP2, "exp2", 1, IRK_UNARY, DR_FLOAT, 8, EXP2)                                   \
  OP(LOG2, "log2", 1, IRK_UNARY, DR_FLOAT, 8, LOG2)                                   \
  OP(LOG10, "log10", 1, IRK_UNARY, DR_FLOAT, 8, LOG10)                                \
  OP(TRUNC, "trunc", 1, IRK_UNARY, DR_KEEP, 1, NONE)  /* integers: unchanged */       \
  OP(FRAC, "frac", 1, IRK_UNARY, DR_FLOAT_ONLY, 1, NONE) /* x - trunc(x) */          \
  /* activations (torch.nn.functional); parameters in fattr */                        \
  OP(SOFTPLUS, "softplus", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE) /* fattr: beta,     \
                                     threshold */                                     \
  OP(LEAKY_RELU, "leaky_relu", 1, IRK_UNARY, DR_FLOAT_ONLY, 1, NONE) /* fattr[0]:    \
                                     negative_slope */                                \
  OP(ELU, "elu", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE) /* fattr[0]: alpha */          \
  OP(HARDTANH, "hardtanh", 1, IRK_UNARY, DR_KEEP, 1, NONE) /* fattr: min_val,        \
                                     max_val (integer dtypes: truncated and           \
                                     saturated to the dtype by sema) */               \
  OP(HARDSWISH, "hardswish", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE)                    \
  OP(HARDSIGMOID, "hardsigmoid", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE)                \
  OP(MISH, "mish", 1, IRK_UNARY, DR_FLOAT_ONLY, 8, NONE) /* x tanh(log1p(exp(x))) */  \
  /* predicates and their repair */                                                   \
  OP(ISNAN, "isnan", 1, IRK_UNARY, DR_TO_BOOL, 1, NONE) /* integers: false */         \
  OP(ISINF, "isinf", 1, IRK_UNARY, DR_TO_BOOL, 1, NONE) /* integers: false */         \
  OP(ISFINITE, "isfinite", 1, IRK_UNARY, DR_TO_BOOL, 1, NONE) /* integers: true */    \
  OP(NAN_TO_NUM, "nan_to_num", 1, IRK_UNARY, DR_ANY, 1, NONE) /* fattr: nan, posinf, \
                                     neginf (sema fills in the dtype's extremes);     \
                                     integers and bool: unchanged */                  \
  /* elementwise binary */                                                            \
  OP(ADD, "add", 2, IRK_BINARY, DR_ANY, 1, NONE)                                      \
  OP(SUB, "sub", 2, IRK_BINARY, DR_ANY, 1, NONE)      /* bool operands: sema's own    \
                                     error */                                         \
  OP(MUL, "mul", 2, IRK_BINARY, DR_ANY, 1, NONE)                                      \
  OP(DIV, "div", 2, IRK_BINARY, DR_FLOAT, 8, NONE)    /* true division */             \
  OP(FLOORDIV, "floordiv", 2, IRK_BINARY, DR_KEEP, 8, NONE) /* Python //; int / 0   \
                                     is an error in PyTorch, 0 here */                \
  OP(MOD, "mod", 2, IRK_BINARY, DR_KEEP, 8, NONE)     /* Python %, remainder():       \
                                     sign of the divisor; int % 0 as // */            \
  OP(POW, "pow", 2, IRK_BINARY, DR_KEEP, 8, POW)                                      \
  OP(MAXIMUM, "maximum", 2, IRK_BINARY, DR_ANY, 1, NONE) /* NaN-propagating */       \
  OP(MINIMUM, "minimum", 2, IRK_BINARY, DR_ANY, 1, NONE)                              \
  OP(ATAN2, "atan2", 2, IRK_BINARY, DR_FLOAT, 8, ATAN2) /* atan2(input, other):     \
                                     the angle of the point (other, input) */         \
  OP(HYPOT, "hypot", 2, IRK_BINARY, DR_FLOAT_ONLY, 8, NONE)                           \
  OP(FMOD, "fmod", 2, IRK_BINARY, DR_KEEP, 8, NONE)   /* C's fmod and %: sign of the  \
                                     dividend; int % 0 as // */                       \
  OP(COPYSIGN, "copysign", 2, IRK_BINARY, DR_FLOAT, 1, NONE)                          \
  OP(LOGADDEXP, "logaddexp", 2, IRK_BINARY, DR_FLOAT_ONLY, 8, NONE) /* log(e^a +     \
                                     e^b), PyTorch's formula */                       \
  OP(AND, "and", 2, IRK_BINARY, DR_BITS, 1, NONE)     /* & (bool and integers) */     \
  OP(OR, "or", 2, IRK_BINARY, DR_BITS, 1, NONE)                                       \
  OP(XOR, "xor", 2, IRK_BINARY, DR_BITS, 1, NONE)                                     \
  OP(EQ, "eq", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(NE, "ne", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(LT, "lt", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(LE, "le", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(GT, "gt", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(GE, "ge", 2, IRK_COMPARE, DR_TO_BOOL, 1, NONE)                                   \
  OP(WHERE, "where", 3, IRK_TERNARY, DR_NA, 1, NONE)  /* cond (bool), a, b */         \
  OP(LERP, "lerp", -1, IRK_TERNARY, DR_FLOAT_ONLY, 1, NONE) /* input, end [, weight]: \
                                     IRF_WEIGHT: weight is operand 2, else the        \
                                     number fattr[0] (kept in double, as PyTorch's    \
                                     Scalar) */                                       \
  /* reductions: attrs = reduced dims, sorted; IRF_KEEPDIM */                         \
  OP(SUM, "sum", 1, IRK_REDUCE, DR_NA, 1, NONE)       /* integer inputs cast to i64 */\
  OP(MEAN, "mean", 1, IRK_REDUCE, DR_NA, 1, NONE)                                     \
  OP(PROD, "prod", 1, IRK_REDUCE, DR_NA, 1, NONE)                                     \
  OP(AMAX, "amax", 1, IRK_REDUCE, DR_NA, 1, NONE)                                     \
  OP(AMIN, "amin", 1, IRK_REDUCE, DR_NA, 1, NONE)                                     \
  OP(ARGMAX, "argmax", 1, IRK_REDUCE, DR_NA, 1, NONE) /* result i64; no attrs: over   \
                                     the flattened input, first index of the          \
                                     extreme, NaN wins */                             \
  OP(ARGMIN, "argmin", 1, IRK_REDUCE, DR_NA, 1, NONE)                                 \
  /* scans: attrs[0] = the scanned dim (normalized); the result has the operand's   \
   * shape and dtype (sema casts first: integers and bool to i64); each element is    \
   * the running sum / product / log(sum(exp)) up to it along the dim, accumulated   \
   * as PyTorch's CPU kernels do (f64 for f32 and f64, f32 for f16/bf16, i64) */     \
  OP(CUMSUM, "cumsum", 1, IRK_SCAN, DR_NA, 1, NONE)                                   \
  OP(CUMPROD, "cumprod", 1, IRK_SCAN, DR_NA, 1, NONE)                                 \
  OP(LOGCUMSUMEXP, "logcumsumexp", 1, IRK_SCAN, DR_NA, 8, NONE) /* floats only;      \
                                     the step is logaddexp(x, acc) */                 \
  /* normalizations */                                                                \
  OP(SOFTMAX, "softmax", 1, IRK_NORM, DR_NA, 1, NONE) /* attrs[0]: dim */             \
  OP(LOG_SOFTMAX, "log_softmax", 1, IRK_NORM, DR_NA, 1, NONE)                         \
  OP(LAYER_NORM, "layer_norm", -1, IRK_NORM, DR_NA, 1, NONE) /* x [, weight]         \
                                     [, bias]: attrs[0] = number of normalized        \
                                     trailing dims; fattr[0] = eps; IRF_WEIGHT,       \
                                     IRF_BIAS */                                      \
  /* linear algebra, convolution, pooling */                                          \
  OP(MATMUL, "matmul", 2, IRK_MATMUL, DR_NA, 1, NONE) /* [B...,M,K] x [B...,K,N],     \
                                     equal batch shapes (sema expands and unsqueezes  \
                                     1-D operands) */                                 \
  OP(CONV2D, "conv2d", -1, IRK_CONV, DR_NA, 1, NONE)  /* x, w [, bias]: attrs =       \
                                     stride h,w, padding h,w, dilation h,w, groups;   \
                                     IRF_BIAS */                                      \
  OP(MAX_POOL2D, "max_pool2d", 1, IRK_POOL, DR_NA, 1, NONE) /* attrs = kernel h,w,   \
                                     stride h,w, padding h,w */                       \
  OP(AVG_POOL2D, "avg_pool2d", 1, IRK_POOL, DR_NA, 1, NONE) /* same;                 \
                                     count_include_pad */                             \
  OP(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", 1, IRK_POOL, DR_NA, 1, NONE)         \
                                  /* output size is the result's H, W */              \
  /* indexing by tensors (x, index; the index i64 or i32): attrs[0] = dim d of x;    \
   * IRF_WRAP: a negative index counts from the end (advanced indexing);             \
   * IRF_INBOUNDS: sema built the index and knows it in range (flip, decompositions), \
   * no run-time check; else an index out of range is TDSL_E_INDEX */                 \
  OP(INDEX, "index", 2, IRK_INDEX, DR_NA, 1, NONE)    /* index_select, x[idx]:        \
                                     shape x[:d] + index.shape + x[d+1:] */           \
  OP(GATHER, "gather", 2, IRK_INDEX, DR_NA, 1, NONE)  /* gather, take_along_dim:      \
                                     index's shape, same rank as x; out[i] =          \
                                     x[i with dim d replaced by index[i]] */          \
  /* joining (frontend/sema_join.c) */                                                \
  OP(CAT, "cat", -1, IRK_JOIN, DR_NA, 1, NONE)        /* operands (>= 1) joined      \
                                     along attrs[0] = dim: each has the result's      \
                                     dtype and rank and its sizes but along dim,      \
                                     where their sizes add up to the result's;        \
                                     lowered to one nest per operand storing its      \
                                     slice (loops/lower.c) */
/* clang-format on */

typedef enum Op {
#define OP(e, n, a, k, r, c, m) OP_##e,
  OP_LIST(OP)
#undef OP
  OP_COUNT
} Op;

typedef enum OpKind {
  IRK_SOURCE,
  IRK_VIEW,
  IRK_COPY,
  IRK_UNARY,
  IRK_BINARY,
  IRK_COMPARE,
  IRK_TERNARY,
  IRK_REDUCE,
  IRK_SCAN,
  IRK_NORM,
  IRK_MATMUL,
  IRK_CONV,
  IRK_POOL,
  IRK_INDEX,
  IRK_JOIN
} OpKind;

/* How an elementwise op's dtypes follow from its input dtype (the
 * operand's; for binary ops the promoted dtype of both, PyTorch's
 * result_type). */
typedef enum OpDtype {
  DR_NA,         /* not elementwise, or the handler decides (where) */
  DR_ANY,        /* every dtype, bool included; result = input */
  DR_KEEP,       /* result = input; bool is an error */
  DR_FLOAT,      /* integers and bool compute in f32 (the default float
                    dtype) and give f32: "integers compute in f32" */
  DR_FLOAT_ONLY, /* floating-point inputs only */
  DR_TO_BOOL,    /* every dtype, computed in the input dtype; bool result */
  DR_BITS        /* bool and integers only */
} OpDtype;

const char *op_name(Op op);
Op op_from_name(const char *name); /* OP_COUNT if unknown */
int op_nargs(Op op);               /* -1: variable */
OpKind op_kind(Op op);
OpDtype op_dtype_rule(Op op);
int op_cost(Op op);
static inline int op_is_elementwise(Op op) {
  OpKind k = op_kind(op);
  return k == IRK_UNARY || k == IRK_BINARY || k == IRK_COMPARE ||
         k == IRK_TERNARY;
}

#endif
