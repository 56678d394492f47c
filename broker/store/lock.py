"""One process at a time owns a data directory: an exclusive lock on ``halfmq.lock`` in it, held
while the store is open and released by the kernel if the process dies."""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO

from broker.errors import StoreInUse

LOCK_FILE = "halfmq.lock"


def lock_data_dir(data_dir: Path) -> IO[bytes]:
    """Take the directory's lock and return the open lock file (closing it releases the lock);
    raise StoreInUse if another process holds it."""
    handle = (data_dir / LOCK_FILE).open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise StoreInUse(f"{data_dir} is in use by another halfmq process (a running broker?)") from None
    return handle
