"""Writing result files: all or nothing, never a half-written or lost file.

Only onto a regular file or a new path: a device node, a FIFO or a directory is refused (as root,
a rename over /dev/null would replace the device by a file), so is an empty name or one ending in
a slash (it names a directory). A symbolic link is written through: its target is replaced
atomically and the link stays a link. Every OSError (a name too long, ...) becomes one line
naming the path."""

import contextlib
import errno
import functools
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from prfaas_plan import plausible
from prfaas_plan.errors import ConfigError, PrfaasPlanError, ResourceLimitError

# a write that failed for lack of space is a resource limit, not a wrong path
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)` as a writer for `write_atomically`."""
    path.write_text(text)


def check_name(text: str, parameter: str) -> Path:
    """The Path a command-line `text` names, refused when it cannot name a file: empty, or
    ending in a slash (a directory; pathlib would drop the slash and write a file)."""
    if not text:
        raise ConfigError(f"{parameter}: the file name is empty", parameter=parameter)
    if text.endswith(("/", os.sep)):
        raise ConfigError(
            f"{parameter}: {shown(text)} ends in a slash (a directory); give a file name",
            parameter=parameter,
        )
    return Path(text)


def shown(path: Path | str) -> str:
    """`path` for a message: as it is, or a short prefix of a very long one."""
    text = str(path)
    return text if len(text) <= 2 * plausible.MAX_QUOTED_CHARS else plausible.quoted(text)


def check_source(path: Path, parameter: str) -> None:
    """Refuse, as one line naming `parameter` and the path, an input path the system cannot
    even look up (a name too long, a loop of links, no permission); a missing file is left to
    its reader, whose message says what it expected there."""
    try:
        path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"{parameter}: cannot read {shown(path)}: {reason}", parameter=parameter
        ) from None


def check_target(path: Path, parameter: str) -> None:
    """Refuse a target that is not a regular file or a new path in an existing directory (the
    CLI checks its outputs with it before any work; `write_atomically` again when it writes).
    A symbolic link is checked as what it names."""
    try:
        _check_target(path, parameter)
    except OSError as exc:  # a name too long, a loop of links, no permission, ...
        raise write_error(path, exc, parameter) from None


def _check_target(path: Path, parameter: str) -> None:
    directory = path.parent
    if not directory.is_dir():
        message = (
            f"{shown(directory)} is not a directory"
            if directory.exists()
            else f"directory {shown(directory)} does not exist"
        )
        raise ConfigError(f"{parameter}: {message}", parameter=parameter)
    if path.is_dir():
        raise ConfigError(
            f"{parameter}: {shown(path)} is a directory, expected a file name", parameter=parameter
        )
    try:
        mode = path.stat().st_mode  # follows a symbolic link to what it names
    except FileNotFoundError:
        if path.is_symlink():  # a dangling link: written through, into its target's directory
            _check_target(Path(os.path.realpath(path)), parameter)
        return  # a new path
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{parameter}: {shown(path)} is not a regular file (a device, FIFO or socket); "
            "write the result to a file name",
            parameter=parameter,
        )


def write_error(path: Path | str, exc: OSError, parameter: str) -> PrfaasPlanError:
    """The one-line error for an OSError writing `path` (lack of space: ResourceLimitError)."""
    reason = exc.strerror or type(exc).__name__
    message = f"{parameter}: cannot write {shown(path)}: {reason}"
    if exc.errno in _NO_SPACE:
        return ResourceLimitError(message + "; free space or write elsewhere", parameter=parameter)
    return ConfigError(message, parameter=parameter)


def write_atomically(path: Path, write: Callable[[Path], None], parameter: str) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it over `path`. On any
    failure `path` is left as it was and the temporary file is removed; an OSError (read-only
    directory, full device, ...) becomes a one-line error naming `path`. `parameter` names
    where `path` came from in an error. A symbolic link `path` is written through: its target
    is replaced, the link kept."""
    check_target(path, parameter)
    named, suffix = path, path.suffix  # the temporary file keeps the suffix asked for (a figure)
    try:
        if path.is_symlink():
            path = Path(os.path.realpath(path))
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    except OSError as exc:
        raise write_error(named, exc, parameter) from None
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # mkstemp's 0600 would surprise whoever reads the result
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc, parameter) from None
    finally:
        with contextlib.suppress(OSError):  # the directory turned unwritable: nothing to do
            tmp.unlink(missing_ok=True)


def rename_no_replace(source: Path, target: Path) -> None:
    """Rename `source` to `target` unless `target` exists (FileExistsError): never over an
    existing file or directory, an empty directory included, which rename(2) would replace.
    Atomic where the system has renameat2's RENAME_NOREPLACE (Linux); elsewhere a check, then
    the rename."""
    renameat2 = _renameat2()
    if renameat2 is not None:
        if (
            renameat2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _NOREPLACE)
            == 0
        ):
            return
        import ctypes

        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):  # else: unsupported here
            raise OSError(code, os.strerror(code), str(target))
    if os.path.lexists(target):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(target))
    os.rename(source, target)


_AT_FDCWD, _NOREPLACE = -100, 1  # <fcntl.h>, <linux/fs.h>


@functools.cache
def _renameat2() -> Callable[..., int] | None:
    """libc's renameat2, if this system has one (loaded on first use: ctypes costs start-up)."""
    import ctypes

    try:
        function: Callable[..., int] = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    return function
