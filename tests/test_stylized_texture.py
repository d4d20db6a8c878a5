"""Stylized IN-9 (AdaIN), IN-9-Texture (texture-synthesis CLI wrapper), the sketch stand-in,
the shape bias and S-CLAD."""

from __future__ import annotations

import json
import stat
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import zarr
from PIL import Image

from debias_workbench.core.errors import PipelineError
from debias_workbench.pipeline import adain
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline import derived_stage
from debias_workbench.pipeline.derived_stage import work_side
from debias_workbench.pipeline.styles import CUE_CONFLICT_SPLITS, StyleSet, choose_style, load_styles
from debias_workbench.pipeline.texture_patches import example_patches, patch_sides
from debias_workbench.pipeline.texture_synthesis import TextureJob, Tool, make_tool, synthesize

from .conftest import CLASSES, debug_batch, needs_shared, tiny_stores_config


def _tree_digest(store: Path) -> dict[str, bytes]:
    """Every file of a store but the provenance attributes (which name the git commit)."""
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name != "zarr.json"}


def test_packaged_adain_weights_are_the_reference_files():
    for name, md5 in (("vgg_normalised.pth", adain.VGG_MD5), ("decoder.pth", adain.DECODER_MD5)):
        assert adain.verified(None, name, md5) == adain.packaged_weights(name)
    with torch.no_grad():
        assert adain.vgg_encoder()(torch.rand(1, 3, 40, 40)).shape == (1, 512, 5, 5)  # relu4_1: 1/8 of the side


def test_adain_decoder_inverts_the_encoder_on_photos():
    """With alpha = 0 the output is decoder(encoder(x)), which the decoder was trained to make
    close to x (mean pixel correlation 0.82 on these photos at 128 px); a mis-wired network falls
    far below (0.18 without the encoder's 1x1 colour convolution)."""
    photos = sorted(needs_shared("data/in9-photos-dev").glob("*/*"))[::40][:5]
    model = adain.AdaIN(None, None, torch.device("cpu"), alpha=0.0)
    corr = []
    for photo in photos:
        x = torch.from_numpy(np.array(Image.open(photo).convert("RGB").resize((128, 128)))).permute(2, 0, 1)[None] / 255
        y = model.stylize(x, torch.zeros(1, 512, 1, 1), torch.ones(1, 512, 1, 1))
        assert y.shape == x.shape
        corr.append(np.corrcoef(x.flatten(), y.flatten())[0, 1])
    assert np.mean(corr) > 0.7, corr


def test_adain_gives_the_content_the_style_statistics():
    content, style = torch.randn(2, 8, 6, 6), torch.randn(2, 8, 5, 5) * 3 + 1
    mean, std = adain.mean_std(style)
    out_mean, out_std = adain.mean_std(adain.adain(content, mean, std))
    assert torch.allclose(out_mean, mean, atol=1e-4) and torch.allclose(out_std, std, atol=1e-2)


def test_wrong_or_missing_adain_weights_name_the_fix(tmp_path):
    with pytest.raises(PipelineError, match="nothing is downloaded"):
        adain.vgg_encoder(tmp_path / "missing.pth")
    (tmp_path / "vgg.pth").write_bytes(b"not the weights")
    with pytest.raises(PipelineError, match="md5 .* expected bb6e9a22"):
        adain.vgg_encoder(tmp_path / "vgg.pth")


def test_embedded_styles_are_each_class_texture_and_cue_conflict_choices_are_other_classes():
    styles = load_styles({"kind": "embedded", "per_class": 3, "size": 32}, CLASSES, 0)
    assert len(styles.images) == 27 and np.bincount(styles.classes).tolist() == [3] * 9
    again = load_styles({"kind": "embedded", "per_class": 3, "size": 32}, CLASSES, 0)
    assert all(np.array_equal(a, b) for a, b in zip(styles.images, again.images))
    assert CUE_CONFLICT_SPLITS == {"val"}
    picks = [choose_style(styles, 4, f"img{k}", 0, other_class_only=True) for k in range(200)]
    assert 4 not in {int(styles.classes[p]) for p in picks}
    assert len({int(styles.classes[p]) for p in picks}) == 8  # every other class is drawn
    assert picks == [choose_style(styles, 4, f"img{k}", 0, other_class_only=True) for k in range(200)]  # by the id


