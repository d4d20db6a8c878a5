"""Every kind of bad input gets a manifest entry with a reason, or is converted; none is lost."""

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from debias_workbench.core.errors import PipelineError, SkipItem
from debias_workbench.pipeline.annotations import read_voc_boxes, write_voc_xml
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.imageio import load_rgb
from debias_workbench.pipeline.sources import list_source_items

from .standins import IN9_CLASSES


def _photo(size=(40, 30)) -> Image.Image:
    rng = np.random.default_rng(0)
    arr = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    arr[8:22, 10:30] = (250, 20, 20)  # an object
    return Image.fromarray(arr)


def make_bad_folder(root: Path) -> dict[str, str]:
    """A class folder holding one of each bad input; returns {stem: expected outcome}."""
    d = root / "original" / "val" / "00_dog"
    ann = root / "ann" / "val" / "00_dog"
    d.mkdir(parents=True)
    ann.mkdir(parents=True)
    for cls in IN9_CLASSES[1:]:  # every class has its folder (empty here)
        (d.parent / cls).mkdir()
    good = _photo()
    good.save(d / "good.JPEG")
    write_voc_xml(ann / "good.xml", "good.JPEG", 40, 30, "dog", [(10, 8, 30, 22)])
    buf = io.BytesIO()
    good.save(buf, format="JPEG")
    (d / "truncated.JPEG").write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    (d / "corrupt.JPEG").write_bytes(b"\xff\xd8\xff this is not a jpeg")
    good.convert("L").save(d / "gray.JPEG")
    good.convert("CMYK").save(d / "cmyk.JPEG")
    rgba = good.convert("RGBA")
    rgba.putalpha(128)
    rgba.save(d / "alpha.png")
    _photo((6, 5)).save(d / "tiny.JPEG")
    good.save(d / "noxml.JPEG")  # no annotation: fallback box
    good.save(d / "badxml.JPEG")
    (ann / "badxml.xml").write_text("<annotation><object><bndbox><xmin>3</xmin>")
    good.save(d / "outside.JPEG")
    write_voc_xml(ann / "outside.xml", "outside.JPEG", 40, 30, "dog", [(50, 40, 60, 50)])
    (d / "notes.txt").write_text("not an image")
    (d / "dangling.JPEG").symlink_to(root / "nowhere.JPEG")  # a broken link must not vanish silently
    (d / "nested").mkdir()
    good.save(d / "nested" / "inner.JPEG")
    return {"dangling": "broken symbolic link", "nested": "a folder inside a class folder", "good": "ok", "truncated": "cannot decode", "corrupt": "cannot decode", "gray": "ok", "cmyk": "ok",
            "alpha": "ok", "tiny": "smaller than min_image_side", "noxml": "ok", "badxml": "malformed annotation",
            "outside": "no bounding box inside", "notes": "not an image file"}


def test_bad_inputs_are_skipped_with_reasons_or_converted(tmp_path, tiny_ds_cfg):
    expected = make_bad_folder(tmp_path / "src")
    cfg = dict(tiny_ds_cfg)
    cfg["source"] = {"kind": "in9_folder", "in9_folder": {"root": str(tmp_path / "src"),
                                                          "annotations": str(tmp_path / "src" / "ann")}}
    seg = tmp_path / "out" / "segmented.zarr"
    get_family("in9").run_step("segment", cfg, 0, seg, [], 1, None)
    records = {Path(r["path"]).stem: r for r in map(json.loads, (seg.parent / "segmentation_quality.jsonl").open())}
    assert set(records) == set(expected)
    for stem, outcome in expected.items():
        if outcome == "ok":
            assert "skipped" not in records[stem], records[stem]
        else:
            assert outcome in records[stem]["skipped"], records[stem]
    assert records["noxml"]["box_source"] == "fallback" and records["good"]["box_source"] == "xml"
    manifest = json.loads((seg.parent / "segmented.manifest.json").read_text())["val"]
    assert manifest["inputs"] == 13 == manifest["outputs"] + len(manifest["skipped"])
    assert manifest["outputs"] == 5
    out = tmp_path / "out" / "original.zarr"
    get_family("in9").run_step("variant", cfg, 0, out, [seg, seg.parent / "segmented.manifest.json"], 1, "original")
    vm = json.loads((tmp_path / "out" / "original.manifest.json").read_text())["val"]
    assert vm["outputs"] == 5 and len(vm["skipped"]) == 8


def test_mode_conversions(tmp_path):
    img = _photo()
    img.convert("L").save(tmp_path / "g.png")
    rgba = img.convert("RGBA")
    rgba.putalpha(0)
    rgba.save(tmp_path / "transparent.png")
    assert load_rgb(tmp_path / "g.png", 1).shape == (30, 40, 3)
    assert load_rgb(tmp_path / "transparent.png", 1).max() == 0  # fully transparent -> black


def test_boxes_are_clipped_and_rescaled(tmp_path):
    write_voc_xml(tmp_path / "a.xml", "a", 100, 50, "x", [(90, 40, 100, 50), (-5, -5, 10, 10)])
    assert read_voc_boxes(tmp_path / "a.xml", 100, 50) == [(90, 40, 100, 50), (0, 0, 10, 10)]
    assert read_voc_boxes(tmp_path / "a.xml", 50, 25) == [(45, 20, 50, 25), (0, 0, 5, 5)]  # image half the XML's size
    (tmp_path / "b.xml").write_text("<annotation><object><bndbox><xmin>a</xmin><ymin>0</ymin>"
                                    "<xmax>1</xmax><ymax>1</ymax></bndbox></object></annotation>")
    with pytest.raises(SkipItem, match="non-numeric"):
        read_voc_boxes(tmp_path / "b.xml", 10, 10)


def test_unknown_class_folder_and_missing_root_are_clear_errors(tmp_path, tiny_ds_cfg):
    (tmp_path / "99_unicorn").mkdir()
    with pytest.raises(PipelineError, match="99_unicorn"):
        list_source_items({"kind": "in9_folder", "in9_folder": {"root": str(tmp_path)}}, tiny_ds_cfg["classes"])
    shutil.rmtree(tmp_path / "99_unicorn")
    with pytest.raises(PipelineError, match="does not exist"):
        list_source_items({"kind": "in9_folder", "in9_folder": {"root": str(tmp_path / "nope")}}, tiny_ds_cfg["classes"])
