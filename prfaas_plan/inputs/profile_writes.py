"""Imported profile tables written into a data directory in the shipped layout
(profiles/<model>/<kind>/<gpu>-x<gpus>/), all or nothing: a new or empty directory is first
initialised from the shipped data, the tables are staged beside their destination, validated,
and moved in by renames, never over anything; a directory this user may not write, or the
installed package's own, is refused before anything is written.
"""

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from prfaas_plan.errors import ConfigError
from prfaas_plan.inputs.files import rename_no_replace, write_error
from prfaas_plan.inputs.resources import default_data_dir, is_installed_copy

ValidateFn = Callable[[Path], None]  # loads a staged data directory, raising on a broken table


CSV_NAMES = {"prefill": "prefill_latency.csv", "decode": "decode_step.csv"}


def profile_folder(data_dir: Path, model: str, kind: str, gpu: str, gpus: int) -> Path:
    return data_dir / "profiles" / model / kind / f"{gpu}-x{gpus}"


def _initialise(target: Path) -> None:
    """Copy the shipped data (GPUs, profiles, golden expectations) into `target`."""
    shipped = default_data_dir()
    for part in ("gpus", "profiles", "golden"):
        if (shipped / part).is_dir():
            _copy_tree(shipped / part, target / part)


def _copy_tree(source: Path, target: Path) -> None:
    """Copy a folder of data files with this user's default modes, not the source's (the
    installed data may be read-only; the copy is the user's to change)."""
    target.mkdir()
    for entry in sorted(source.iterdir()):
        if entry.is_dir():
            _copy_tree(entry, target / entry.name)
        else:
            shutil.copyfile(entry, target / entry.name)


def needs_initialising(data_dir: Path) -> bool:
    return not data_dir.exists() or (data_dir.is_dir() and not any(data_dir.iterdir()))


def check_data_dir(data_dir: Path) -> None:
    """A ConfigError unless `data_dir` is a data directory (has gpus/) or an empty directory,
    that this user may read and write, and not the installed package's own; or a new path
    whose nearest existing parent this user may write into."""
    if is_installed_copy(data_dir):
        raise ConfigError(
            f"data_dir: {data_dir} is the installed package's data; give a directory of your own "
            "(a new one is initialised from it)",
            parameter="data_dir",
        )
    try:
        _check_data_dir(data_dir)
    except OSError as exc:  # a name too long, a loop of links, ...
        raise write_error(data_dir, exc, "data_dir") from None


