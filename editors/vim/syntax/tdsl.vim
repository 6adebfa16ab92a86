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
syn keyword tdslConstant    true false True False None
syn keyword tdslType        bool i8 u8 i16 i32 i64 f16 bf16 f32 f64
" A match, not a keyword, so that the builtin .contiguous( below wins.
syn match   tdslLayout      "\<\%(contiguous\|channels_last\|strided\)\>"

" Builtin functions and methods, only where they are called (name then
" '('), so a variable named like one is left alone.
syn match   tdslBuiltin     "\<\%(abs\|acos\|acosh\|adaptive_avg_pool2d\|amax\|amin\|arange\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(argmax\|argmin\|as_strided\|asin\|asinh\|atan\|atan2\|atanh\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(avg_pool2d\|ceil\|clamp\|clone\|contiguous\|conv2d\|copysign\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(cos\|cosh\|diagonal\|elu\|erf\|exp\|exp2\|expand\|expand_as\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(expm1\|flatten\|floor\|fmod\|frac\|full\|gelu\|hardsigmoid\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(hardswish\|hardtanh\|hypot\|isfinite\|isinf\|isnan\|layer_norm\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(leaky_relu\|lerp\|log\|log10\|log1p\|log2\|log_softmax\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(logaddexp\|logical_not\|matmul\|max_pool2d\|maximum\|mean\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(minimum\|mish\|nan_to_num\|narrow\|neg\|ones\|permute\|pow\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(prod\|reciprocal\|relu\|remainder\|reshape\|round\|rsqrt\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(select\|sigmoid\|sign\|silu\|sin\|sinh\|softmax\|softplus\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(sqrt\|squeeze\|sum\|t\|tan\|tanh\|tensor\|to\|transpose\|trunc\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(unflatten\|unfold\|unsqueeze\|view\|where\|zeros\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(embedding\|flip\|gather\|index_select\|take_along_dim\)\>\ze\s*("
syn match   tdslBuiltin     "\<\%(conv_transpose2d\|interpolate\|pad\)\>\ze\s*("

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
