"""The streamed WADO-RS path's parsing: multipart parts found in place whatever the piece boundaries, the plain
instance header read from bytes as pydicom reads it (else left to pydicom), and slices stacked to the same values
through the integer path as through floats."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.encaps import encapsulate
from pydicom.sequence import Sequence
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian, ImplicitVRLittleEndian, JPEG2000Lossless, generate_uid

from copilot.pacs.errors import PacsError
from copilot.pacs.header import InstanceHeader, scan
from copilot.pacs.multipart import MultipartReader
from copilot.pacs.progressive import SliceStack, _read
from copilot.pacs.writer import SeriesWriter

BOUNDARY = b"b0undary-XYZ"


class Collect:
    """A sink keeping each part's headers and bytes."""

    def __init__(self) -> None:
        self.parts: list[tuple[dict[str, str], bytes]] = []
        self._pieces: list[bytes] = []
        self.kinds: set[type] = set()

    def begin(self, headers: dict[str, str]) -> None:
        self._headers, self._pieces = headers, []

    def data(self, chunk: bytes | memoryview) -> None:
        self.kinds.add(type(chunk))
        self._pieces.append(bytes(chunk))

    def end(self) -> None:
        self.parts.append((self._headers, b"".join(self._pieces)))


def body(parts: list[bytes], lengths: bool = True) -> bytes:
    out = b"preamble text\r\n"
    for part in parts:
        head = b"Content-Type: application/dicom\r\n" + (b"Content-Length: %d\r\n" % len(part) if lengths else b"")
        out += b"--" + BOUNDARY + b"\r\n" + head + b"\r\n" + part + b"\r\n"
    return out + b"--" + BOUNDARY + b"--\r\n"


def feed(data: bytes, cuts: list[int], limit: int = 1 << 20) -> Collect:
    sink = Collect()
    reader = MultipartReader(BOUNDARY, sink, limit, 4096)
    last = 0
    for cut in [*cuts, len(data)]:
        reader.feed(data[last:cut])
        last = cut
    reader.finish()
    return sink


def tricky_parts() -> list[bytes]:
    """Bodies holding near-delimiters (the delimiter less its last byte, CR LF dashes), empty and large ones."""
    rng = random.Random(7)
    near = b"\r\n--" + BOUNDARY[:-1]
    return [
        b"", b"x", near, near + b"Q" + near, b"\r\n", b"\r\n--", bytes(rng.randrange(256) for _ in range(3000)),
        b"\r\n-" * 40 + b"--" + BOUNDARY, b"tail" + b"\r\n--" + BOUNDARY[:5],
    ]  # fmt: skip


@pytest.mark.parametrize("step", [1, 2, 3, 5, len(BOUNDARY) + 3, len(BOUNDARY) + 4, len(BOUNDARY) + 5, 64, 10_000])
def test_parts_are_found_whatever_the_piece_size(step: int) -> None:
    parts = tricky_parts()
    data = body(parts)
    sink = feed(data, list(range(step, len(data), step)))
    assert [p for _, p in sink.parts] == parts
    assert all(h["content-type"] == "application/dicom" for h, _ in sink.parts)


def test_random_cuts_and_bodies_without_lengths() -> None:
    rng = random.Random(3)
    parts = tricky_parts()
    data = body(parts, lengths=False)
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, len(data)), 25))
        assert [p for _, p in feed(data, cuts).parts] == parts


def test_body_pieces_are_views_not_copies() -> None:
    data = body([b"A" * 200_000, b"B" * 70_000])
    sink = feed(data, list(range(65536, len(data), 65536)))
    assert memoryview in sink.kinds
    assert [len(p) for _, p in sink.parts] == [200_000, 70_000]


def test_refusals_stay_named() -> None:
    data = body([b"abc", b"defg"])
    with pytest.raises(PacsError) as cut:
        feed(data[: data.index(b"defg") + 2], [])
    assert cut.value.code == "pacs_truncated" and "instance 2" in cut.value.message
    lying = data.replace(b"Content-Length: 4", b"Content-Length: 9")
    with pytest.raises(PacsError) as wrong:
        feed(lying, [7, 40])
    assert wrong.value.code == "pacs_truncated" and "announced 9" in wrong.value.message
    with pytest.raises(PacsError) as big:
        feed(body([b"z" * 5000]), [100, 2000], limit=4096)
    assert big.value.code == "pacs_part_too_large"
    with pytest.raises(PacsError) as none:
        feed(b"no boundary here" * 400, [])
    assert none.value.code == "pacs_bad_answer"


def instance(syntax: pydicom.uid.UID = ExplicitVRLittleEndian, **changes: object) -> Dataset:
    ds = Dataset()
    ds.preamble = b"\0" * 128
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID, ds.file_meta.TransferSyntaxUID = CTImageStorage, syntax
    ds.SOPClassUID, ds.SOPInstanceUID, ds.SeriesInstanceUID = CTImageStorage, generate_uid(), generate_uid()
    ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID
    item = Dataset()
    item.ReferencedSOPInstanceUID, item.ReferencedSOPClassUID = generate_uid(), CTImageStorage
    ds.ReferencedImageSequence = Sequence([item, item])
    ds.InstanceNumber, ds.Rows, ds.Columns = 7, 6, 5
    ds.PixelSpacing, ds.WindowCenter, ds.WindowWidth = [0.5, 0.25], [40, 50], [400, 500]
    ds.SamplesPerPixel, ds.PhotometricInterpretation = 1, "MONOCHROME2"
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 16, 15, 1
    ds.RescaleIntercept, ds.RescaleSlope = -1024, 1
    ds.PixelData = np.arange(-15, 15, dtype=np.int16).reshape(6, 5).tobytes()
    for name, value in changes.items():
        setattr(ds, name, value)
    return ds


