/* conv.h — the CPU backend's convolution kernels besides the implicit
 * GEMM (gemm.h cg_emit_conv2d), emitted into a kernel's LLVM module:
 *   conv_depthwise.c  one input channel per group (loops.h
 *                     LF_CONV_DEPTHWISE), any channel multiplier;
 *   conv_direct.c     one group (LF_CONV_DIRECT), channels-last or NCHW
 *                     output: register-blocked over output channels and
 *                     pixels, no im2col buffer;
 *   conv_1x1.c        a 1x1 conv at stride 1 with an NCHW output
 *                     (LF_CONV_1X1) as a matmul per image through
 *                     cg_emit_matmul (its pool).
 * Each takes the same run-time descriptions as the GEMM (GemmTensor, the
 * seven conv attributes), packs its weights (and bias) once per call in
 * the memory the kernel allocated at entry (GemmEmit.pool, sized by the
 * *_pool_bytes function) and calls the GEMM's epilogue hook
 * (GemmEmit.epi_fn) on each finished block of the output, with bt =
 * image * groups and rows / columns running over every channel (group
 * 0's indices extended: the hook maps channel q of "group 0" to q).
 * Prologues are not taken: lf_conv_algo leaves such nests to the GEMM.
 * The vector width is GemmEmit.vec_bits (the target's), never the host's.
 * Needs: gemm.h.  Used by: gemm_nest.c. */
#ifndef TDSL_CPU_CONV_H
#define TDSL_CPU_CONV_H

#include "gemm.h"

/* Bytes of weight-packing memory (with the 64-byte header the caller
 * fills) of a depthwise conv; *threads as cg_conv2d_pool_bytes. */
LLVMValueRef cg_conv_dw_pool_bytes(const GemmEmit *e, const GemmTensor *w, const GemmTensor *out,
                                   bool channels_last, LLVMValueRef *threads);

/* out = conv2d(x, w, bias) with w [O, 1, KH, KW] (bias NULL when absent),
 * as cg_emit_conv2d; mult: the channel multiplier O / groups where the
 * caller knows it statically (a constant lets the kernel read channel
 * vectors contiguously), else NULL; channels_last: the output's channel stride is 1
 * (vectors over channels), else its column stride is 1 (vectors over
 * output columns).  Returns an i32 0 (it cannot fail). */
LLVMValueRef cg_emit_conv_depthwise(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                    const GemmTensor *bias, const GemmTensor *out,
                                    LLVMValueRef attr[7], LLVMValueRef mult, bool channels_last);

/* The direct kernel's weight-packing memory, as cg_conv_dw_pool_bytes. */
LLVMValueRef cg_conv_direct_pool_bytes(const GemmEmit *e, const GemmTensor *w,
                                       const GemmTensor *out, bool channels_last,
                                       LLVMValueRef *threads);

/* out = conv2d(x, w, bias) with groups = 1, as cg_emit_conv2d:
 * channels_last: the output's channel stride is 1 (any input strides);
 * else the output's and the input's column strides are 1 and the stride
 * along columns is 1.  Returns an i32 0. */
LLVMValueRef cg_emit_conv_direct(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                 const GemmTensor *bias, const GemmTensor *out,
                                 LLVMValueRef attr[7], bool channels_last);

/* The 1x1 conv's packing memory: the matmul's (cg_matmul_pool_bytes). */
LLVMValueRef cg_conv_1x1_pool_bytes(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                                    const GemmTensor *out, LLVMValueRef *threads);

/* out = conv2d(x, w, bias) for a conv lf_conv_algo made LF_CONV_1X1
 * (1x1 weights, stride 1, no padding, one group, an NCHW output, the
 * pixels of x and out one dim each, a bias only for f32/f64 outputs),
 * as cg_emit_conv2d;
 * prologues (GemmEmit.pro) are not taken.  Returns cg_emit_matmul's
 * i32. */
LLVMValueRef cg_emit_conv_1x1(const GemmEmit *e, const GemmTensor *x, const GemmTensor *w,
                              const GemmTensor *bias, const GemmTensor *out);

#endif