def _check_data_dir(data_dir: Path) -> None:
    if not data_dir.exists():
        if data_dir.is_symlink():
            raise ConfigError(
                f"data_dir: {data_dir} is a symbolic link to nothing", parameter="data_dir"
            )
        parent = _nearest_existing(data_dir)
        if not parent.is_dir():
            raise ConfigError(f"data_dir: {parent} is not a directory", parameter="data_dir")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ConfigError(
                f"data_dir: cannot create {data_dir}: {parent} is {_not_writable(parent)}; "
                "give a directory you can write to",
                parameter="data_dir",
            )
        return
    if not data_dir.is_dir():
        raise ConfigError(f"data_dir: {data_dir} is not a directory", parameter="data_dir")
    if not os.access(data_dir, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigError(
            f"data_dir: cannot write into {data_dir}: it is {_not_writable(data_dir)}; give "
            "a directory you can write to",
            parameter="data_dir",
        )
    if not needs_initialising(data_dir) and not (data_dir / "gpus").is_dir():
        raise ConfigError(
            f"data_dir: {data_dir} is not empty and has no gpus/ folder: not a prfaas-plan data "
            "directory (give a new or empty directory to start one from the shipped data)",
            parameter="data_dir",
        )


def _not_writable(folder: Path) -> str:
    info = folder.stat()
    return (
        f"not writable by this user (mode {stat.S_IMODE(info.st_mode):04o}, owner uid "
        f"{info.st_uid})"
    )


def _nearest_existing(path: Path) -> Path:
    """`path`'s nearest ancestor that exists (the root at worst)."""
    for ancestor in path.absolute().parents:
        if ancestor.exists():
            return ancestor
    return Path(path.absolute().anchor)


def write_profiles(
    data_dir: Path,
    model: str,
    gpu: str,
    gpus: int,
    files: dict[str, tuple[str, str]],  # kind -> (csv text, meta text)
    *,
    force: bool,
    validate: ValidateFn,
) -> bool:
    """Write each kind's table and meta.yaml into `data_dir`, all or nothing; a new or empty
    `data_dir` is first initialised from the shipped data. `validate(staged_data_dir)` loads the
    staged tables (raising on a broken one) before anything lands. True if initialised.

    The tree is staged beside its destination and moved in by renames, never over anything:
    a new `data_dir` is built in its nearest existing parent and renamed into place; an empty
    one (kept, with its owner and mode) is filled from a hidden `.import-*` folder inside it,
    gpus/ last; in a data directory each table folder is swapped in, all or none. On any
    failure what was moved is moved back, and an OSError is one line naming `data_dir`."""
    check_data_dir(data_dir)
    initialise = needs_initialising(data_dir)
    base = default_data_dir() if initialise else data_dir
    for kind in files:
        existing = profile_folder(base, model, kind, gpu, gpus)
        if existing.exists() and not force:
            where = (
                "the shipped data, copied into a new data directory"
                if initialise
                else str(existing)
            )
            raise ConfigError(
                f"a {kind} profile for {model} on {gpu}-x{gpus} already exists ({where}); "
                "pass `force` to replace it",
                parameter="force",
            )

    def build(root: Path, copy: Callable[[Path], None]) -> None:
        copy(root)
        for kind, (csv, meta) in files.items():
            folder = profile_folder(root, model, kind, gpu, gpus)
            if folder.exists():
                shutil.rmtree(folder)  # a shipped table copied into the staging tree
            folder.mkdir(parents=True)
            (folder / CSV_NAMES[kind]).write_text(csv)
            (folder / "meta.yaml").write_text(meta)
        validate(root)

    try:
        if not data_dir.exists():
            _create(data_dir, lambda root: build(root, _initialise))
        elif initialise:
            _fill(data_dir, lambda root: build(root, _initialise))
        else:
            staging = Path(tempfile.mkdtemp(dir=data_dir, prefix=".import-"))
            try:
                build(staging, lambda root: _copy_tree(data_dir / "gpus", root / "gpus"))
                _swap_in(
                    [(profile_folder(staging, model, kind, gpu, gpus),
                      profile_folder(data_dir, model, kind, gpu, gpus)) for kind in files]
                )  # fmt: skip
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:  # named by the folder it failed on, unless that is a staging one
        failed = exc.filename if exc.filename and ".import-" not in str(exc.filename) else None
        raise write_error(failed or data_dir, exc, "data_dir") from None
    return initialise


def _default_mode(mode: int) -> int:
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _make_parents(path: Path, created: list[Path]) -> None:
    """Create `path`'s missing parents, outermost first, each added to `created` once made."""
    for folder in reversed([p for p in path.absolute().parents if not p.exists()]):
        folder.mkdir()
        created.append(folder)


def _remove_created(created: list[Path]) -> None:
    for folder in reversed(created):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _create(data_dir: Path, build: Callable[[Path], None]) -> None:
    """A new `data_dir`: built in a hidden folder of its nearest existing parent, which is
    renamed into place (never over a directory that appeared meanwhile), so it appears whole
    or not at all; its missing parents are created, and removed again on failure."""
    parent = _nearest_existing(data_dir)
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{data_dir.name}.import-"))
    created: list[Path] = []
    try:
        build(staging)
        staging.chmod(_default_mode(0o777))  # mkdtemp's 0700 would become data_dir's mode
        _make_parents(data_dir, created)
        rename_no_replace(staging, data_dir)
    except BaseException:
        _remove_created(created)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone once renamed


def _fill(data_dir: Path, build: Callable[[Path], None]) -> None:
    """The empty, existing `data_dir` filled in place (its owner and mode kept): built in a
    hidden folder inside it, whose parts are then moved up, gpus/ last (a directory with gpus/
    is a data directory); on a failure the parts moved are moved back."""
    staging = Path(tempfile.mkdtemp(dir=data_dir, prefix=".import-"))
    moved: list[str] = []
    try:
        build(staging)
        for name in sorted((p.name for p in staging.iterdir()), key=lambda n: n == "gpus"):
            rename_no_replace(staging / name, data_dir / name)
            moved.append(name)
    except BaseException:
        for name in reversed(moved):
            with contextlib.suppress(OSError):
                os.rename(data_dir / name, staging / name)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _swap_in(pairs: Sequence[tuple[Path, Path]]) -> None:
    """Move each staged folder onto its target, an existing target set aside until every move
    is done; all or none: on a failure the folders moved in are removed and the set-aside ones
    put back."""
    done: list[tuple[Path, Path | None, bool]] = []  # target, its old folder, new one landed
    created: list[Path] = []
    try:
        for new, target in pairs:
            try:
                _make_parents(target, created)
                old = None
                if target.exists():
                    old = target.with_name(f".{target.name}.replaced-{os.getpid()}")
                    rename_no_replace(target, old)
                done.append((target, old, False))
                rename_no_replace(new, target)
                done[-1] = (target, old, True)
            except OSError as exc:  # named by the folder it was to replace
                raise OSError(exc.errno, exc.strerror, str(target)) from None
    except BaseException:
        for target, old, landed in reversed(done):
            with contextlib.suppress(OSError):
                if landed:
                    shutil.rmtree(target)
                if old is not None:
                    os.rename(old, target)
        _remove_created(created)
        raise
    for _, old, _ in done:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
