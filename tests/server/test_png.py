"""The slice PNG encoder: Pillow decodes the same pixels at every level, the chunks are what
the PNG specification says (parsed by hand in ``tests/server/_helpers.png_chunks``, CRCs
recomputed), bad input is refused naming the argument."""

from __future__ import annotations

import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from parvox.server.png import PNG_LEVELS, STORE_SAVING, encode_png
from tests.server._helpers import png_chunks

RNG = np.random.default_rng(7)

IMAGES = {
    "rgb 1x1": RNG.integers(0, 256, (1, 1, 3), dtype=np.uint8),
    "rgb 13x7 (primes)": RNG.integers(0, 256, (13, 7, 3), dtype=np.uint8),
    "grey 5x11": RNG.integers(0, 256, (5, 11), dtype=np.uint8),
    "grey16 3x17": RNG.integers(0, 65536, (3, 17), dtype=np.uint16),
    "grey 1 column": RNG.integers(0, 256, (9, 1), dtype=np.uint8),
    "noise rgb 300x150 (stored: 3 blocks)": RNG.integers(0, 256, (300, 150, 3), dtype=np.uint8),
    "grey 2x65534 (two whole stored blocks)": RNG.integers(0, 256, (2, 65534), dtype=np.uint8),
    "smooth rgb 64x96": np.stack(
        [*np.meshgrid(np.arange(64), np.arange(96), indexing="ij"), np.zeros((64, 96), int)],
        axis=-1,
    ).astype(np.uint8),
}


@pytest.mark.parametrize("level", list(PNG_LEVELS))
@pytest.mark.parametrize("name", list(IMAGES))
def test_pillow_decodes_the_same_pixels(name, level):
    img = IMAGES[name]
    decoded = Image.open(io.BytesIO(encode_png(img, level)))
    decoded.load()
    np.testing.assert_array_equal(np.asarray(decoded), img)
    assert decoded.size == (img.shape[1], img.shape[0])


@pytest.mark.parametrize("name", list(IMAGES))
def test_chunks_follow_the_specification(name):
    img = IMAGES[name]
    chunks = png_chunks(encode_png(img))
    assert [k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"]
    w, h, depth, colour, comp, filt, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert (w, h) == (img.shape[1], img.shape[0])
    assert depth == 8 * img.dtype.itemsize and colour == (2 if img.ndim == 3 else 0)
    assert (comp, filt, interlace) == (0, 0, 0)
    # undo the filter by hand: every row is type 2 (Up), row 0 against zeros
    raw = np.frombuffer(zlib.decompress(chunks[1][1]), np.uint8).reshape(h, -1)
    assert (raw[:, 0] == 2).all()
    rows = np.cumsum(raw[:, 1:], axis=0, dtype=np.uint64) % 256
    expect = np.ascontiguousarray(img, dtype=img.dtype.newbyteorder(">")).view(np.uint8)
    np.testing.assert_array_equal(rows.astype(np.uint8), expect.reshape(h, -1))


def test_smooth_images_compress_and_higher_levels_are_not_larger():
    img = IMAGES["smooth rgb 64x96"]
    stored, fast, best = (len(encode_png(img, lv)) for lv in (0, 1, 9))
    assert fast < img.nbytes / 4 and best <= fast < stored


@pytest.mark.parametrize(
    "pixels",
    [np.zeros((4, 4), np.float32), np.zeros((4, 4, 4), np.uint8), np.zeros((4, 4, 3), np.uint16),
     np.zeros(4, np.uint8), np.zeros((0, 4), np.uint8)],
    ids=["float", "rgba", "rgb16", "1-d", "empty"],
)
def test_other_images_are_refused(pixels):
    with pytest.raises(ValueError, match="pixels"):
        encode_png(pixels)


@pytest.mark.parametrize("level", [-1, 10, 1.0, True, "1"])
def test_bad_levels_are_refused(level):
    with pytest.raises(ValueError, match="png_level"):
        encode_png(np.zeros((2, 2), np.uint8), level)


def _stored_blocks(idat: bytes) -> list[int] | None:
    """The sizes of the stored deflate blocks of a zlib stream, or None when it compresses."""
    pos, sizes = 2, []
    while True:
        head = idat[pos]
        if head >> 1 & 3:  # BTYPE 01 or 10: compressed
            return None
        size, check = struct.unpack("<HH", idat[pos + 1 : pos + 5])
        assert size ^ check == 0xFFFF
        sizes.append(size)
        pos += 5 + size
        if head & 1:
            assert len(idat) == pos + 4  # the Adler-32 is all that follows
            return sizes


def test_data_that_does_not_compress_is_stored_and_smooth_data_is_compressed():
    """A sample of every 16th row decides: noise is stored (the sample saves < STORE_SAVING),
    smooth rows are compressed at the level asked; level 0 always stores."""
    noise = IMAGES["noise rgb 300x150 (stored: 3 blocks)"]
    smooth = np.repeat(IMAGES["smooth rgb 64x96"], 2, axis=0)  # 128 rows: sampled
    filtered = 300 * (150 * 3 + 1)
    for level in (1, 3, 6):
        idat = png_chunks(encode_png(noise, level))[1][1]
        assert _stored_blocks(idat) == [65535, 65535, filtered - 2 * 65535]
        assert zlib.decompress(idat)[:1] == b"\x02"
        assert _stored_blocks(png_chunks(encode_png(smooth, level))[1][1]) is None
    assert _stored_blocks(png_chunks(encode_png(smooth, 0))[1][1]) == [128 * (96 * 3 + 1)]
    # the two whole blocks of 2 x (65534 + 1) bytes; 31 noisy rows are not sampled
    two = IMAGES["grey 2x65534 (two whole stored blocks)"]
    assert _stored_blocks(png_chunks(encode_png(two, 0))[1][1]) == [65535, 65535]
    unsampled = png_chunks(encode_png(noise[:31], 1))[1][1]
    sampled = png_chunks(encode_png(noise[:32], 1))[1][1]
    assert unsampled[:2] != b"\x78\x01"  # the compressor's own stream (it may store, too)
    assert sampled[:2] == b"\x78\x01" and _stored_blocks(sampled) == [32 * 451]
    # rows that save a few times the threshold are compressed
    rows = RNG.integers(0, 256, (64, 300), dtype=np.uint8)
    rows[:, : int(300 * 5 * STORE_SAVING)] = 0
    assert _stored_blocks(png_chunks(encode_png(rows, 1))[1][1]) is None
