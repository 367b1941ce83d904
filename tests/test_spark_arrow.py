"""The Spark executor's value encoding (`engine.executors.spark.arrow`), without Spark: values
decoded are canonical as the engine's rows are (one NaN object), whatever NaN was encoded, and
-0.0 encodes as 0.0, which it equals."""

from __future__ import annotations

import struct

from engine.canonical import NAN
from engine.executors.spark.arrow import decode, encode


def test_decoded_nans_are_the_one_nan() -> None:
    """Every NaN bit pattern (quiet, negative, signalling, any payload), alone or nested in
    rows, decodes as the engine's one `NAN`; other values decode as they were encoded."""
    nans = [struct.unpack(">d", bytes.fromhex(h))[0] for h in (
        "7ff8000000000000", "fff8000000000000", "7ff0000000000001", "7fffffffffffffff",
        "fff0000000000001")]
    for nan in nans:
        assert decode(encode(nan)) is NAN
        row = decode(encode((1, "G\x7f\xf8", (nan, 2.5))))
        assert row[:2] == (1, "G\x7f\xf8") and row[2][0] is NAN and row[2][1] == 2.5
    for value in [(1, float("inf"), -float("inf"), 0.0, "x"), 42, "Gz", (None, b"G\x7f\xf8")]:
        assert repr(decode(encode(value))) == repr(value)


def test_negative_zero_encodes_as_zero() -> None:
    """-0.0 == 0.0 (joins, groups and cancels with it): the same bytes, alone or nested; bytes
    that only look like a pickled -0.0 (inside a string) change nothing."""
    assert encode(-0.0) == encode(0.0) and repr(decode(encode(-0.0))) == "0.0"
    assert encode((1, (-0.0, "x"))) == encode((1, (0.0, "x")))
    tricky = (-1.5, "G\x80" + "\x00" * 7, b"G\x80" + bytes(7))
    assert repr(decode(encode(tricky))) == repr(tricky)
