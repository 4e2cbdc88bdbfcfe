"""onceflow.coordinator.partitioning: Java's String.hashCode and Kafka's Utils.abs.

Expected hash codes were computed with jshell (Java 17) on this machine.
"""

from __future__ import annotations

import pytest

from onceflow.coordinator.partitioning import coordinator_partition, java_string_hashcode


@pytest.mark.parametrize(
    ("text", "hashcode"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("my-transactional-id", -959806496),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("\U0001f600", 1772899),  # a surrogate pair: two UTF-16 code units
    ],
)
def test_java_hashcode(text, hashcode) -> None:
    assert java_string_hashcode(text) == hashcode


def test_utils_abs_not_math_abs() -> None:
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 (Math.abs would stay negative), any other
    # value to its absolute value (not a masked sign bit, which gives another partition)
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("my-transactional-id", 50) == abs(-959806496) % 50 == 46
    assert (-959806496 & 0x7FFFFFFF) % 50 != 46


def test_bad_partition_count() -> None:
    with pytest.raises(ValueError):
        coordinator_partition("x", 0)