def test_train_style_class_is_independent_of_the_label():
    """On train the texture must say nothing about the label (Geirhos et al.'s paintings have no
    class): every (label, style class) cell holds about n / C images, the diagonal included. A
    choice among the other classes only leaves the diagonal empty, so a model could learn "never
    the texture's class"."""
    n_classes, n_ids = 9, 2000
    styles = StyleSet([np.zeros((1, 1, 3), np.uint8)] * 2 * n_classes, [f"s{k}" for k in range(2 * n_classes)],
                      np.repeat(np.arange(n_classes), 2))
    counts = np.zeros((n_classes, n_classes), np.int64)
    for label in range(n_classes):
        for k in range(n_ids):
            style = choose_style(styles, label, f"{label}/{k:05d}", 0, other_class_only=False)
            counts[label, styles.classes[style]] += 1
    p = 1 / n_classes
    bound = 4.5 * np.sqrt(n_ids * p * (1 - p))  # binomial sd of a cell: 14.1 images; 4.5 sd = 63
    assert np.abs(counts - n_ids * p).max() < bound, counts


def test_stylize_works_at_the_image_size_when_work_size_is_null(monkeypatch):
    """work_size null: AdaIN runs at the image's own size, at least 64 px (a 160-px photo stylized
    at 64 px lost its shape; a 32-px image needs 64); set, it runs there."""
    assert work_side(160, None) == 160 and work_side(32, None) == 64 and work_side(32, 48) == 48
    sides = []
    resize = derived_stage._resize
    monkeypatch.setattr(derived_stage, "_resize", lambda images, side: sides.append(side) or resize(images, side))
    cfg = tiny_stores_config()
    cfg["stylized"].update(work_size=None, styles={"kind": "embedded", "per_class": 1, "size": 16})
    images = np.random.default_rng(0).integers(0, 256, (2, 80, 80, 3), dtype=np.uint8)
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        out = derived_stage._stylize(images, np.array([0, 1]), np.array(["a", "b"]), np.array(["train", "val"]),
                                     CLASSES, cfg, 0)
        # full float32 on a GPU too: TF32 would make a GPU's store differ from a CPU's beyond float ordering
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
    assert out["images"].shape == (2, 80, 80, 3) and out["ok"].all() and sides == [80, 80]


def test_style_folder_problems_name_the_folder_or_file(tmp_path):
    cfg = {"kind": "folder", "root": str(tmp_path / "styles"), "size": 16}
    with pytest.raises(PipelineError, match="does not exist"):
        load_styles(cfg, CLASSES[:2], 0)
    (tmp_path / "styles" / CLASSES[0]).mkdir(parents=True)
    Image.new("RGB", (20, 20), (200, 10, 10)).save(tmp_path / "styles" / CLASSES[0] / "a.png")
    with pytest.raises(PipelineError, match=f"class folder.*{CLASSES[1]}.* missing"):
        load_styles(cfg, CLASSES[:2], 0)
    (tmp_path / "styles" / CLASSES[1]).mkdir()
    with pytest.raises(PipelineError, match=f"no style images in .*{CLASSES[1]}"):
        load_styles(cfg, CLASSES[:2], 0)
    (tmp_path / "styles" / CLASSES[1] / "broken.jpg").write_bytes(b"\xff\xd8 truncated")
    with pytest.raises(PipelineError, match="broken.jpg: cannot decode"):
        load_styles(cfg, CLASSES[:2], 0)
    (tmp_path / "styles" / CLASSES[1] / "broken.jpg").unlink()
    Image.new("RGB", (30, 18), (10, 10, 200)).save(tmp_path / "styles" / CLASSES[1] / "b.png")
    styles = load_styles(cfg, CLASSES[:2], 0)
    assert styles.ids == [f"{CLASSES[0]}/a.png", f"{CLASSES[1]}/b.png"] and styles.images[1].shape == (16, 16, 3)


def test_stylized_store_records_style_and_rebuilds_identically(tmp_path, tiny_stores):
    """Labels are the content's class, bias labels the style's (on val, the cue-conflict set,
    another class; on train, any class as `choose_style` draws it), style ids are stored; a
    rebuild on 2 workers gives the same bytes."""
    stylized, original = tiny_stores["stylized"], tiny_stores["original"]
    styles = load_styles(tiny_stores_config()["stylized"]["styles"], CLASSES, 0)
    for split in ("train", "val"):
        s, o = zarr.open_group(str(stylized), mode="r")[split], zarr.open_group(str(original), mode="r")[split]
        assert np.array_equal(s["ids"][:], o["ids"][:]) and np.array_equal(s["labels"][:], o["labels"][:])
        chosen = [choose_style(styles, int(y), str(i), 0, split == "val") for y, i in zip(s["labels"][:], s["ids"][:])]
        assert s["style_ids"][:].tolist() == [styles.ids[c] for c in chosen]
        assert np.array_equal(s["bias_labels"][:], styles.classes[chosen])
        if split == "val":
            assert (s["bias_labels"][:] != s["labels"][:]).all()
        assert all(sid.startswith("embedded_") for sid in s["style_ids"][:])
        assert not np.array_equal(s["images"][:], o["images"][:])
    root = stylized.parent
    manifest = json.loads((root / "stylized.manifest.json").read_text())
    assert all(m["inputs"] == m["outputs"] + len(m["skipped"]) for m in manifest.values())
    rebuilt = tmp_path / "stylized.zarr"
    get_family("in9").run_step("variant", tiny_stores_config(), 0, rebuilt,
                               [root / "seg.zarr", root / "segmented.manifest.json"], 2, "stylized")
    assert _tree_digest(rebuilt) == _tree_digest(stylized)


