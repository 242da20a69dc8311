"""ctypes bindings of libtopk's C API (include/topk/topk.h), the library's
discovery, and the error type.

Nothing here imports torch or touches a GPU; libtopk is loaded on first use,
not at import.
"""
import ctypes
import ctypes.util
import enum
import glob
import operator
import os
import threading

__all__ = ["Code", "TopkError", "InvalidArgumentError", "ArgumentTypeError", "library_path", "capi"]


class Code(enum.IntEnum):
    """Status codes, the same numbers as topk_code in topk.h."""

    OK = 0
    INVALID_ARGUMENT = 1
    NOT_FOUND = 2
    OUT_OF_RANGE = 3
    FAILED_PRECONDITION = 4
    UNAVAILABLE = 5
    RESOURCE_EXHAUSTED = 6
    DATA_LOSS = 7
    COMPILE_ERROR = 8
    CUDA_ERROR = 9
    WRONG_RESULT = 10
    CRASH = 11
    TIMEOUT = 12
    INTERNAL = 13
    UNIMPLEMENTED = 14


class TopkError(RuntimeError):
    """A failed topk-tune call.

    ``code`` is a :class:`Code` (an int), ``code_name`` its lowercase name
    ("invalid_argument", ...) and ``message`` the library's message, which
    for errors from the C API reads "code_name: where: what".
    """

    def __init__(self, code, message):
        try:
            code = Code(int(code))
        except ValueError:
            code = int(code)
        self.code = code
        self.code_name = code.name.lower() if isinstance(code, Code) else "unknown"
        self.message = str(message)
        super().__init__(self.message)

    def __reduce__(self):
        return (type(self), (int(self.code), self.message))


class InvalidArgumentError(TopkError, ValueError):
    """A bad argument value (code INVALID_ARGUMENT): a ValueError as well as
    a TopkError, so both ``except ValueError`` and ``except TopkError``
    catch it. Raised by the Python checks and for INVALID_ARGUMENT from the
    C API."""

    def __init__(self, message, code=Code.INVALID_ARGUMENT):
        super().__init__(code, message)

    def __reduce__(self):
        return (type(self), (self.message,))


class ArgumentOverflowError(InvalidArgumentError, OverflowError):
    """An integer argument outside what the C API takes (e.g. k >= 2^31,
    a batch past 2^63): also an OverflowError, as Python raises for ints too
    large for C."""


class ArgumentTypeError(TopkError, TypeError):
    """An argument of the wrong type (code INVALID_ARGUMENT): a TypeError as
    well as a TopkError, e.g. k=2.7 or k=True."""

    def __init__(self, message, code=Code.INVALID_ARGUMENT):
        super().__init__(code, message)

    def __reduce__(self):
        return (type(self), (self.message,))


