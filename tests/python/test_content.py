# SPDX-License-Identifier: BSD-3-Clause
"""Content keys and attempts as the Python package computes them
(doc/client.md section 7): the same content names the same key in every
process; bad attempts are refused before anything is sent."""
import hashlib

import pytest

import embgw
from embgw.client import _attempt


def test_content_key_is_the_documented_hash():
    want = hashlib.blake2b(b"mm-hash-of-an-image", digest_size=16,
                           person=b"embgw-content").digest()
    assert embgw.content_key("mm-hash-of-an-image") == want
    assert embgw.content_key(b"mm-hash-of-an-image") == want
    assert len(want) == 16


def test_sixteen_bytes_are_a_key_as_they_are():
    key = bytes(range(16))
    assert embgw.content_key(key) == key
    assert embgw.content_key(bytearray(key)) == key


@pytest.mark.parametrize("bad", [None, 5, b"", "", ["x"]])
def test_content_that_is_not_bytes_or_text_is_refused(bad):
    with pytest.raises(TypeError, match="content must be"):
        embgw.content_key(bad)


@pytest.mark.parametrize("bad", [-1, 1 << 32, 1.0, True, "1"])
def test_attempts_out_of_range_are_refused(bad):
    with pytest.raises(ValueError, match="attempt must be"):
        _attempt(bad)


def test_attempts_in_range_pass():
    assert _attempt(0) == 0
    assert _attempt((1 << 32) - 1) == (1 << 32) - 1
