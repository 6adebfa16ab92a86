/* ops.h — the op table of the tensor IR.  One row per op:
 *
 *   OP(ENUM, "name", nargs, KIND)
 *
 * nargs is the number of tensor operands (-1: variable, see below).  The
 * meaning of each op's integer attributes (IrValue.attrs) and flags is in
 * the comment beside its row; every op's result geometry (shape, semantic
 * strides, offset) is in the value itself.
 *
 * Conventions that hold for every op:
 *  - Operands of elementwise ops have exactly the result's shape (sema
 *    inserts EXPAND views for broadcasting, flagged IRF_IMPLICIT) and the
 *    op's compute dtype (sema inserts CAST ops); comparisons compute in
 *    their operands' common dtype and give bool.
 *  - View ops (kind IRK_VIEW) produce a value that aliases the storage of
 *    operand 0; their shape/stride/offset are absolute in that storage
 *    (the storage of the first non-view ancestor).
 *  - Every other op produces a fresh dense value whose semantic strides
 *    are PyTorch's.
 *  - Half-precision math is done in f32 and rounded when stored. */
#ifndef TDSL_OPS_H
#define TDSL_OPS_H

#define OP_LIST(OP)                                                            \
  /* sources */                                                                \
  OP(PARAM, "param", 0, IRK_SOURCE)       /* ival: parameter index */          \
  OP(CONST, "const", 0, IRK_SOURCE)       /* 0-dim; fval or ival by dtype;     \
                                             IRF_WRAPPED for literals */       \
  OP(SYMVAL, "symval", 0, IRK_SOURCE)     /* 0-dim i64 wrapped; attrs[0] =     \
                                             the symbolic value */             \
  OP(TENSOR, "tensor", 0, IRK_SOURCE)     /* data: row-major elements */       \
  OP(FULL, "full", 0, IRK_SOURCE)         /* every element fval/ival */        \
  OP(ARANGE, "arange", 0, IRK_SOURCE)     /* fattr[0] start, fattr[1] step     \
                                             (ints exact in doubles up to      \
                                             2^53); length is shape[0] */      \
  /* views */                                                                  \
  OP(VIEW, "view", 1, IRK_VIEW)           /* also reshape-as-view, flatten,    \
                                             unflatten; attrs: new shape */    \
  OP(PERMUTE, "permute", 1, IRK_VIEW)     /* attrs: permutation; also          \
                                             transpose, t, .T, .mT */          \
  OP(EXPAND, "expand", 1, IRK_VIEW)       /* attrs: new shape;                 \
                                             IRF_IMPLICIT for broadcasting */  \
  OP(UNSQUEEZE, "unsqueeze", 1, IRK_VIEW) /* attrs[0]: new dim */              \
  OP(SQUEEZE, "squeeze", 1, IRK_VIEW)     /* attrs: removed dims */            \
  OP(SLICE, "slice", 1, IRK_VIEW)         /* attrs: dim, start, end, step      \
                                             (normalized); also narrow */      \
  OP(SELECT, "select", 1, IRK_VIEW)       /* attrs: dim, index (normalized) */ \
  OP(DIAGONAL, "diagonal", 1, IRK_VIEW)   /* attrs: offset, dim1, dim2 */      \
  OP(UNFOLD, "unfold", 1, IRK_VIEW)       /* attrs: dim, size, step */         \
  OP(AS_STRIDED, "as_strided", 1, IRK_VIEW) /* geometry is the attribute */    \
  /* copies */                                                                 \
  OP(COPY, "copy", 1, IRK_COPY)           /* same shape, strides as this       \
                                             value's; IRF_CL: to channels-last,\
                                             IRF_CLONE: clone() */             \
  OP(RESHAPE, "reshape", 1, IRK_COPY)     /* row-major element order of the    \
                                             operand into this shape */        \
  OP(CAST, "cast", 1, IRK_COPY)           /* dtype conversion, same shape */   \
  /* elementwise unary */                                                      \
  OP(NEG, "neg", 1, IRK_UNARY)                                                 \
  OP(ABS, "abs", 1, IRK_UNARY)                                                 \
  OP(EXP, "exp", 1, IRK_UNARY)                                                 \
  OP(LOG, "log", 1, IRK_UNARY)                                                 \
  OP(LOG1P, "log1p", 1, IRK_UNARY)                                             \
  OP(EXPM1, "expm1", 1, IRK_UNARY)                                             \
  OP(SQRT, "sqrt", 1, IRK_UNARY)                                               \
  OP(RSQRT, "rsqrt", 1, IRK_UNARY)                                             \
  OP(SIN, "sin", 1, IRK_UNARY)                                                 \
  OP(COS, "cos", 1, IRK_UNARY)                                                 \
  OP(TANH, "tanh", 1, IRK_UNARY)                                               \
  OP(SIGMOID, "sigmoid", 1, IRK_UNARY)                                         \
  OP(RELU, "relu", 1, IRK_UNARY)                                               \
  OP(GELU, "gelu", 1, IRK_UNARY)          /* IRF_TANH: approximate="tanh" */   \
  OP(SILU, "silu", 1, IRK_UNARY)                                               \
  OP(ERF, "erf", 1, IRK_UNARY)                                                 \
  OP(FLOOR, "floor", 1, IRK_UNARY)                                             \
  OP(CEIL, "ceil", 1, IRK_UNARY)                                               \
  OP(ROUND, "round", 1, IRK_UNARY)        /* half to even */                   \
  OP(SIGN, "sign", 1, IRK_UNARY)                                               \
  OP(RECIPROCAL, "reciprocal", 1, IRK_UNARY)                                   \
  OP(LOGICAL_NOT, "logical_not", 1, IRK_UNARY) /* result bool */               \
  OP(BITNOT, "bitnot", 1, IRK_UNARY)      /* ~: bool not, integer bitwise */   \
  /* elementwise binary */                                                     \
  OP(ADD, "add", 2, IRK_BINARY)                                                \
  OP(SUB, "sub", 2, IRK_BINARY)                                                \
  OP(MUL, "mul", 2, IRK_BINARY)                                                \
  OP(DIV, "div", 2, IRK_BINARY)           /* true division, float dtypes */    \
  OP(FLOORDIV, "floordiv", 2, IRK_BINARY) /* Python //; int / 0 is an error    \
                                             in PyTorch, 0 here */             \
  OP(MOD, "mod", 2, IRK_BINARY)           /* Python %, sign of divisor */      \
  OP(POW, "pow", 2, IRK_BINARY)                                                \
  OP(MAXIMUM, "maximum", 2, IRK_BINARY)   /* NaN-propagating */                \
  OP(MINIMUM, "minimum", 2, IRK_BINARY)                                        \
  OP(AND, "and", 2, IRK_BINARY)           /* & (bool and integers) */          \
  OP(OR, "or", 2, IRK_BINARY)                                                  \
  OP(XOR, "xor", 2, IRK_BINARY)                                                \
  OP(EQ, "eq", 2, IRK_COMPARE)            /* result bool */                    \
  OP(NE, "ne", 2, IRK_COMPARE)                                                 \
  OP(LT, "lt", 2, IRK_COMPARE)                                                 \
  OP(LE, "le", 2, IRK_COMPARE)                                                 \
  OP(GT, "gt", 2, IRK_COMPARE)                                                 \
  OP(GE, "ge", 2, IRK_COMPARE)                                                 \
  OP(WHERE, "where", 3, IRK_TERNARY)      /* cond (bool), a, b */              \
  /* reductions: attrs = reduced dims, sorted; IRF_KEEPDIM */                  \
  OP(SUM, "sum", 1, IRK_REDUCE)           /* integer inputs cast to i64 */     \
  OP(MEAN, "mean", 1, IRK_REDUCE)                                              \
  OP(PROD, "prod", 1, IRK_REDUCE)                                              \
  OP(AMAX, "amax", 1, IRK_REDUCE)                                              \
  OP(AMIN, "amin", 1, IRK_REDUCE)                                              \
  OP(ARGMAX, "argmax", 1, IRK_REDUCE)     /* result i64; no attrs: over the    \
                                             flattened input, first index of   \
                                             the extreme, NaN wins */          \
  OP(ARGMIN, "argmin", 1, IRK_REDUCE)                                          \
  /* normalizations */                                                         \
  OP(SOFTMAX, "softmax", 1, IRK_NORM)     /* attrs[0]: dim */                  \
  OP(LOG_SOFTMAX, "log_softmax", 1, IRK_NORM)                                  \
  OP(LAYER_NORM, "layer_norm", -1, IRK_NORM) /* x [, weight] [, bias]:         \
                                             attrs[0] = number of normalized   \
                                             trailing dims; fattr[0] = eps;    \
                                             IRF_WEIGHT, IRF_BIAS */           \
  /* linear algebra, convolution, pooling */                                   \
  OP(MATMUL, "matmul", 2, IRK_MATMUL)     /* [B...,M,K] x [B...,K,N], equal    \
                                             batch shapes (sema expands and    \
                                             unsqueezes 1-D operands) */       \
  OP(CONV2D, "conv2d", -1, IRK_CONV)      /* x, w [, bias]: attrs = stride h,w,\
                                             padding h,w, dilation h,w, groups;\
                                             IRF_BIAS */                       \
  OP(MAX_POOL2D, "max_pool2d", 1, IRK_POOL) /* attrs = kernel h,w, stride h,w, \
                                             padding h,w */                    \
  OP(AVG_POOL2D, "avg_pool2d", 1, IRK_POOL) /* same; count_include_pad */      \
  OP(ADAPTIVE_AVG_POOL2D, "adaptive_avg_pool2d", 1, IRK_POOL) /* output size   \
                                             is the result's H, W */

typedef enum Op {
#define OP(e, n, a, k) OP_##e,
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
  IRK_NORM,
  IRK_MATMUL,
  IRK_CONV,
  IRK_POOL
} OpKind;

const char *op_name(Op op);
Op op_from_name(const char *name); /* OP_COUNT if unknown */
int op_nargs(Op op);               /* -1: variable */
OpKind op_kind(Op op);
static inline int op_is_elementwise(Op op) {
  OpKind k = op_kind(op);
  return k == IRK_UNARY || k == IRK_BINARY || k == IRK_COMPARE ||
         k == IRK_TERNARY;
}

#endif