def as_flag(value, name, allow_none=False):
    """`value` as a bool: True / False (or a NumPy bool), and None when
    `allow_none`; anything else (1, "yes") raises ArgumentTypeError rather
    than being read by its truthiness."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        return value
    if type(value).__name__ in ("bool_", "bool8"):
        return bool(value)
    raise _type_error(f"{name} must be a bool{' or None' if allow_none else ''}, got {type(value).__name__} {value!r}")


def _invalid(message):
    return InvalidArgumentError("invalid_argument: " + message)


def _type_error(message):
    return ArgumentTypeError("invalid_argument: " + message)


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


def as_int(value, name, minimum=None, maximum=INT64_MAX):
    """`value` as a Python int, never truncated or wrapped: ArgumentTypeError
    for anything that is not an integer (floats, bools, strings; objects with
    __index__ such as NumPy integers are fine), InvalidArgumentError below
    `minimum`, ArgumentOverflowError above `maximum` (by default int64, what
    the C API's int64_t parameters hold; ctypes would wrap a larger value)."""
    if isinstance(value, bool) or type(value).__name__ in ("bool_", "bool8"):
        raise _type_error(f"{name} must be an integer, got bool {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise _type_error(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if minimum is not None and v < minimum:
        raise _invalid(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        bound = "2^31" if maximum == INT32_MAX else "2^63" if maximum == INT64_MAX else str(maximum + 1)
        raise ArgumentOverflowError(f"invalid_argument: {name} must be < {bound}, got {v}")
    return v


# --- finding libtopk ------------------------------------------------------------------

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_NAMES = ("libtopk.so.0", "libtopk.so")


def _in_dir(d):
    for name in _NAMES:
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def _candidates(pkg_dir=_PKG_DIR, environ=None):
    """Where libtopk may be, in the order tried: a list of (how, path).

    1. $TOPK_LIBRARY (a file, or a directory holding libtopk.so)
    2. <package>/_lib/ (a copy shipped inside the package)
    3. the library of the install this package came with (_install.py,
       written by `cmake --install`)
    4. a build tree beside the source package: python/../build*/lib, newest first
    5. the system loader's search path (ctypes.util.find_library("topk"))
    """
    env = os.environ if environ is None else environ
    out = []
    explicit = env.get("TOPK_LIBRARY", "")
    if explicit:
        p = _in_dir(explicit) if os.path.isdir(explicit) else explicit
        out.append(("$TOPK_LIBRARY", p or os.path.join(explicit, "libtopk.so")))
        return out  # an explicit choice is never second-guessed
    p = _in_dir(os.path.join(pkg_dir, "_lib"))
    if p:
        out.append(("package _lib", p))
    installed = os.path.join(pkg_dir, "_install.py")
    if os.path.isfile(installed):
        scope = {}
        try:
            with open(installed) as f:
                exec(compile(f.read(), installed, "exec"), scope)  # noqa: S102 (our own file)
            libdir = scope.get("LIBDIR", "")
            libdir = libdir if os.path.isabs(libdir) else os.path.join(pkg_dir, libdir)
            p = _in_dir(os.path.normpath(libdir))
            if p:
                out.append(("install", p))
        except (OSError, SyntaxError):
            pass
    builds = []
    for d in glob.glob(os.path.join(pkg_dir, "..", "..", "build*", "lib")):
        p = _in_dir(d)
        if p:
            builds.append(p)
    builds.sort(key=lambda q: os.path.getmtime(q), reverse=True)
    out.extend(("build tree", os.path.normpath(p)) for p in builds)
    found = ctypes.util.find_library("topk")
    if found:
        out.append(("system", found))
    return out


def library_path():
    """The libtopk that this package uses (or would load), as a path or a
    name for the loader. Raises TopkError(NOT_FOUND) when there is none."""
    with _lock:
        if _state.path is not None:
            return _state.path
    c = _candidates()
    if not c:
        raise TopkError(Code.NOT_FOUND,
                        "not_found: libtopk.so not found: set TOPK_LIBRARY to its path, build the project "
                        "(python/../build/lib), or install it where the loader finds it")
    return c[0][1]


# --- the C API ---------------------------------------------------------------------------


class Options(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int),
        ("cache_path", ctypes.c_char_p),
        ("allow_same_arch", ctypes.c_int),
        ("write_back", ctypes.c_int),
        ("programmatic_launch", ctypes.c_int),
    ]


class Problem(ctypes.Structure):
    _fields_ = [
        ("dtype", ctypes.c_int),
        ("batch", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("row_stride", ctypes.c_int64),
        ("largest", ctypes.c_int),
        ("ranges", ctypes.c_int),
        ("values", ctypes.c_int),
        ("sorted", ctypes.c_int),
        ("deterministic", ctypes.c_int),  # last, as in topk.h
    ]


_vp = ctypes.c_void_p
_err = ctypes.POINTER(ctypes.c_void_p)
_SIGNATURES = {
    # name: (restype, argtypes)
    "topk_options_init": (None, [ctypes.POINTER(Options)]),
    "topk_problem_init": (None, [ctypes.POINTER(Problem)]),
    "topk_library_open": (ctypes.c_int, [ctypes.POINTER(Options), ctypes.POINTER(_vp), _err]),
    "topk_library_close": (None, [_vp]),
    "topk_library_warnings": (ctypes.c_char_p, [_vp]),
    "topk_library_device": (ctypes.c_char_p, [_vp]),
    "topk_plan_create": (ctypes.c_int, [_vp, ctypes.POINTER(Problem), ctypes.POINTER(_vp), _err]),
    "topk_plan_destroy": (None, [_vp]),
    "topk_plan_run": (ctypes.c_int, [_vp, _vp, _vp, _vp, _vp, ctypes.c_int64, _vp, _err]),
    "topk_plan_run_workspace": (ctypes.c_int, [_vp, _vp, _vp, _vp, _vp, ctypes.c_int64, _vp, _vp, _err]),
    "topk_plan_dispatch": (ctypes.c_int, [_vp]),
    "topk_plan_variant": (ctypes.c_char_p, [_vp]),
    "topk_plan_tuned_shape": (ctypes.c_char_p, [_vp]),
    "topk_plan_tuned_median_us": (ctypes.c_double, [_vp]),
    "topk_plan_binary_from_cache": (ctypes.c_int, [_vp]),
    "topk_plan_ms": (ctypes.c_double, [_vp]),
    "topk_plan_workspace_bytes": (ctypes.c_size_t, [_vp]),
    "topk_code_name": (ctypes.c_char_p, [ctypes.c_int]),
    # Returns malloc'd memory: keep it a void* so that it can be freed.
    "topk_default_cache_path": (_vp, []),
    "topk_free": (None, [_vp]),
}


class _State:
    path = None
    dll = None


_state = _State()
_lock = threading.Lock()


def capi():
    """The loaded libtopk (a ctypes.CDLL with typed functions). Loads it on
    first use; TopkError(NOT_FOUND / UNAVAILABLE) when that fails."""
    dll = _state.dll
    if dll is not None:
        return dll
    with _lock:
        if _state.dll is not None:
            return _state.dll
        cands = _candidates()
        if not cands:
            raise TopkError(Code.NOT_FOUND,
                            "not_found: libtopk.so not found: set TOPK_LIBRARY to its path, build the project "
                            "(python/../build/lib), or install it where the loader finds it")
        errors = []
        for how, path in cands:
            if how == "$TOPK_LIBRARY" and not os.path.exists(path):
                raise TopkError(Code.NOT_FOUND, f"not_found: TOPK_LIBRARY={os.environ.get('TOPK_LIBRARY')}: "
                                                f"no such file ({path})")
            try:
                dll = ctypes.CDLL(path)
            except OSError as e:
                errors.append(f"{how} {path}: {e}")
                if how == "$TOPK_LIBRARY":
                    break
                continue
            missing = [n for n in _SIGNATURES if not hasattr(dll, n)]
            if missing:
                errors.append(f"{how} {path}: not a topk library (lacks {', '.join(missing)})")
                continue
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(dll, name)
                fn.restype = res
                fn.argtypes = args
            _state.path = path
            _state.dll = dll
            return dll
        raise TopkError(Code.UNAVAILABLE, "unavailable: could not load libtopk: " + "; ".join(errors))


def check(code, err):
    """Raises TopkError for a non-zero code, with the message in `err` (a
    c_void_p the C API filled), which it frees."""
    if code == 0:
        return
    msg = None
    if err.value:
        try:
            msg = ctypes.string_at(err.value).decode("utf-8", "replace")
        finally:
            capi().topk_free(err)
            err.value = None
    if not msg:
        msg = code_name(code)
    if code == Code.INVALID_ARGUMENT:
        raise InvalidArgumentError(msg)
    raise TopkError(code, msg)


def code_name(code):
    """The C API's name of a status code ("ok", "invalid_argument", ...;
    "unknown" outside the range)."""
    return capi().topk_code_name(int(code)).decode()


def default_cache_path():
    """The cache path the topk-tune CLI uses by default: $TOPK_TUNE_DB, else
    $XDG_CACHE_HOME/topk-tune/tuning.db (absolute XDG_CACHE_HOME only), else
    ~/.cache/topk-tune/tuning.db; "" when none is set."""
    dll = capi()
    p = dll.topk_default_cache_path()
    if not p:
        raise TopkError(Code.RESOURCE_EXHAUSTED, "resource_exhausted: topk_default_cache_path returned NULL")
    try:
        return ctypes.string_at(p).decode("utf-8", "surrogateescape")
    finally:
        dll.topk_free(p)
