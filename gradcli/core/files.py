"""Writing output files so that no reader ever sees half of one."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager


class PendingFile:
    """A temporary file beside ``path`` (``.file``, open in ``mode``) that becomes ``path`` at
    :meth:`publish` (``os.replace``: a reader sees the old file or the complete new one) or disappears
    at :meth:`discard`. The published file gets the user's normal mode (0666 less the umask), not
    mkstemp's private 0600."""

    def __init__(self, path: str, mode: str = "w", **open_options):
        directory = os.path.dirname(os.path.abspath(path))
        fd, self.tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
        self.path = path
        if "b" not in mode:
            open_options.setdefault("encoding", "utf-8")
        try:
            self.file = os.fdopen(fd, mode, **open_options)
        except BaseException:
            os.close(fd)
            os.unlink(self.tmp)
            raise

    def publish(self) -> None:
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            os.chmod(self.tmp, 0o666 & ~_umask())
            os.replace(self.tmp, self.path)
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


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
