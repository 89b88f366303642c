"""Writing result files: all or nothing, never a half-written or lost file."""

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from prfaas_plan.errors import ConfigError


def write_text(path: Path, text: str) -> None:
    """`path.write_text(text)` as a writer for `write_atomically`."""
    path.write_text(text)


def write_atomically(path: Path, write: Callable[[Path], None], parameter: str) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it over `path`. On any
    failure `path` is left as it was and the temporary file is removed. `parameter` names
    where `path` came from in an error."""
    directory = path.parent
    if not directory.is_dir():
        raise ConfigError(f"{parameter}: directory {directory} does not exist", parameter=parameter)
    if path.is_dir():
        raise ConfigError(
            f"{parameter}: {path} is a directory, expected a file name", parameter=parameter
        )
    fd, name = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o666 & ~umask)  # mkstemp's 0600 would surprise whoever reads the result
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
