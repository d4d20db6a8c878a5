"""The `imagenet` source (debias_workbench/pipeline/sources/imagenet.py): the IN-1k -> IN-9 mapping file and the
listing of ImageNet train/val wnid folders, on small files written in tmp_path."""

import json

import pytest

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline.sources import list_source_items
from debias_workbench.pipeline.sources.imagenet import list_imagenet, load_in1k_to_in9

from .conftest import CLASSES

#: a hand-made mapping: IN-1k index -> IN-9 label, every other index -1
MAPPED = {3: 0, 7: 0, 10: 1, 500: 4, 999: 8}


def _mapping_file(path, mapping=MAPPED):
    path.write_text(json.dumps({str(i): mapping.get(i, -1) for i in range(1000)}))
    return path


def _wnid(index: int) -> str:
    return f"n{index:08d}"  # sorted order == index order, as ImageNet's wnids


def _imagenet_tree(root, files: dict[tuple[str, int], list[str]]):
    """`root/{train,val}/<wnid>/` for all 1000 classes, with `files[(split, index)]` written in them."""
    for split in ("train", "val"):
        for i in range(1000):
            (root / split / _wnid(i)).mkdir(parents=True)
    for (split, index), names in files.items():
        for name in names:
            (root / split / _wnid(index) / name).write_bytes(b"jpeg stand-in")
    return root


# ---- load_in1k_to_in9 ------------------------------------------------------------------------


def test_a_correct_mapping_file_maps_every_index_as_written(tmp_path):
    """Catches a parser that keeps string keys/values, drops the -1 (unmapped) entries, or
    shifts indices: every index 0..999 maps to exactly the label written for it."""
    mapping = load_in1k_to_in9(_mapping_file(tmp_path / "in_to_in9.json"))
    assert sorted(mapping) == list(range(1000))
    assert all(type(k) is int and type(v) is int for k, v in mapping.items())
    assert {k: v for k, v in mapping.items() if v >= 0} == MAPPED
    assert sum(v == -1 for v in mapping.values()) == 1000 - len(MAPPED)


def test_a_missing_mapping_file_is_a_pipeline_error_naming_it(tmp_path):
    """Catches a bare FileNotFoundError (or a message without the path) for a missing file."""
    missing = tmp_path / "nowhere" / "in_to_in9.json"
    with pytest.raises(PipelineError, match=r"cannot read .*nowhere/in_to_in9\.json.*in_to_in9\.json from the "
                                            r"Background Challenge"):
        load_in1k_to_in9(missing)


def test_a_file_that_is_not_json_is_a_pipeline_error_naming_it(tmp_path):
    """Catches a bare json.JSONDecodeError escaping for a truncated file."""
    bad = tmp_path / "truncated.json"
    bad.write_text('{"0": -1, "1": ')
    with pytest.raises(PipelineError, match=r"truncated\.json"):
        load_in1k_to_in9(bad)


@pytest.mark.parametrize("edit", [
    pytest.param(lambda m: m.pop("999"), id="index-999-missing"),
    pytest.param(lambda m: m.update({"1000": 0}), id="index-1000-extra"),
    pytest.param(lambda m: m.update({"5": 9}), id="label-9"),
    pytest.param(lambda m: m.update({"5": -2}), id="label-minus-2"),
])
def test_an_incomplete_or_out_of_range_mapping_is_a_pipeline_error_naming_it(tmp_path, edit):
    """Catches a check that accepts fewer/more than the 1000 IN-1k indices or labels outside
    -1..8 (which would index past the 9 IN-9 classes later)."""
    raw = {str(i): MAPPED.get(i, -1) for i in range(1000)}
    edit(raw)
    path = tmp_path / "odd_mapping.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(PipelineError, match=r"odd_mapping\.json must map every IN-1k index 0\.\.999"):
        load_in1k_to_in9(path)


@pytest.mark.parametrize("text", ['[0, 1, 2]', '{"zero": 1}', '{"0": null}'], ids=["list", "word-key", "null-label"])
def test_a_malformed_mapping_is_a_pipeline_error_naming_it(tmp_path, text):
    """A well-formed JSON file of the wrong shape must still be the project's error naming the file."""
    path = tmp_path / "malformed_mapping.json"
    path.write_text(text)
    with pytest.raises(PipelineError, match=r"malformed_mapping\.json"):
        load_in1k_to_in9(path)


# ---- list_imagenet -----------------------------------------------------------------------------


