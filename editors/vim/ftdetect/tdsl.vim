" tdsl tensor programs (docs/language.md)
autocmd BufRead,BufNewFile *.tdsl setfiletype tdsl