def _ds_cfg(tiny_ds_cfg: dict, **texture) -> dict:
    cfg = dict(tiny_ds_cfg)
    cfg["texture"] = {**cfg["texture"], "splits": ["train", "val"], "work_size": 32, "batch_images": 5, **texture}
    return cfg


def _segmented(tmp_path: Path, cfg: dict) -> Path:
    family = get_family("in9")
    family.run_step("source", cfg, 0, tmp_path / "src", [])
    family.run_step("segment", cfg, 0, tmp_path / "seg" / "segmented.zarr", [tmp_path / "src"])
    return tmp_path / "seg" / "segmented.zarr"


def test_texture_store_from_gmic_is_identical_on_rebuild_with_2_workers(tmp_path, tiny_ds_cfg):
    cfg = _ds_cfg(tiny_ds_cfg)
    seg = _segmented(tmp_path, cfg)
    family = get_family("in9")
    inputs = [seg, seg.parent / "segmented.manifest.json"]
    family.run_step("variant", cfg, 0, tmp_path / "a" / "texture.zarr", inputs, 1, "texture")
    family.run_step("variant", cfg, 0, tmp_path / "b" / "texture.zarr", inputs, 2, "texture")
    assert _tree_digest(tmp_path / "a" / "texture.zarr") == _tree_digest(tmp_path / "b" / "texture.zarr")
    val = zarr.open_group(str(tmp_path / "a" / "texture.zarr"), mode="r")["val"]
    assert val["images"].shape == (18, 32, 32, 3) and val["images"][:].std() > 10


def test_patches_are_the_centre_and_a_seeded_random_one():
    assert patch_sides(224, {"patch": 96, "small_patch": 48}) == 96
    assert patch_sides(150, {"patch": 96, "small_patch": 48}) == 48
    assert patch_sides(64, {"patch": 96, "small_patch": 48}) == 32
    image = np.arange(64 * 64 * 3, dtype=np.uint8).reshape(64, 64, 3)
    a, b = example_patches(image, 32, np.random.default_rng(0))
    assert np.array_equal(a, image[16:48, 16:48]) and b.shape == (32, 32, 3)


FAKE_BATCH_TOOL = """\
import json, sys, time
from PIL import Image
spec = json.load(open(sys.argv[1]))
status = 0
for job in spec["jobs"]:
    if "fail" in open(job["a"] + ".name").read():
        status = 3
        continue
    if "hang" in open(job["a"] + ".name").read():
        time.sleep(60)
    if "garbage" in open(job["a"] + ".name").read():
        open(job["out"], "wb").write(b"not a png")
        continue
    Image.new("RGB", (job["size"], job["size"]), (1, 2, 3)).save(job["out"])
print("fake tool: failing on purpose", file=sys.stderr) if status else None
sys.exit(status)
"""


def _fake_tool(tmp_path: Path) -> Tool:
    script = tmp_path / "fake_tool.py"
    script.write_text(FAKE_BATCH_TOOL)
    return Tool("fake", (sys.executable, str(script)), True)


def _jobs(names: list[str]) -> list[TextureJob]:
    patch = np.zeros((4, 4, 3), np.uint8)
    return [TextureJob(name, patch, patch, 7, 8) for name in names]


def test_texture_wrapper_contains_a_failing_a_hanging_and_a_garbage_writing_tool(tmp_path, monkeypatch):
    """The fake CLI exits 3 on one image, hangs on another, writes garbage for a third: those
    three come back as reasons naming their image, the others as textures."""
    import debias_workbench.pipeline.texture_synthesis as ts

    names = ["ok_1", "fail_me", "ok_2", "hang_me", "garbage_me", "ok_3"]
    real_save = Image.Image.save

    def save_with_name(self, fp, *args, **kwargs):  # tell the fake which image a patch file belongs to
        real_save(self, fp, *args, **kwargs)
        k = int(Path(fp).name.split("_")[0])
        Path(f"{fp}.name").write_text(names[k])

    monkeypatch.setattr(Image.Image, "save", save_with_name)
    out = ts.synthesize(_jobs(names), _fake_tool(tmp_path), timeout_s=1)
    for name, result in zip(names, out):
        if name.startswith("ok"):
            assert isinstance(result, np.ndarray) and result.shape == (8, 8, 3), (name, result)
        else:
            assert isinstance(result, str) and name in result
    assert "exit status 3" in out[1] and "failing on purpose" in out[1]
    assert "timed out after 1 s" in out[3]
    assert "unreadable output" in out[4]