def encoded(ds: Dataset, undefined: bool = False) -> bytes:
    if undefined:
        ds.ReferencedImageSequence.is_undefined_length = True
        for item in ds.ReferencedImageSequence:
            item.is_undefined_length_sequence_item = True
    out = io.BytesIO()
    ds.save_as(out, enforce_file_format=True)
    return out.getvalue()


@pytest.mark.parametrize("syntax", [ExplicitVRLittleEndian, ImplicitVRLittleEndian])
@pytest.mark.parametrize("undefined", [False, True])
def test_header_reads_what_pydicom_reads(syntax: pydicom.uid.UID, undefined: bool) -> None:
    data = encoded(instance(syntax), undefined)
    header, full = scan(data), pydicom.dcmread(io.BytesIO(data))
    assert header is not None and not header.cut_short
    assert (header.SOPInstanceUID, header.SeriesInstanceUID) == (full.SOPInstanceUID, full.SeriesInstanceUID)
    assert (header.InstanceNumber, header.Rows, header.Columns) == (7, 6, 5)
    assert header.PixelSpacing == [0.5, 0.25] and header.WindowCenter == [40.0, 50.0]
    assert (header.RescaleIntercept, header.RescaleSlope) == (-1024.0, 1.0)
    assert np.array_equal(header.raw_pixels(), full.pixel_array)


def test_header_refers_anything_unusual_to_pydicom() -> None:
    assert scan(encoded(instance(BitsStored=12))) is None  # unused high bits: masked by the full decoder
    assert scan(encoded(instance(NumberOfFrames=2))) is None
    assert scan(encoded(instance(SamplesPerPixel=3))) is None
    assert scan(encoded(instance(JPEG2000Lossless, PixelData=encapsulate([b"frame"])))) is None
    assert scan(encoded(instance())[128:]) is None  # no preamble
    data = encoded(instance())
    assert scan(data[:300]) is None  # cut inside the header
    cut = scan(data[:-4])
    assert cut is not None and cut.cut_short


def test_stack_gets_the_values_the_float_path_gives() -> None:
    for slope, intercept in ((1, -1024), (2, -1000), (0.5, 3), (1, 0.25), (1, 40000)):
        data = encoded(instance(RescaleSlope=slope, RescaleIntercept=intercept))
        header = scan(data)
        assert isinstance(header, InstanceHeader)
        values = pydicom.dcmread(io.BytesIO(data)).pixel_array.astype(np.float32) * slope + intercept
        whole = bool(np.all(values == np.round(values))) and values.min() >= -32768 and values.max() <= 32767
        expected = np.round(values).astype(np.int16) if whole else values
        for ds in (header, pydicom.dcmread(io.BytesIO(data))):
            stack = SliceStack(1)
            assert stack.put(0, ds) and stack.volume is not None
            assert stack.volume.dtype == expected.dtype and np.array_equal(stack.volume[0], expected)
            assert stack.window == (-160.0, 240.0) and stack.aspect == 2.0


def test_writer_keeps_checked_parts_over_its_own_leftover(tmp_path: Path) -> None:
    ds = instance()
    data = encoded(ds)
    (tmp_path / f".00001.dcm.part-{os.getpid()}").write_bytes(b"left by an earlier attempt")
    writer = SeriesWriter(tmp_path, str(ds.SeriesInstanceUID))
    seen: list[tuple[int, Path, object]] = []
    writer.on_instance = lambda pos, path, got: seen.append((pos, path, got))
    for part in (data, data):  # the second is the same instance sent again: kept once
        writer.begin({"content-type": "application/dicom"})
        for k in range(0, len(part), 100):
            writer.data(memoryview(part)[k : k + 100])
        writer.end()
    assert writer.count == 1 and [p.name for p in tmp_path.iterdir()] == ["00001.dcm"]
    assert (tmp_path / "00001.dcm").read_bytes() == data
    assert isinstance(seen[0][2], InstanceHeader) and seen[0][2].filename == str(tmp_path / "00001.dcm")
    other = instance()
    writer.begin({"content-type": "application/dicom"})
    writer.data(encoded(other))
    with pytest.raises(PacsError) as wrong:
        writer.end()
    assert wrong.value.code == "pacs_bad_answer" and writer.count == 1


def test_the_first_slice_path_loads_without_pydicom(tmp_path: Path) -> None:
    code = "import sys, copilot.pacs.progressive, copilot.pacs.fetch\nprint('pydicom' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"  # pydicom (a third of a second) loads only for what needs it
    path = tmp_path / "00001.dcm"
    path.write_bytes(encoded(instance()))
    assert isinstance(_read(path), InstanceHeader)  # a cached plain instance, read at a glance
    path.write_bytes(encoded(instance(BitsStored=12)))
    assert isinstance(_read(path), pydicom.Dataset)
