"""Store fingerprints: independent of chunking and codec, a flipped byte and a lost chunk found,
and training / evaluation refuse a store that fails the cheap check."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from debias_workbench.core.errors import StoreError
from debias_workbench.cli import main as workbench
from debias_workbench.pipeline.fingerprint import BLOCK_ROWS, FILE, check_store, verify
from debias_workbench.pipeline.store import atomic_store, create_array
from debias_workbench.training.data import ZarrBatches

N = 2 * BLOCK_ROWS + 500  # three digest blocks


def build(path: Path, chunk_rows: int, codec: str, images: np.ndarray | None = None) -> Path:
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (N, 4, 4, 3), dtype=np.uint8) if images is None else images
    with atomic_store(path) as tmp:
        group = zarr.open_group(str(tmp), mode="w")
        group.attrs.update(classes=["a", "b"], provenance={"code_version": str(path)})
        train = group.create_group("train")
        create_array(train, "images", images.shape, np.uint8, chunk_rows, codec=codec)[:] = images
        create_array(train, "labels", (N,), np.int64, chunk_rows)[:] = np.arange(N) % 2
        create_array(train, "bias_labels", (N,), np.int64, chunk_rows)[:] = np.arange(N) % 3
        create_array(train, "ids", (N,), str, chunk_rows)[:] = np.array([f"train/x/{i}" for i in range(N)])
    return path


def digest(store: Path) -> str:
    return json.loads((store / FILE).read_text())["digest"]


def chunk_file(store: Path, array: str, row: int, chunk_rows: int) -> Path:
    """The chunk file holding `row` (images: chunked along rows only, so (k, 0, 0, 0))."""
    path = store / "train" / array / "c" / str(row // chunk_rows)
    return path / "0" / "0" / "0" if array == "images" else path


def test_digest_depends_on_values_not_on_chunking_codec_or_provenance(tmp_path):
    a = build(tmp_path / "a.zarr", 32, "none")
    b = build(tmp_path / "b.zarr", 100, "lz4")
    assert digest(a) == digest(b)
    images = np.random.default_rng(0).integers(0, 256, (N, 4, 4, 3), dtype=np.uint8)
    images[N - 1, 0, 0, 0] ^= 1  # one bit of the last image
    assert digest(build(tmp_path / "c.zarr", 32, "none", images)) != digest(a)
    assert verify(a) == [] and verify(b) == []


def test_a_flipped_byte_is_found_with_its_rows(tmp_path):
    store = build(tmp_path / "s.zarr", 32, "none")
    row = BLOCK_ROWS + 40
    path = chunk_file(store, "images", row, 32)
    data = bytearray(path.read_bytes())
    data[(row % 32) * 48 + 5] ^= 0xFF
    path.write_bytes(bytes(data))
    check_store(store)  # the cheap check sees shapes and files only
    problems = verify(store)
    assert problems == [f"array train/images: rows {BLOCK_ROWS}-{2 * BLOCK_ROWS - 1} differ from the fingerprint "
                        "(block 2 of 3; later blocks not checked)"]


def test_a_corrupt_compressed_chunk_is_a_finding_not_a_crash(tmp_path):
    store = build(tmp_path / "s.zarr", 100, "lz4")
    path = chunk_file(store, "images", 2 * BLOCK_ROWS + 152, 100)  # rows 2200-2299: all in block 3
    path.write_bytes(path.read_bytes()[:20])  # truncated
    (problem,) = verify(store)
    assert problem.startswith(f"array train/images: rows {2 * BLOCK_ROWS}-{N - 1} ")


def test_a_deleted_chunk_is_refused_by_the_cheap_check_and_found_by_verify(tmp_path):
    store = build(tmp_path / "s.zarr", 32, "none")
    chunk_file(store, "labels", 100, 32).unlink()
    with pytest.raises(StoreError, match=r"s\.zarr: array train/labels has \d+ chunk files, its fingerprint \d+ .*"
                                         r"rm -rf .*s\.zarr && snakemake"):
        check_store(store)
    with pytest.raises(StoreError, match="chunk files"):
        ZarrBatches(store, "train", 8, shuffle=False)
    problems = verify(store)
    assert problems[0].startswith("array train/labels: ") and "chunk files" in problems[0]
    assert problems[1] == "array train/labels: rows 0-1023 differ from the fingerprint (block 1 of 3; later blocks not checked)"


def test_a_store_without_fingerprint_or_with_a_changed_shape_is_refused(tmp_path):
    store = build(tmp_path / "s.zarr", 32, "none")
    meta = store / "train" / "labels" / "zarr.json"
    spec = json.loads(meta.read_text())
    spec["shape"] = [N - 1]
    meta.write_text(json.dumps(spec))
    with pytest.raises(StoreError, match=rf"array train/labels has shape \[{N - 1}\], its fingerprint \[{N}\]"):
        check_store(store)
    (store / FILE).unlink()
    with pytest.raises(StoreError, match="has no fingerprint.json"):
        ZarrBatches(store, "train", 8, shuffle=False)


def test_verify_command_exit_codes_and_messages(tmp_path, capsys):
    good = build(tmp_path / "good.zarr", 32, "none")
    bad = build(tmp_path / "bad.zarr", 32, "none")
    chunk_file(bad, "images", 0, 32).unlink()
    assert workbench(["verify", str(good)]) == 0
    assert capsys.readouterr().out == f"{good}: ok, fingerprint {digest(good)[:16]}\n"
    assert workbench(["verify", str(good), str(bad), str(tmp_path / "missing.zarr")]) == 1
    out = capsys.readouterr().out
    assert f"{bad}: BAD\n  array train/images: " in out and "rows 0-1023 differ" in out
    assert f"{tmp_path / 'missing.zarr'} does not exist" in out


def test_training_names_the_bad_store_without_a_traceback(tmp_path):
    store = build(tmp_path / "s.zarr", 32, "none")
    chunk_file(store, "images", 64, 32).unlink()
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"runs": []}))
    proc = subprocess.run([sys.executable, "-m", "debias_workbench", "evaluate", "--config", str(config), "--models",
                           str(tmp_path / "m.pt"), "--stores", f"original={store}", "--out", str(tmp_path / "e.jsonl")],
                          capture_output=True, text=True, cwd=Path(__file__).parents[1])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"error: {store}: array train/images has ")
