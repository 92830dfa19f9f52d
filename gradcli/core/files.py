"""Writing output files so that no reader ever sees half of one, and nothing temporary outlives the run.

Every temporary path (a file to publish, a folder of memory maps) is recorded in :data:`_PENDING`
*before* it is created and forgotten only after it is gone: a signal's KeyboardInterrupt can arrive
between any two bytecodes, and wherever it lands, either the unwinding code or
:func:`discard_pending` (which the command line calls on its way out) knows the path to remove.
"""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager

from gradcli.core.errors import BadInput

#: temporary files and folders that exist (or are about to) and have been neither published nor removed:
#: path -> ("file" | "dir", the process that made it: a forked child inherits the record, not the files)
_PENDING: dict = {}


def output_target(path: str, option: str, inputs=(), inputs_are: str = "one of the files being checked") -> str:
    """The file an output option (``--junit``, ``--out``, ``--save``) replaces: ``path``, or a symlink's
    target (the link itself is kept, as a user who points ``latest.xml`` somewhere expects).

    Raises BadInput for a folder, anything but a regular file (a device, a fifo: ``/dev/null`` must not
    become a file, and a fifo would be swapped for one), a link that leads nowhere (a loop), a place
    whose folder does not exist, and any of ``inputs`` (the files the run reads, compared as files, so
    that a link or a hard link to one is refused too; ``inputs_are`` names them in the message)."""
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise BadInput(f"{option} {path}: is a folder, not a file")
    if os.path.lexists(real) and not os.path.exists(real):  # realpath stops inside a loop of links
        raise BadInput(f"{option} {path}: a symlink that leads nowhere (a loop)")
    if os.path.exists(real) and not stat.S_ISREG(os.stat(real).st_mode):
        raise BadInput(f"{option} {path}: not a regular file (refusing to replace it)")
    if not os.path.isdir(os.path.dirname(real)):
        raise BadInput(f"{option} {path}: no such folder {os.path.dirname(real)}")
    if os.path.exists(real):
        for p in inputs:
            try:
                same = os.path.samefile(real, p)
            except OSError:
                same = os.path.realpath(p) == real
            if same:
                raise BadInput(f"{option} {path}: is {inputs_are} (refusing to overwrite it)")
    return real


def _beside(path: str, kind: str, create) -> str:
    """Create a new hidden temporary ``kind`` next to ``path`` with ``create(name)``; the name is
    recorded before it exists (see the module's docstring). Like mkstemp: O_EXCL, retried on a clash."""
    directory = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    for _ in range(100):
        name = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        _PENDING[name] = kind, os.getpid()
        try:
            create(name)
        except FileExistsError:  # someone else's: not ours to remove
            _forget(name)
            continue
        except BaseException:
            _remove(name, kind)  # an interrupt may land after the path was made
            raise
        return name
    raise FileExistsError(f"no free temporary name beside {path}")


def _forget(name: str) -> None:
    _PENDING.pop(name, None)


class PendingFile:
    """A temporary file beside ``path`` (``.file``, open in ``mode``) that becomes ``path`` at
    :meth:`publish` (``os.replace``: a reader sees the old file or the complete new one) or disappears
    at :meth:`discard`. The published file gets the user's normal mode (0666 less the umask), not
    mkstemp's private 0600."""

    def __init__(self, path: str, mode: str = "w", **open_options):
        fds = []
        self.path = path
        # the file is private (0600) while it is being written; publish() gives it the umask's mode
        self.tmp = _beside(path, "file",
                           lambda name: fds.append(os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)))
        if "b" not in mode:
            open_options.setdefault("encoding", "utf-8")
        try:
            self.file = os.fdopen(fds[0], mode, **open_options)
        except BaseException:
            os.close(fds[0])
            _unlink(self.tmp)
            raise

    def publish(self) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.chmod(self.tmp, 0o666 & ~_umask())
            os.replace(self.tmp, self.path)
            _forget(self.tmp)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        try:
            self.file.close()
        except (OSError, AttributeError):  # AttributeError: __init__ failed before the file was open
            pass
        _unlink(self.tmp)


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except OSError:
        pass
    _forget(name)


def pending_directory(path: str) -> str:
    """A new private folder beside ``path`` for scratch files (memory maps) on the way to ``path``;
    remove it with :func:`remove_directory`."""
    return _beside(path, "dir", lambda name: os.mkdir(name, 0o700))


def remove_directory(name: str) -> None:
    import shutil  # here: shutil (with zlib, bz2, lzma) costs every command's start-up 3 ms

    shutil.rmtree(name, ignore_errors=True)
    _forget(name)


def discard_pending() -> None:
    """Remove every temporary file and folder still recorded: what a run that was stopped (a signal,
    a second Ctrl-C during the clean-up of the first) had no chance to remove itself."""
    for name, (kind, pid) in list(_PENDING.items()):
        if pid == os.getpid():
            _remove(name, kind)


def _remove(name: str, kind: str) -> None:
    if kind == "dir":
        remove_directory(name)
    else:
        _unlink(name)


def _umask() -> int:
    mask = os.umask(0)  # the only way to read it is to set it
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str, mode: str = "w"):
    """Yield a file to write; on success it replaces ``path`` (:class:`PendingFile`): a reader sees the
    old file or the complete new one, and nothing is left on failure."""
    pending = PendingFile(path, mode)
    try:
        yield pending.file
    except BaseException:
        pending.discard()
        raise
    pending.publish()
