"""The child process that reads the daemon's large probe messages (`message_check.CheckProcess`).

Over its pipes, one at a time: a 4-byte big-endian length and the message in; the same length prefix
and the pickled `Prepared` out. Ends when its input ends (the daemon closed it or died)."""

from __future__ import annotations

import pickle
import sys
from typing import BinaryIO

from exporter.daemon.receiver.message_check import prepare
from exporter.daemon.receiver.schema_check import SpecChecker


def serve(inp: BinaryIO, out: BinaryIO) -> None:
    checker = SpecChecker()  # remembers texts across messages: a reconnecting probe resends them all
    while len(head := inp.read(4)) == 4:
        line = inp.read(int.from_bytes(head, "big"))
        body = pickle.dumps(prepare(line, checker), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(body).to_bytes(4, "big") + body)
        out.flush()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