def test_listing_keeps_mapped_classes_with_their_in9_labels(tmp_path):
    """Catches labels taken from the wrong index (an unsorted or shifted wnid order), unmapped
    classes (-1) kept, hidden files listed, ids not `<split>/<IN-9 class>/<stem>`, or a split lost."""
    root = _imagenet_tree(tmp_path / "imagenet", {
        ("train", 3): ["a.JPEG", "b.JPEG", ".DS_Store"], ("train", 10): ["c.JPEG"], ("train", 11): ["unmapped.JPEG"],
        ("train", 999): ["z.JPEG"], ("val", 500): ["ILSVRC2012_val_00000001.JPEG"], ("val", 0): ["skip.JPEG"]})
    cfg = {"root": str(root), "mapping": str(_mapping_file(tmp_path / "m.json"))}
    items = list_imagenet(cfg, CLASSES)
    got = {(it.id, it.split, it.label, it.path.name, it.annotation, it.problem) for it in items}
    assert got == {
        ("train/00_dog/a", "train", 0, "a.JPEG", None, None),
        ("train/00_dog/b", "train", 0, "b.JPEG", None, None),
        ("train/01_bird/c", "train", 1, "c.JPEG", None, None),
        ("train/08_fish/z", "train", 8, "z.JPEG", None, None),
        ("val/04_carnivore/ILSVRC2012_val_00000001", "val", 4, "ILSVRC2012_val_00000001.JPEG", None, None),
    }
    assert all(it.path.parent.name == _wnid({0: 3, 1: 10, 4: 500, 8: 999}[it.label]) for it in items)


def test_listing_finds_the_xml_boxes_of_both_layouts(tmp_path):
    """Catches train boxes not looked up under `Annotation/<wnid>/` or val boxes not under
    `val/` (ImageNet's two layouts), or a box given to the wrong image."""
    root = _imagenet_tree(tmp_path / "imagenet", {("train", 7): ["with_box.JPEG", "no_box.JPEG"],
                                                  ("val", 10): ["v1.JPEG", "v2.JPEG"]})
    ann = tmp_path / "Annotation"
    (ann / _wnid(7)).mkdir(parents=True)
    (ann / _wnid(7) / "with_box.xml").write_text("<annotation/>")
    (ann / "val").mkdir()
    (ann / "val" / "v2.xml").write_text("<annotation/>")
    cfg = {"root": str(root), "mapping": str(_mapping_file(tmp_path / "m.json")), "annotations": str(ann)}
    boxes = {it.id: it.annotation for it in list_imagenet(cfg, CLASSES)}
    assert boxes == {"train/00_dog/with_box": ann / _wnid(7) / "with_box.xml", "train/00_dog/no_box": None,
                     "val/01_bird/v1": None, "val/01_bird/v2": ann / "val" / "v2.xml"}


def test_a_folder_inside_a_class_folder_becomes_a_skipped_item(tmp_path):
    """Catches an unreadable entry dropped silently (images in = images out + skipped would break)
    or listed without its problem."""
    root = _imagenet_tree(tmp_path / "imagenet", {("val", 3): ["ok.JPEG"]})
    (root / "val" / _wnid(3) / "nested").mkdir()
    cfg = {"root": str(root), "mapping": str(_mapping_file(tmp_path / "m.json"))}
    problems = {it.id: it.problem for it in list_imagenet(cfg, CLASSES)}
    assert problems["val/00_dog/ok"] is None
    assert "folder inside a class folder" in problems["val/00_dog/nested"]


def test_a_root_without_a_split_or_with_too_few_classes_is_a_pipeline_error_naming_it(tmp_path):
    """Catches a missing val/ listed as empty, or a partial ImageNet (999 wnids) whose labels
    would silently shift by one index."""
    mapping = str(_mapping_file(tmp_path / "m.json"))
    for i in range(1000):
        (tmp_path / "only_train" / "train" / _wnid(i)).mkdir(parents=True)
    with pytest.raises(PipelineError, match=r"only_train/val does not exist; `source\.imagenet\.root` must hold"):
        list_imagenet({"root": str(tmp_path / "only_train"), "mapping": mapping}, CLASSES)
    root = tmp_path / "partial"
    for split in ("train", "val"):
        for i in range(999):
            (root / split / _wnid(i)).mkdir(parents=True)
    with pytest.raises(PipelineError, match=r"partial/train holds 999 class folders, expected the 1000"):
        list_imagenet({"root": str(root), "mapping": mapping}, CLASSES)


def test_a_bad_mapping_stops_the_listing_naming_the_file(tmp_path):
    """The listing reads `mapping` through load_in1k_to_in9: a missing file stops it naming the file."""
    root = _imagenet_tree(tmp_path / "imagenet", {})
    with pytest.raises(PipelineError, match=r"absent\.json"):
        list_imagenet({"root": str(root), "mapping": str(tmp_path / "absent.json")}, CLASSES)


def test_the_source_kind_imagenet_lists_in_id_order(tmp_path):
    """`list_source_items` with kind imagenet: the same items, sorted by id (never file-system order)."""
    root = _imagenet_tree(tmp_path / "imagenet", {("train", 999): ["b.JPEG"], ("train", 3): ["c.JPEG"],
                                                  ("val", 3): ["a.JPEG"]})
    source = {"kind": "imagenet", "imagenet": {"root": str(root), "mapping": str(_mapping_file(tmp_path / "m.json"))}}
    assert [it.id for it in list_source_items(source, CLASSES)] == ["train/00_dog/c", "train/08_fish/b", "val/00_dog/a"]
