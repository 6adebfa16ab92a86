"""The exceptions tdsl raises."""


class TdslError(Exception):
    """Base of tdsl's errors."""


class CompileError(TdslError):
    """tdslc refused the program or could not run.  `diagnostics` holds
    tdslc's messages (file:line:col: error: ...), `returncode` its exit
    status (1 program errors, 2 usage, 3 internal error; None when tdslc
    did not run)."""

    def __init__(self, message, returncode=None, diagnostics=""):
        super().__init__(message)
        self.returncode = returncode
        self.diagnostics = diagnostics


class KernelError(TdslError):
    """A kernel call failed: `code` is the runtime's negative TDSL_E_*
    code, `name` its name ("TDSL_E_SHAPE"), `message` the runtime's
    message (tdsl_last_error()), `kernel` the kernel's name, `hint` what
to do about it (device errors), or ""."""

    def __init__(self, kernel, code, name, message, hint=""):
        super().__init__("%s: %s%s" % (name, message, " (%s)" % hint if hint else ""))
        self.kernel = kernel
        self.code = code
        self.name = name
        self.message = message
        self.hint = hint


class KernelIndexError(KernelError, IndexError):
    """A kernel call failed with TDSL_E_INDEX: an element of an index
    tensor (index_select, gather, take_along_dim, embedding, x[idx]) was
    out of range; no output was written.  An IndexError, as PyTorch's."""
