"""Writing result files: all or nothing, never a half-written or lost file.

Only onto a regular file or a new path: a device node, a FIFO or a directory is refused (as root,
a rename over /dev/null would replace the device by a file). Every OSError becomes one line
naming the path."""

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from prfaas_plan.errors import ConfigError, PlanError, ResourceLimitError

# a write that failed for lack of space is a resource limit, not a wrong path
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)` as a writer for `write_atomically`."""
    path.write_text(text)


def check_target(path: Path, parameter: str) -> None:
    """Refuse a target that is not a regular file or a new path in an existing directory (the
    CLI checks its outputs with it before any work; `write_atomically` again when it writes)."""
    directory = path.parent
    if not directory.is_dir():
        raise ConfigError(f"{parameter}: directory {directory} does not exist", parameter=parameter)
    if path.is_dir():
        raise ConfigError(
            f"{parameter}: {path} is a directory, expected a file name", parameter=parameter
        )
    try:
        mode = path.stat().st_mode  # follows a symbolic link to what it names
    except FileNotFoundError:
        return  # a new path (or a dangling link, replaced as a new file)
    except OSError as exc:
        raise write_error(path, exc, parameter) from None
    if not stat.S_ISREG(mode):
        raise ConfigError(
            f"{parameter}: {path} is not a regular file (a device, FIFO or socket); "
            "write the result to a file name",
            parameter=parameter,
        )


def write_error(path: Path | str, exc: OSError, parameter: str) -> PlanError:
    """The one-line error for an OSError writing `path` (lack of space: ResourceLimitError)."""
    reason = exc.strerror or type(exc).__name__
    message = f"{parameter}: cannot write {path}: {reason}"
    if exc.errno in _NO_SPACE:
        return ResourceLimitError(message + "; free space or write elsewhere", parameter=parameter)
    return ConfigError(message, parameter=parameter)


def write_atomically(path: Path, write: Callable[[Path], None], parameter: str) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it over `path`. On any
    failure `path` is left as it was and the temporary file is removed; an OSError (read-only
    directory, full device, ...) becomes a one-line error naming `path`. `parameter` names
    where `path` came from in an error."""
    check_target(path, parameter)
    try:
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    except OSError as exc:
        raise write_error(path, exc, parameter) from None
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
