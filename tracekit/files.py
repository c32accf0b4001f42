"""Writing files so that a reader never sees a half-written one, and never over an input."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path

from tracekit.errors import InputError

NEW_FILE_MODE = 0o666  # an ordinary file: the kernel applies the process umask when it is created


def _create_beside(path: Path) -> tuple[int, Path]:
    """A new, uniquely named file beside ``path``, open for writing; its mode is the one ``path`` already has,
    else ``NEW_FILE_MODE`` less the umask (applied by ``open`` itself, so the umask is never changed)."""
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = None
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, NEW_FILE_MODE)
        except FileExistsError:
            continue
        if mode is not None:
            os.fchmod(fd, mode)
        return fd, tmp
    raise FileExistsError(f"{path}: no free temporary name beside it")


def write_atomically(path: Path, text: str | bytes) -> None:
    """Replace ``path`` with ``text`` (UTF-8 when a str) so that a reader never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _same(a: Path, b: Path) -> bool:
    """Whether two paths name one file or folder (also through a hard link or a symbolic link)."""
    if a.resolve() == b.resolve():
        return True
    with contextlib.suppress(OSError):
        return os.path.samefile(a, b)
    return False


def check_outputs(inputs: Iterable[Path], outputs: Mapping[str, Path | None]) -> None:
    """Refuse an output (by its option name) that is one of the inputs or lies inside an input folder.

    A command that wrote there would replace a trace with its report, or add files among the rank files
    that the next run reads as input."""
    given = [Path(p) for p in inputs]
    for option, out in outputs.items():
        if out is None:
            continue
        out = Path(out)
        for inp in given:
            if _same(out, inp):
                raise InputError(f"{option} {out}: is an input ({inp}); write the output to another path")
            if inp.is_dir() and inp.resolve() in out.resolve().parents:
                raise InputError(f"{option} {out}: inside the input folder {inp}; write the output outside it")
