"""The protocol version is the integer 1: JSON's `true` and `1.0` equal 1 in Python, but are not it."""

from __future__ import annotations

import pytest

from exporter import wire

HELLO = {
    "kind": "hello",
    "instance": "i1",
    "pid": 7,
    "pod": "vllm-0",
    "engine": "0",
    "engine_kind": "vllm",
    "engine_version": "0.32.0",
    "backends": {"xgrammar": "0.2.9"},
    "probe_version": "0.1.0",
}


def test_the_integer_version_validates() -> None:
    assert isinstance(wire.validate({"v": wire.VERSION, **HELLO}), wire.Hello)


@pytest.mark.parametrize("version", [True, 1.0, "1", None])
def test_a_version_that_only_equals_1_is_refused(version: object) -> None:
    with pytest.raises(wire.Invalid, match="unsupported protocol version"):
        wire.validate({"v": version, **HELLO})
