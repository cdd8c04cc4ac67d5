"""Running test code as a user that file permissions bind: as root, for whom chmod changes nothing,
a forked child drops to uid/gid 65534 (nobody) first. Used by the tests of read-only stores,
workspaces and sweep folders; the ``shared_dir`` fixture (tests/conftest.py) is a folder that
child can reach."""

from __future__ import annotations

NOBODY = 65534
#: codecs memlab reads or writes text with, loaded before the child drops its privileges
CODECS = ("utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-32-le", "ascii", "latin-1")


def as_unprivileged(fn, *args) -> tuple[str, object]:
    """Run ``fn(*args)`` in a forked process that file permissions bind: as root (for whom chmod
    changes nothing) the child drops to uid/gid 65534 first. Returns ``("ok", value)`` or
    ``(exception class name, message)``."""
    import multiprocessing as mp
    import os

    def child(queue) -> None:
        if os.geteuid() == 0:
            # nobody cannot read this Python's standard library (under /root here): load the
            # codecs memlab uses now, or the first use after setuid fails ("unknown encoding")
            import codecs

            for name in CODECS:
                codecs.lookup(name)
            try:
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            except PermissionError as exc:   # root without CAP_SETUID (some containers)
                queue.put(("skip", f"cannot drop root privileges: {exc}"))
                return
        try:
            queue.put(("ok", fn(*args)))
        except BaseException as exc:   # reported to the parent, which asserts on it
            queue.put((type(exc).__name__, str(exc)))

    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=child, args=(queue,))
    proc.start()
    out = queue.get(timeout=120)
    proc.join(timeout=60)
    if out[0] == "skip":
        import pytest

        pytest.skip(str(out[1]))
    return out