def test_texture_tool_missing_or_failing_everywhere_is_an_error(tmp_path):
    with pytest.raises(PipelineError, match="cannot start the texture tool .*pip install gmic"):
        synthesize(_jobs(["a"]), Tool("gone", (str(tmp_path / "no-such-tool"),), True), 5)
    script = tmp_path / "broken.sh"
    script.write_text("#!/bin/sh\necho broken install >&2\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    with pytest.raises(PipelineError, match="failed on every image of a batch of 2; first: .*broken install"):
        synthesize(_jobs(["a", "b"]), Tool("embark", (str(script),), False), 5)
    with pytest.raises(PipelineError, match="texture.binary is not set"):
        make_tool({"tool": "embark", "binary": None})


def test_embark_style_binary_gets_its_arguments_and_a_failure_is_a_skipped_item(tmp_path, tiny_ds_cfg):
    """A stand-in for EmbarkStudios' binary (`--rand-seed S --out-size WxH --out OUT generate A B`)
    that fails on one image: that image is in the manifest with the reason; in = out + skipped."""
    log = tmp_path / "calls.txt"
    binary = tmp_path / "texture-synthesis"
    binary.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import sys
        from PIL import Image
        args = sys.argv[1:]
        open({str(log)!r}, "a").write(" ".join(args) + "\\n")
        seed, size, out = args[1], args[3], args[5]
        assert args[6] == "generate" and args[2] == "--out-size" and len(args) == 9
        if "00003_out" in out:
            sys.exit("cannot synthesize this one")
        w, h = map(int, size.split("x"))
        Image.new("RGB", (w, h), (int(seed) % 256, 0, 0)).save(out)
        """))
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    cfg = _ds_cfg(tiny_ds_cfg, tool="embark", binary=str(binary), splits=["val"])
    seg = _segmented(tmp_path, cfg)
    out = tmp_path / "out" / "texture.zarr"
    get_family("in9").run_step("variant", cfg, 0, out, [seg, seg.parent / "segmented.manifest.json"], 1, "texture")
    manifest = json.loads((out.parent / "texture.manifest.json").read_text())["val"]
    assert manifest["inputs"] == 18 and manifest["outputs"] + len(manifest["skipped"]) == 18
    assert len(manifest["skipped"]) >= 1
    assert all("cannot synthesize this one" in s["reason"] for s in manifest["skipped"])
    assert len(log.read_text().splitlines()) == 18


def test_sketch_stand_in_keeps_the_outline_only(tiny_stores):
    from debias_workbench.pipeline.variants import sketch

    image = np.full((1, 32, 32, 3), 120, np.uint8)
    image[0, :, ::4] = 250  # a striped background: must not show
    fg = np.zeros((1, 32, 32), np.uint8)
    fg[0, 8:24, 8:24] = 1
    out = sketch(image, fg)
    assert out[0, 0].min() == 255 and out[0, 8, 12].max() == 0  # background white, the square's edge black


def test_shape_bias_counts_only_shape_or_texture_decisions():
    from debias_workbench.training.evaluation import shape_bias

    result = {"labels": np.array([0, 0, 1, 1, 2, 2]), "bias_labels": np.array([1, 2, 0, 2, 0, 1]),
              "pred": np.array([0, 2, 0, 2, 2, 8])}
    bias, decisions = shape_bias(result)  # shape: image 0, 4; texture: 1, 2, 3; image 5 neither
    assert decisions == 5 and bias == pytest.approx(40.0)


def test_s_clad_keys_its_dictionary_by_the_positives_style_class(tiny_stores, default_config):
    from debias_workbench.training.build import build_method
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    cfg = resolve_config(default_config)
    run = run_config(cfg, "s_clad", 0)
    run["training"].update(batch_size=6)
    method = build_method(run, 9, torch.device("cpu"))
    batch = debug_batch(method, tiny_stores)
    assert set(batch) >= {"stylized", "stylized_bias_labels"}
    positives, keys, found = method.make_positives(batch)
    assert torch.equal(positives, batch["stylized"]) and torch.equal(keys, batch["stylized_bias_labels"])
    # train styles are of any class: a copy wearing the anchor's own class's texture is no positive
    assert (keys >= 0).all() and torch.equal(found, keys != batch["labels"])
    assert found.any() and not found.all()                    # this batch holds both kinds
    stats = method.update(batch)
    assert torch.isfinite(torch.as_tensor(stats["loss"]))
    filled = (method.dictionary.rows >= 0).sum(1)             # entries per key: the found positives only
    assert filled.sum() == found.sum() and set(torch.nonzero(filled).flatten().tolist()) == set(keys[found].tolist())
