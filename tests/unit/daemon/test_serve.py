"""`serve` in this process: what the daemon's own process does once it has started."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path

from exporter.daemon import config
from exporter.daemon.server import serve


async def test_the_daemon_freezes_what_startup_built_and_tests_do_not(tmp_path: Path) -> None:
    """`gdx serve` passes freeze=True: what startup built is out of the collector's sight (the full
    collections a scrape sets off no longer walk it); a caller that does not ask keeps its collector."""
    cfg = config.load(
        {"web_listen_address": "127.0.0.1:0", "probe_socket": str(tmp_path / "probe.sock")}, environ={}
    )
    for freeze in (False, True):
        ready, stop = asyncio.Event(), asyncio.Event()
        task = asyncio.ensure_future(serve(cfg, ready, stop, freeze=freeze))
        try:
            await asyncio.wait_for(ready.wait(), 30)
            assert (gc.get_freeze_count() > 0) is freeze
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)
            gc.unfreeze()
