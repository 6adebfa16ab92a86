" Vim syntax file for tdsl tensor programs (docs/language.md).
" Keywords, dtypes, layouts, builtins, numbers, strings, comments and
" operators.  The builtins are the functions and methods frontend/sema.c
" knows; tests/editors/check_editors.py keeps this list in step with it.
" Install: copy syntax/ and ftdetect/ into ~/.vim (or a plugin manager's
" directory), see editors/README.md.

if exists("b:current_syntax")
  finish
endif

syn keyword tdslKeyword     kernel nextgroup=tdslKernelName skipwhite
syn match   tdslKernelName  "\h\w*" contained
syn keyword tdslStatement   return
syn keyword tdslConstant    true false True False None inf nan
syn keyword tdslType        bool i8 u8 i16 i32 i64 f16 bf16 f32 f64
" A match, not a keyword, so that the builtin .contiguous( below wins.
syn match   tdslLayout      "\<\%(contiguous\|channels_last\|strided\)\>"

" Builtin functions and methods, only where they are called (name then
" '('), so a variable named like one is left alone.
syn match   tdslBuiltin     "\<\%(abs\|acos\|acosh\|adaptive_avg_pool2d\|addmm\|all\|amax\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(amin\|any\|arange\|argmax\|argmin\|as_strided\|asin\|asinh\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(atan\|atan2\|atanh\|avg_pool2d\|baddbmm\|batch_norm\|bmm\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(cat\|ceil\|chunk\|clamp\|clone\|concat\|concatenate\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(contiguous\|conv1d\|conv2d\|conv_transpose2d\|copysign\|cos\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(cosh\|count_nonzero\|cumprod\|cumsum\|diagonal\|einsum\|elu\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(embedding\|erf\|exp\|exp2\|expand\|expand_as\|expm1\|flatten\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(flip\|floor\|fmod\|frac\|full\|gather\|gelu\|group_norm\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(hardsigmoid\|hardswish\|hardtanh\|hypot\|index_select\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(interpolate\|isfinite\|isinf\|isnan\|layer_norm\|leaky_relu\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(lerp\|linear\|log\|log10\|log1p\|log2\|log_softmax\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(logaddexp\|logcumsumexp\|logical_not\|logsumexp\|masked_fill\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(matmul\|max_pool2d\|maximum\|mean\|minimum\|mish\|nan_to_num\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(narrow\|neg\|norm\|ones\|pad\|permute\|pow\|prod\|reciprocal\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(relu\|remainder\|repeat\|reshape\|rms_norm\|roll\|round\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(rsqrt\|scaled_dot_product_attention\|select\|sigmoid\|sign\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(silu\|sin\|sinh\|softmax\|softplus\|split\|sqrt\|squeeze\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(stack\|std\|std_mean\|sum\|t\|take_along_dim\|tan\|tanh\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(tensor\|tile\|to\|transpose\|tril\|triu\|trunc\|unbind\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(unflatten\|unfold\|unsqueeze\|var\|var_mean\|view\|where\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(zeros\)\>\ze\s*("
" Layers (frontend/sema_layers.c).

" Keyword arguments: padding=1, dim=-1 (not ==).
syn match   tdslKwarg       "\%([(,]\s*\)\@<=\h\w*\ze\s*=[^=]"

" Numbers: 12, 1_000, 2.5, .5, 1e-3, 3.; anything else that starts like
" a number is an error, as the compiler says.
syn match   tdslNumberError "\<\d[[:alnum:]_.]*"
syn match   tdslNumberError "\.\d[[:alnum:]_.]*"
syn match   tdslNumber      "\<\d\+\%(_\d\+\)*\>"
syn match   tdslFloat       "\<\d\+\%(_\d\+\)*\.\%(\d\+\%(_\d\+\)*\)\=\%([eE][+-]\=\d\+\%(_\d\+\)*\)\=\%([[:alnum:]_.]\)\@!"
syn match   tdslFloat       "\%(\w\)\@<!\.\d\+\%(_\d\+\)*\%([eE][+-]\=\d\+\%(_\d\+\)*\)\=\>"
syn match   tdslFloat       "\<\d\+\%(_\d\+\)*[eE][+-]\=\d\+\%(_\d\+\)*\>"

syn match   tdslOperator    "->\|\.\.\.\|==\|!=\|<=\|>=\|\*\*\|//\|[-+*/%@&|^~<>=]"

syn region  tdslString      start=+"+ end=+"+ end=+$+ oneline
syn region  tdslString      start=+'+ end=+'+ end=+$+ oneline
syn match   tdslComment     "#.*$" contains=tdslTodo
syn keyword tdslTodo        TODO FIXME XXX NOTE contained

hi def link tdslKeyword     Keyword
hi def link tdslStatement   Statement
hi def link tdslKernelName  Function
hi def link tdslConstant    Constant
hi def link tdslType        Type
hi def link tdslLayout      StorageClass
hi def link tdslBuiltin     Function
hi def link tdslKwarg       Identifier
hi def link tdslNumber      Number
hi def link tdslFloat       Float
hi def link tdslNumberError Error
hi def link tdslOperator    Operator
hi def link tdslString      String
hi def link tdslComment     Comment
hi def link tdslTodo        Todo

let b:current_syntax = "tdsl"
