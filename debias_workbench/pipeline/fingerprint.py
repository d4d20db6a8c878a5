"""Content fingerprints of zarr stores: what a store holds, whatever chunking or codec holds it.

Every store the workflow writes carries `fingerprint.json` (written inside the temporary store
before the atomic rename, so a store that exists has one):

- per array (`train/images`, ...): its shape, dtype, the number of chunk files on disk, and a
  SHA-256 over its path, dtype and shape followed by its *decoded* values in row order, taken in
  blocks of `BLOCK_ROWS` rows (a fixed count, not the array's chunks), each block's own digest
  kept so that `verify` names the first rows that changed;
- for the store: a SHA-256 over its arrays' paths and digests in sorted order and over its
  groups' attributes (classes, variant, ...; not `provenance`, which names the code version and
  would make every commit's store differ), the figure two researchers compare instead of
  shipping stores.

`check_store` is the cheap check training and evaluation run before reading (shapes and chunk
files against the fingerprint; zarr reads a missing chunk as fill value without complaint);
`verify` recomputes every digest (`workbench verify STORE`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from debias_workbench.core.errors import StoreError

FILE = "fingerprint.json"
#: rows per digest block: fixed, so the digests do not depend on how the store was chunked
BLOCK_ROWS = 1024


def _nodes(store: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, zarr.json metadata) of every group and array of a local store, in path order. Read
    from the folder tree rather than zarr's member listing, which warns about every file that is
    not a zarr node (this fingerprint, Snakemake's timestamp)."""
    for folder, dirs, files in os.walk(store):
        dirs[:] = sorted(d for d in dirs if d != "c")  # "c": an array's chunks
        if "zarr.json" in files:
            rel = Path(folder).relative_to(store).as_posix()
            yield ("" if rel == "." else rel), json.loads((Path(folder) / "zarr.json").read_text())


def _arrays(store: Path) -> Iterator[tuple[str, zarr.Array]]:
    """(path, array) of every array in the store, in path order."""
    group = zarr.open_group(str(store), mode="r")
    for path, meta in _nodes(store):
        if meta.get("node_type") == "array":
            yield path, group[path]


def _block_bytes(values: np.ndarray) -> bytes:
    """The decoded values of rows as bytes: numbers little-endian in C order; strings as
    length-prefixed UTF-8 (zarr's string dtype has no fixed width)."""
    if values.dtype.kind in "OTU":
        parts = [str(v).encode() for v in values.reshape(-1)]
        return b"".join(len(p).to_bytes(8, "little") + p for p in parts)
    return np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes()


def _dtype_name(array: zarr.Array) -> str:
    return "str" if array.dtype.kind in "OTU" else np.dtype(array.dtype).newbyteorder("<").str


def chunk_files(store: Path, path: str) -> int:
    """Chunk (or shard) files of one array on disk."""
    root = Path(store) / path / "c"
    return sum(len(files) for _, _, files in os.walk(root)) if root.is_dir() else 0


def _rows(array: zarr.Array) -> int:
    return array.shape[0] if array.shape else 1


def block_digest(array: zarr.Array, start: int, rows: int = BLOCK_ROWS) -> str:
    """SHA-256 of the decoded rows start .. start + rows - 1."""
    values = np.asarray(array[start : start + rows] if array.shape else array[...])
    return hashlib.sha256(_block_bytes(values)).hexdigest()


def array_fingerprint(store: Path, path: str, array: zarr.Array) -> dict[str, Any]:
    """{shape, dtype, chunk_files, block_rows, blocks: [hex], digest: hex} of one array."""
    blocks = [block_digest(array, start) for start in range(0, max(_rows(array), 1), BLOCK_ROWS)]
    return {
        "shape": list(array.shape),
        "dtype": _dtype_name(array),
        "chunk_files": chunk_files(store, path),
        "block_rows": BLOCK_ROWS,
        "blocks": blocks,
        "digest": _array_digest(path, array, blocks),
    }


def _array_digest(path: str, array: zarr.Array, blocks: list[str]) -> str:
    whole = hashlib.sha256(f"{path}|{_dtype_name(array)}|{tuple(array.shape)}".encode())
    for block in blocks:
        whole.update(block.encode())
    return whole.hexdigest()


def attrs_digest(store: Path) -> str:
    """SHA-256 over every group's attributes but `provenance`, groups in path order."""
    groups = [
        (path, {k: v for k, v in meta.get("attributes", {}).items() if k != "provenance"})
        for path, meta in _nodes(store)
        if meta.get("node_type") == "group"
    ]
    return hashlib.sha256(json.dumps(groups, sort_keys=True, default=str).encode()).hexdigest()


