"""Files tracekit reads and writes: inputs checked before any read that could block or exhaust memory, and
outputs written so that a reader never sees a half-written one, never over an input, and never in place of
what the path names when that is not a regular file (a FIFO, a device, a folder, a link)."""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tracekit.errors import InputError

NEW_FILE_MODE = 0o666  # an ordinary file: the kernel applies the process umask when it is created
#: Decompressed bytes a compressed input may expand to: MAX_INFLATE_RATIO times its size on disk (the real
#: .json.gz traces of ../shared/traces expand 5-30x), never less than MIN_INFLATE_BYTES, never more than
#: MAX_HELD_BYTES; the environment variable (or ``--max-decompressed``) sets another limit in bytes.
MAX_INFLATE_RATIO = 200
MIN_INFLATE_BYTES = 256 * 2**20
MAX_HELD_BYTES = 32 * 2**30
DECOMPRESS_ENV = "TRACEKIT_MAX_DECOMPRESSED"
SYMLINK_HOPS = 40  # as the kernel's own limit (ELOOP)
_FD_PATH = re.compile(r"^/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)$")
_STD_PATHS = {"/dev/stdout": 1, "/dev/stderr": 2}


#: Characters that change how the text around them displays: bidirectional embeddings, overrides, isolates
#: and marks, line and paragraph separators, zero-width and invisible characters. Renderers show them as
#: escapes (``tracekit.report.text.inert``); deep-dive filters spell them as \\uHHHH.
DISPLAY_CONTROLS = frozenset([0x061C, *range(0x200B, 0x2010), *range(0x2028, 0x202F), *range(0x2060, 0x2065),
                              *range(0x2066, 0x206A), 0xFEFF])


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f" + "".join(map(chr, sorted(DISPLAY_CONTROLS))) + "]")


def is_display_control(ch: str) -> bool:
    return ord(ch) in DISPLAY_CONTROLS


def printable(text: object) -> str:
    """Untrusted text safe to print: control characters (ANSI escapes, newlines) and the display-changing
    characters above become visible escapes (``\\x1b``, ``\\u202e``)."""
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), str(text))


class OutputError(InputError):
    """An output that cannot be written: names the option and the path, and says why."""


def short(text: object, width: int = 120) -> str:
    """Echoed input for a message: cut in the middle to ``width`` characters (a 5,000-character name stays
    one readable line)."""
    text = str(text)
    if len(text) <= width:
        return text
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


# ---- inputs ------------------------------------------------------------------------------------------------


def _kind(mode: int) -> str | None:
    """What a non-regular, non-folder file is, in words; None for a regular file or a folder."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_input_file(path: Path) -> None:
    """Refuse, before anything opens it, an input that is no regular file or folder (a FIFO or socket
    would block the read, a device never ends), a symbolic-link loop, or a file this user cannot read."""
    name = short(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(f"{name}: no such file; check the path") from None
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            raise InputError(f"{name}: symbolic link loop; point the link at the trace file") from None
        if exc.errno == 36:  # ENAMETOOLONG
            raise InputError(f"{name}: file name too long; check the path") from None
        raise InputError(f"{name}: cannot read ({exc.strerror}); check the path and its permissions") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputError(f"{name}: {kind}, not a trace file; give the exported trace file itself")
    if not stat.S_ISDIR(st.st_mode) and not os.access(path, os.R_OK):
        raise InputError(f"{name}: cannot read (permission denied); check its permissions")


def decompressed_limit(compressed_bytes: int) -> int:
    """The most bytes a compressed input of ``compressed_bytes`` may expand to (see MAX_INFLATE_RATIO)."""
    given = os.environ.get(DECOMPRESS_ENV, "").strip()
    if given.isdigit():
        return int(given)
    return min(max(MIN_INFLATE_BYTES, MAX_INFLATE_RATIO * compressed_bytes), MAX_HELD_BYTES)


def check_decompressed(path: Path, held_bytes: int, compressed_bytes: int) -> None:
    """Stop decompressing ``path`` once it holds more than its limit (a decompression bomb), one line."""
    limit = decompressed_limit(compressed_bytes)
    if held_bytes > limit:
        raise InputError(f"{short(path)}: expands to more than {limit:,} bytes from {compressed_bytes:,} "
                         f"(over {MAX_INFLATE_RATIO}x or {MAX_HELD_BYTES // 2**30} GiB: a decompression bomb?); "
                         f"if the trace is real, raise the limit with --max-decompressed BYTES "
                         f"({DECOMPRESS_ENV})")


# ---- outputs -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where an output goes: a regular file ``path`` (replaced atomically; a link keeps pointing at it), or,
    written through, an open descriptor ``fd`` (standard output, ``/dev/fd/N``) or ``/dev/null``."""

    path: Path | None = None
    fd: int | None = None
    through: Path | None = None


