"""Reading an HTTP body with a size cap, so a hostile or broken peer cannot exhaust memory."""

from __future__ import annotations

import aiohttp


class BodyTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"body larger than {limit} bytes")
        self.limit = limit


async def read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, or `BodyTooLarge` as soon as it passes `limit` (Content-Length checked first)."""
    if response.content_length is not None and response.content_length > limit:
        raise BodyTooLarge(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge(limit)
        chunks.append(chunk)
    return b"".join(chunks)