def store_digest(arrays: dict[str, dict[str, Any]], attrs: str) -> str:
    """SHA-256 over the arrays' paths and digests in sorted order, then the attributes' digest."""
    h = hashlib.sha256()
    for path in sorted(arrays):
        h.update(f"{path}={arrays[path]['digest']}\n".encode())
    h.update(f"@attrs={attrs}\n".encode())
    return h.hexdigest()


def compute(store: Path) -> dict[str, Any]:
    """The fingerprint of the store at `store` (every array read once)."""
    arrays = {path: array_fingerprint(store, path, array) for path, array in _arrays(store)}
    attrs = attrs_digest(store)
    return {"digest": store_digest(arrays, attrs), "attrs": attrs, "arrays": arrays}


def write_fingerprint(store: Path) -> dict[str, Any]:
    """Compute the store's fingerprint and write it as `<store>/fingerprint.json`."""
    fingerprint = compute(store)
    (Path(store) / FILE).write_text(json.dumps(fingerprint, indent=1, sort_keys=True) + "\n")
    return fingerprint


def read_fingerprint(store: Path) -> dict[str, Any]:
    path = Path(store) / FILE
    if not Path(store).is_dir():
        raise StoreError(f"{store} does not exist. {rebuild_hint(store)}")
    if not path.is_file():
        raise StoreError(
            f"{store} has no {FILE}: it was built before stores carried fingerprints, or the file was "
            f"lost. {rebuild_hint(store)}"
        )
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path} is unreadable ({exc}). {rebuild_hint(store)}") from exc


def rebuild_hint(store: Path) -> str:
    return (
        f"Rebuild it: `rm -rf {store} && snakemake --cores all {store}` (the workflow then reruns what was "
        "made from it)."
    )


def check_store(store: Path | str) -> None:
    """The cheap check before a store is read: every array of the fingerprint present with its
    shape and its number of chunk files; raises StoreError naming the store and the rebuild."""
    store = Path(store)
    expected = read_fingerprint(store)["arrays"]
    for path, fp in expected.items():
        meta = store / path / "zarr.json"
        if not meta.is_file():
            raise StoreError(f"{store}: array {path} is missing. {rebuild_hint(store)}")
        shape = json.loads(meta.read_text()).get("shape")
        if list(shape or []) != fp["shape"]:
            raise StoreError(
                f"{store}: array {path} has shape {shape}, its fingerprint {fp['shape']}. {rebuild_hint(store)}"
            )
        found = chunk_files(store, path)
        if found != fp["chunk_files"]:
            raise StoreError(
                f"{store}: array {path} has {found} chunk files, its fingerprint {fp['chunk_files']} "
                f"(a lost or extra chunk reads as wrong values). {rebuild_hint(store)}"
            )


def verify(store: Path) -> list[str]:
    """Every difference between the store and its fingerprint, first bad rows of each array
    named; [] when it holds exactly what was written."""
    store = Path(store)
    expected = read_fingerprint(store)
    found = dict(_arrays(store))
    problems = [f"array {p} is not in the fingerprint" for p in sorted(set(found) - set(expected["arrays"]))]
    for path, fp in sorted(expected["arrays"].items()):
        if path not in found:
            problems.append(f"array {path} is missing")
            continue
        array = found[path]
        if list(array.shape) != fp["shape"] or _dtype_name(array) != fp["dtype"]:
            problems.append(
                f"array {path}: shape {list(array.shape)} {_dtype_name(array)}, fingerprint {fp['shape']} {fp['dtype']}"
            )
            continue
        files = chunk_files(store, path)
        if files != fp["chunk_files"]:
            problems.append(f"array {path}: {files} chunk files, fingerprint {fp['chunk_files']}")
        rows = _rows(array)
        for k, (start, expected_block) in enumerate(zip(range(0, max(rows, 1), fp["block_rows"]), fp["blocks"])):
            try:
                same = block_digest(array, start, fp["block_rows"]) == expected_block
                why = "differ from the fingerprint"
            except Exception as exc:  # a corrupt chunk fails to decode: that is a finding, not a crash
                same, why = False, f"cannot be decoded ({type(exc).__name__}: {exc})"
            if not same:
                problems.append(
                    f"array {path}: rows {start}-{min(start + fp['block_rows'], rows) - 1} {why} "
                    f"(block {k + 1} of {len(fp['blocks'])}; later blocks not checked)"
                )
                break
    if attrs_digest(store) != expected["attrs"]:
        problems.append("the groups' attributes (classes, variant, ...) differ from the fingerprint")
    if not problems and store_digest(expected["arrays"], expected["attrs"]) != expected["digest"]:
        problems.append(f"{FILE}'s store digest does not match its arrays' digests (the file was edited)")
    return problems