def _fd_of(text: str) -> int | None:
    """The descriptor a /dev/fd/N, /proc/self/fd/N, /dev/stdout or /dev/stderr path names (this process's)."""
    if text in _STD_PATHS:
        return _STD_PATHS[text]
    match = _FD_PATH.match(text)
    if match is None or (match.group(1) is not None and int(match.group(1)) != os.getpid()):
        return None
    return int(match.group(2))


def _follow(path: Path, option: str) -> tuple[str | None, int | None]:
    """The path after its symbolic links (the link itself is never replaced), or the descriptor it names."""
    current = os.path.abspath(path)
    for _ in range(SYMLINK_HOPS):
        fd = _fd_of(current)
        if fd is not None:
            return None, fd
        if not os.path.islink(current):
            return current, None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    raise OutputError(f"{option} {short(path)}: symbolic link loop; name a file path")


def _is_null_device(st: os.stat_result) -> bool:
    with contextlib.suppress(OSError):
        null = os.stat(os.devnull)
        return stat.S_ISCHR(st.st_mode) and st.st_rdev == null.st_rdev
    return False


def output_target(path: Path, option: str) -> Target:
    """Where ``option PATH`` writes, or an OutputError (one line) when writing there would destroy what the
    path names or cannot work: a folder, a FIFO, a socket, a device other than /dev/null, a closed
    descriptor, an empty path, a folder this user cannot write into."""
    text = str(path)
    if not text.strip():
        raise OutputError(f"{option} '': empty path; name a file")
    name = f"{option} {short(path)}"
    try:
        resolved, fd = _follow(Path(text), option)
    except OSError as exc:
        raise OutputError(f"{name}: cannot follow the path ({exc.strerror}); name a file path") from None
    if fd is not None:
        try:
            st = os.fstat(fd)
        except OSError:
            raise OutputError(f"{name}: descriptor {fd} is not open; name a file path") from None
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(f"{name}: descriptor {fd} is a folder; name a file path")
        return Target(fd=fd)
    assert resolved is not None
    try:
        st = os.stat(resolved)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{name}: cannot write there ({exc.strerror}); name another path") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{name}: is a folder; name a file path inside it")
    if st is not None and not stat.S_ISREG(st.st_mode):
        if _is_null_device(st):
            return Target(through=Path(resolved))
        for std in (1, 2):  # the terminal or pipe this process already writes to
            with contextlib.suppress(OSError):
                own = os.fstat(std)
                if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
                    return Target(fd=std)
        raise OutputError(f"{name}: {_kind(st.st_mode)}, not a regular file; it is left as it is: name a file "
                          "path (or leave out the option to write to standard output)")
    parent = Path(resolved).parent
    existing = parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise OutputError(f"{name}: {existing} is not a folder; name a path in a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{name}: cannot write in {existing} (permission denied); name a path you can write")
    return Target(path=Path(resolved))


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, uniquely named file beside ``path``, open for writing; its mode is the one ``path`` already has,
    else ``NEW_FILE_MODE`` less the umask (applied by ``open`` itself, so the umask is never changed)."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = None
    for _ in range(100):
        tmp = path.with_name(f".{path.name[:200]}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp
    raise FileExistsError(f"{path}: no free temporary name beside it")


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_new(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(path: Path, text: str | bytes, option: str | None = None) -> None:
    """Replace ``path`` with ``text`` (UTF-8 when a str) so that a reader never sees a half-written file.

    With ``option`` (the command-line option that named the path) the path is checked first
    (``output_target``: a link is followed, never replaced; /dev/null and standard output are written
    through; other special files are refused), and an OSError becomes one OutputError line naming the
    option, the path and the cause. Without it (internal files such as cached reports) OSError propagates."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    if option is None:
        _write_new(Path(path), data)
        return
    target = output_target(Path(path), option)
    with writing(path, option):
        if target.fd is not None:
            _write_fd(target.fd, data)
        elif target.through is not None:
            fd = os.open(target.through, os.O_WRONLY)
            try:
                _write_fd(fd, data)
            finally:
                os.close(fd)
        else:
            assert target.path is not None
            _write_new(target.path, data)


@contextlib.contextmanager
def writing(path: Path | str, option: str) -> Iterator[None]:
    """Turn an OSError raised while writing ``option PATH`` (no space, no permission, a read-only or special
    target) into one OutputError line naming the option, the path and the cause."""
    try:
        yield
    except OSError as exc:
        cause = exc.strerror or type(exc).__name__
        remedy = "free space or name another path" if exc.errno in (28, 122) else "name another path"  # ENOSPC
        raise OutputError(f"{option} {short(path)}: cannot write ({cause}); {remedy}") from None


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file or folder (also through a hard link or a symbolic link)."""
    with contextlib.suppress(OSError, RuntimeError):
        if a.resolve() == b.resolve():
            return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def check_outputs(inputs: Iterable[Path], outputs: Mapping[str, Path | None]) -> None:
    """Refuse an output (by its option name) that is one of the inputs, lies inside an input folder, or is
    the path another output of the same command writes.

    A command that wrote there would replace a trace with its report, add files among the rank files
    that the next run reads as input, or write one output over the other."""
    given = [Path(p) for p in inputs]
    named = [(option, Path(out)) for option, out in outputs.items() if out is not None]
    for option, out in named:
        if not str(out).strip():
            raise OutputError(f"{option} '': empty path; name a file")
        for inp in given:
            if _same(out, inp):
                raise InputError(f"{option} {short(out)}: is an input ({short(inp)}); write the output to "
                                 "another path")
            with contextlib.suppress(OSError, RuntimeError):
                if inp.is_dir() and inp.resolve() in out.resolve().parents:
                    raise InputError(f"{option} {short(out)}: inside the input folder {short(inp)}; write the "
                                     "output outside it")
    for i, (option, out) in enumerate(named):
        for other, path in named[i + 1:]:
            if os.path.abspath(out) == os.path.abspath(path) or _same(out, path):
                raise OutputError(f"{option} {short(out)}: also the path of {other}; give each output its own "
                                  "path")


def check_output_folder(path: Path, option: str) -> None:
    """Refuse a folder option (``--plots``, ``--parquet``, ``--cache-dir``) that names something other than a
    folder, or a place this user cannot create it in."""
    if not str(path).strip():
        raise OutputError(f"{option} '': empty path; name a folder")
    name = f"{option} {short(path)}"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise OutputError(f"{name}: cannot use it ({exc.strerror}); name another folder") from None
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            what = _kind(st.st_mode) or "a file"
            raise OutputError(f"{name}: {what}, not a folder; it is left as it is: name a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise OutputError(f"{name}: cannot write in it (permission denied); name a folder you can write")
        return
    existing = Path(os.path.abspath(path)).parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise OutputError(f"{name}: cannot create it in {short(existing)} (not a writable folder); name another "
                          "folder")


def write_with(path: Path, option: str, produce: Callable[[Path], None]) -> None:
    """Write ``option PATH`` with a writer that only takes a file name (matplotlib's ``savefig``): it writes
    a temporary file beside the target, renamed over it once complete (written through to /dev/null or a
    descriptor, as ``write_atomically``); an OSError is one OutputError line."""
    target = output_target(Path(path), option)
    with writing(path, option):
        if target.path is None:
            with tempfile.TemporaryDirectory(prefix="tracekit-") as tmp:
                scratch = Path(tmp) / Path(path).name
                produce(scratch)
                write_atomically(path, scratch.read_bytes(), option)
            return
        target.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_path = _create_beside(target.path)
        os.close(fd)
        try:
            produce(tmp_path)
            os.replace(tmp_path, target.path)
        except BaseException:
            tmp_path.unlink(missing_ok=True)
            raise
