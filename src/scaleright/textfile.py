"""The user's files: reading text with one-line errors, checking input and output paths, writing atomically.

Every command reads user files through ``read_text`` / ``check_input_file`` and writes through ``write_atomic``, so
the messages are the same everywhere and tell the truth (a FIFO is not "not found", a directory is a directory), a
killed write never leaves a partial file or destroys the previous one, and an output path that is one of the
command's inputs is refused before anything is computed (``refuse_input_as_output``).
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from scaleright.errors import CatalogFileError, InputError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = [
    "read_text",
    "path_problem",
    "check_input_file",
    "check_output_path",
    "refuse_input_as_output",
    "write_atomic",
    "is_regular_file",
]


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENAMETOOLONG:
        return "file name too long"
    if exc.errno == errno.ELOOP:
        return "too many levels of symbolic links (a symlink loop)"
    if exc.errno == errno.EACCES:
        return "permission denied"
    return exc.strerror or str(exc)


def path_problem(path: Path | str, *, want: str = "file") -> str | None:
    """Why ``path`` cannot be read as a regular file (``want="file"``) or a directory (``want="dir"``), in words; None
    when it can. Never raises: over-long names, symlink loops and permission errors are described, not thrown."""
    p = Path(path)
    if str(path) == "":
        return "empty path"
    try:
        st = p.stat()
    except FileNotFoundError:
        try:
            if p.is_symlink():
                return "broken symbolic link (its target does not exist)"
        except OSError:
            pass
        return "file not found" if want == "file" else "directory not found"
    except OSError as exc:
        return _os_reason(exc)
    except ValueError as exc:  # embedded NUL byte
        return f"not a valid path ({exc})"
    if want == "dir":
        return None if stat.S_ISDIR(st.st_mode) else "not a directory"
    if stat.S_ISDIR(st.st_mode):
        return "is a directory, expected a file"
    if stat.S_ISFIFO(st.st_mode):
        return "is a named pipe (FIFO), expected a regular file"
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
        return "is a device, expected a regular file"
    if stat.S_ISSOCK(st.st_mode):
        return "is a socket, expected a regular file"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    return None


def is_regular_file(path: Path | str) -> bool:
    """``Path.is_file()`` that never raises (a name too long or a symlink loop is simply not a file)."""
    return path_problem(path) is None


def check_input_file(flag: str, path: Path | str) -> Path:
    """``path`` as a ``Path`` when it is a readable regular file; otherwise ``InputError`` naming ``flag``."""
    why = path_problem(path)
    if why is not None:
        raise InputError(f"{flag}={_short(path)}: {why}")
    return Path(path)


def read_text(path: Path | Traversable) -> str:
    """The file's UTF-8 text, or ``CatalogFileError`` naming the file when it is missing, binary or unreadable."""
    if isinstance(path, (Path, str)):
        why = path_problem(path)
        if why is not None:
            raise CatalogFileError(f"{_short(path)}: {why}")
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogFileError(f"{_short(path)}: file not found") from None
    except UnicodeDecodeError as exc:
        raise CatalogFileError(f"{_short(path)}: not a UTF-8 text file (byte {exc.start}: {exc.reason})") from None
    except OSError as exc:
        raise CatalogFileError(f"{_short(path)}: cannot read ({_os_reason(exc)})") from None


def check_output_path(flag: str, path: Path | str) -> Path:
    """Fail early (before any long computation) when ``path`` cannot be a file to write."""
    p = Path(path)
    if str(path) == "":
        raise InputError(f"{flag}: empty path; give a file path")
    try:
        if p.is_dir():
            raise InputError(f"{flag}={_short(p)}: is a directory; give a file path, e.g. {_short(p / 'report.html')}")
        if p.exists() and not p.is_file():
            raise InputError(f"{flag}={_short(p)}: exists and is not a regular file; give another path")
        if not p.parent.is_dir():
            raise InputError(
                f"{flag}={_short(p)}: directory {_short(p.parent)!r} does not exist; create it or give another path"
            )
    except OSError as exc:
        raise InputError(f"{flag}={_short(p)}: {_os_reason(exc)}") from None
    if len(p.name.encode()) > 255:
        raise InputError(f"{flag}={_short(p)}: file name too long (at most 255 bytes)")
    return p


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except (OSError, ValueError):
        return False


def refuse_input_as_output(flag: str, out: Path | str, inputs: Iterable[Path | str | None]) -> None:
    """``InputError`` when the output path ``out`` is one of the command's input files (it would be destroyed)."""
    o = Path(out)
    for i in inputs:
        if i is None or str(i) == "":
            continue
        if _same_file(o, Path(i)):
            raise InputError(f"{flag}={_short(o)}: is one of this command's inputs; give another output path")


def replace_atomically(path: Path, data: bytes, *, prefix: str | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, flushed to disk and renamed over
    ``path`` (an existing file's mode kept, a new one the umask's): a killed write leaves the previous file intact
    and no partial file. Raises ``OSError``; the temporary file never outlives a failure."""
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            try:
                os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
            except OSError:
                pass
        else:
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_atomic(flag: str, path: Path | str, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` atomically (``replace_atomically``), after ``check_output_path``; an OS error
    becomes one line naming ``flag`` and the path."""
    p = check_output_path(flag, path)
    try:
        replace_atomically(p, data.encode("utf-8") if isinstance(data, str) else data)
    except OSError as exc:
        raise InputError(f"{flag}={_short(p)}: cannot write ({_os_reason(exc)})") from None
    return p


def _short(path: object, limit: int = 120) -> str:
    """A path for a message: at most ``limit`` characters (an over-long name is elided in the middle)."""
    s = str(path)
    return s if len(s) <= limit else f"{s[: limit // 2]}…{s[-limit // 2 :]}"
