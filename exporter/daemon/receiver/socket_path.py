"""Making the probe socket's path usable again, whatever an engine left there.

The socket directory is shared with engine pods: a process in the engines' group could leave a file,
a directory or its own listening socket where the daemon's socket belongs, and the daemon could then
never listen (or probes would talk to someone else). Whatever is there is removed (a file, a socket or
a link: unlinked, never followed; an empty directory: removed; a full one: renamed aside to one fixed
name, which takes one at most). What cannot be cleared is an OSError with the reason,
which the listener turns into its listen error (readiness says it).
"""

from __future__ import annotations

import contextlib
import os
import stat

DISPLACED = ".displaced"  # PATH + this: where a directory left at the socket's path is moved


def clear_socket_path(path: str, expected: tuple[int, int] | None = None) -> str | None:
    """Removes whatever is at `path`; returns what it was ("socket", "file", "directory", ...) when it
    was not our own socket (`expected`: its (dev, ino)), None when there was nothing or only ours.
    Raises OSError when it cannot."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    mode = st.st_mode
    ours = expected is not None and (st.st_dev, st.st_ino) == expected and st.st_uid == os.geteuid()
    if not stat.S_ISDIR(mode):
        os.unlink(path)  # a link is removed, not followed
        if ours:
            return None
        if stat.S_ISSOCK(mode):
            return "socket" if st.st_uid != os.geteuid() else None  # ours from a previous run: stale
        return "symbolic link" if stat.S_ISLNK(mode) else "file"
    try:
        os.rmdir(path)
    except OSError:
        aside = path + DISPLACED
        with contextlib.suppress(FileNotFoundError):  # one place aside: what was there before goes
            if stat.S_ISDIR(os.lstat(aside).st_mode):
                os.rmdir(aside)  # not empty either: an OSError, and the listener says so
            else:
                os.unlink(aside)
        os.rename(path, aside)
    return "directory"
