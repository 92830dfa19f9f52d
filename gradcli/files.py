"""Writing output files so that no reader ever sees half of one."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager


@contextmanager
def atomic_write(path: str, mode: str = "w"):
    """Yield a file to write; on success it replaces ``path`` (a temporary file in the same folder, then
    ``os.replace``): a reader sees the old file or the complete new one, and nothing is left on failure."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would make the file private
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
