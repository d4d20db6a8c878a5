"""Files and folders written atomically: a killed run leaves only `*.tmp-<pid>` siblings, so an
existing output is always a finished one."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .errors import PipelineError

#: errors of a write that found no room: disk full, file-size limit (RLIMIT_FSIZE), quota
NO_ROOM = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


class NoRoomError(PipelineError):
    """A write into `final` ran out of room; nothing was left at `final`. The message names the
    path and the fix."""


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a temporary sibling path; move it onto `final` only if the block succeeds. A block
    that runs out of disk (or file-size limit, or quota) raises `NoRoomError` naming `final`."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    _remove(tmp)
    try:
        yield tmp
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, OSError) and exc.errno in NO_ROOM and not isinstance(exc, NoRoomError):
            raise NoRoomError(
                f"no room to write {final} ({os.strerror(exc.errno)}); nothing was kept there: free "
                "space on its filesystem (or raise the limit), or point `results` at a larger one, "
                "then rerun"
            ) from exc
        raise
    _remove(final)
    os.rename(tmp, final)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def write_text_atomic(path: Path, text: str) -> None:
    with atomic_path(Path(path)) as tmp:
        tmp.write_text(text)


def write_json(path: Path, obj: Any) -> None:
    write_text_atomic(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")
