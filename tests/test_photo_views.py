"""`train_views: photo` (issue 51): training views cut from the whole photo, as Ge et al.'s
RandomResizedCrop of the decoded photo (moco-non-sem-neg.py:247, main_lincls.py:250). The crop drawn
in photo proportions against torchvision's get_params; views that reach outside the centre square; the
store (the train split's squashed photos and aspects, val as before), its readers and checks; the
self-supervised methods and their probe on it; the config checks."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
import zarr

from debias_workbench.training.augment import Augmenter

from .conftest import ROOT, SHARED
from .standins import make_imagenet_tree

CONFIG = ROOT / "config" / "imagenet100_ssl.yaml"


def test_fidelity_a_view_of_a_wide_photo_reaches_its_edges_outside_the_centre_square():
    """A 2:1 photo, red in its left tenth and blue in its right tenth, grey between: its centre square
    (0.875 of the height) holds neither colour, and views drawn in the photo's proportions from the
    photo stored squashed show both. Views of the square never could."""
    height, width, side = 200, 400, 256
    photo = np.full((height, width, 3), 128, np.uint8)
    photo[:, :width // 10] = (255, 0, 0)
    photo[:, -width // 10:] = (0, 0, 255)
    from debias_workbench.pipeline.imageio import Geometry, TrainPhotos

    square = Geometry("crop", 0.875).apply(photo, 224)
    assert not (square[..., 0] > 200).any() and not (square[..., 2] > 200).any()
    squashed, aspect = TrainPhotos(side, 0.875).photo(photo)
    assert squashed.shape == (side, side, 3) and aspect == 2.0
    n = 256
    crop = Augmenter([0.0] * 3, [1.0] * 3, (0.2, 1.0), hflip=True)
    images = torch.from_numpy(squashed)[None].expand(n, -1, -1, -1)
    views = crop(images, torch.Generator().manual_seed(0), torch.full((n,), aspect), 224) * 255   # (n, 3, 224, 224)
    red = ((views[:, 0] > 200) & (views[:, 2] < 50)).flatten(1).any(1)
    blue = ((views[:, 2] > 200) & (views[:, 0] < 50)).flatten(1).any(1)
    assert views.shape == (n, 3, 224, 224) and red.float().mean() > 0.05 and blue.float().mean() > 0.05


def _get_params_shares(width: int, height: int, scale: tuple[float, float], n: int) -> torch.Tensor:
    """(n, 2) width and height shares of torchvision's RandomResizedCrop.get_params windows of a photo."""
    from torchvision.transforms import RandomResizedCrop

    torch.manual_seed(0)
    image = torch.empty(3, height, width)
    boxes = [RandomResizedCrop.get_params(image, list(scale), [3 / 4, 4 / 3]) for _ in range(n)]
    return torch.tensor([[w / width, h / height] for _, _, h, w in boxes])


@pytest.mark.parametrize("width,height,scale", [(400, 200, (0.2, 1.0)), (300, 400, (0.08, 1.0)), (600, 200, (0.2, 1.0))])
def test_fidelity_photo_crops_follow_torchvision_get_params_in_photo_pixels(width, height, scale):
    """The crop's width share sqrt(s r / a) and height share sqrt(s a / r) of a photo of aspect a, with
    get_params' ten tries and central fallback: the area share, the ratio in photo pixels (its
    quantiles) and the share of fallbacks agree with torchvision's own draws on that photo."""
    n, a = 6000, width / height
    theirs = _get_params_shares(width, height, scale, n)
    aspects = torch.full((n,), a)
    theta = Augmenter([0.0] * 3, [1.0] * 3, scale).sample(n, torch.Generator().manual_seed(1), aspects)
    ours = torch.stack([theta[:, 0, 0].abs(), theta[:, 1, 1]], dim=1)
    for shares in (theirs, ours):
        assert (shares <= 1 + 1e-6).all()
    area = lambda s: s[:, 0] * s[:, 1]                         # noqa: E731
    log_ratio = lambda s: torch.log(s[:, 0] * a / s[:, 1])     # noqa: E731  width / height in photo pixels
    full = lambda s: ((s[:, 1] > 0.995) & (s[:, 0] < 0.995)).float().mean()  # noqa: E731  the fallback's full height
    assert float(area(ours).mean()) == pytest.approx(float(area(theirs).mean()), abs=0.01)
    q = torch.tensor([0.1, 0.25, 0.5, 0.75, 0.9])
    assert torch.allclose(torch.quantile(log_ratio(ours), q), torch.quantile(log_ratio(theirs), q), atol=0.03)
    assert torch.allclose(torch.quantile(area(ours), q), torch.quantile(area(theirs), q), atol=0.03)
    assert float(full(ours)) == pytest.approx(float(full(theirs)), abs=0.015)
    assert float(log_ratio(ours).abs().max()) <= math.log(4 / 3) + 1e-4                  # within the ratio range


@pytest.mark.parametrize("width,height", [(400, 300), (600, 200)])
def test_fidelity_texture_crops_replay_get_params_on_the_square(width, height):
    """Ge et al.'s texture image t gets its query's random numbers (moco/loader.py `DuoImageNetFolder`
    re-seeds before each transform), so get_params' tries are replayed on the 224-px texture and the
    first that fits the square is kept: its windows are get_params' on a square, whatever the photo's
    aspect (the photo's window, clamped to the square, is smaller and wider on wide photos)."""
    from debias_workbench.training.methods.ssl_augment import AugPlus

    n, scale = 6000, (0.2, 1.0)
    theirs = _get_params_shares(224, 224, scale, n)
    view = AugPlus([0.0] * 3, [1.0] * 3, scale).sample(n, 224, torch.Generator().manual_seed(2),
                                                        torch.full((n,), width / height))
    theta = view.in_square().theta
    ours = torch.stack([theta[:, 0, 0].abs(), theta[:, 1, 1]], dim=1)
    area = lambda s: s[:, 0] * s[:, 1]                         # noqa: E731
    wide = lambda s: (s[:, 0] > s[:, 1]).float().mean()        # noqa: E731
    assert float(area(ours).mean()) == pytest.approx(float(area(theirs).mean()), abs=0.01)
    assert float(wide(ours)) == pytest.approx(float(wide(theirs)), abs=0.03)


def test_square_images_draw_as_before():
    """Without aspects (every store of `train_views: square`) the draw and its affine are today's:
    the views of the demo's runs do not move."""
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    crop = Augmenter([0.0] * 3, [1.0] * 3, (0.5, 1.0), hflip=True)
    theta = crop.sample(64, g1)
    area = torch.empty(64).uniform_(0.5, 1.0, generator=g2)
    r = torch.exp(torch.empty(64).uniform_(math.log(3 / 4), math.log(4 / 3), generator=g2))
    sx, sy = torch.sqrt(area * r).clamp(max=1.0), torch.sqrt(area / r).clamp(max=1.0)
    cx = (torch.rand(64, generator=g2) * 2 - 1) * (1 - sx)
    cy = (torch.rand(64, generator=g2) * 2 - 1) * (1 - sy)
    flip = torch.where(torch.rand(64, generator=g2) < 0.5, -1.0, 1.0)
    assert torch.equal(theta[:, 0, 0], sx * flip) and torch.equal(theta[:, 1, 1], sy)
    assert torch.equal(theta[:, 0, 2], cx) and torch.equal(theta[:, 1, 2], cy)


@pytest.fixture(scope="module")
def photo_stores(tmp_path_factory) -> dict[str, Path]:
    """ImageNet-100's section (224 px, crop 0.875) on a stand-in tree, built with `train_views: photo`
    (original, texture on both splits) and with `square` (original)."""
    from debias_workbench.pipeline.datasets import get_family

    photos = SHARED / "data" / "in9-photos-dev"
    root = tmp_path_factory.mktemp("photos")
    tree = make_imagenet_tree(root / "imagenet", photos if photos.is_dir() else None)
    cfg = copy.deepcopy(yaml.safe_load(CONFIG.read_text())["datasets"]["imagenet100"])
    cfg.update(chunk_images=4, block_images=8, variants=["original", "texture"], external={})
    cfg["source"]["imagenet_subset"]["root"] = str(tree)
    cfg["texture"].update(splits=["train", "val"], work_size=64)
    family, stores = get_family("in9"), {"tree": tree}
    for views in ("photo", "square"):
        section, out = dict(cfg, train_views=views), root / views
        family.run_step("segment", section, 0, out / "segmented.zarr", [], 1)
        for variant in (("original", "texture") if views == "photo" else ("original",)):
            stores[f"{variant}_{views}"] = out / f"{variant}.zarr"
            family.run_step("variant", section, 0, out / f"{variant}.zarr",
                            [out / "segmented.zarr", out / "segmented.manifest.json"], 1, variant)
    return stores


def test_fidelity_the_photo_store_holds_squashed_training_photos_and_their_aspects(photo_stores):
    """The train split: (n, 256, 256, 3) photos and each photo's aspect W / H (no masks); val: the
    same 224-px test images as the square store's; the texture negatives: 224-px squares."""
    from PIL import Image

    photo, square = (zarr.open_group(str(photo_stores[f"original_{v}"]), mode="r") for v in ("photo", "square"))
    train, n = photo["train"], photo["train"]["labels"].shape[0]
    assert n > 0 and train["images"].shape == (n, 256, 256, 3) and "masks" not in train
    assert photo.attrs["image_size"] == 224 and photo.attrs["train_photos"] == {"side": 256, "fraction": 0.875}
    tree = photo_stores["tree"]
    sizes = [Image.open(next((tree / "train" / i.split("/")[1].split("_", 1)[1]).glob(f"{i.split('/')[2]}.*"))).size
             for i in train["ids"][:]]
    assert np.allclose(train["aspects"][:], [w / h for w, h in sizes])
    assert square["train"]["images"].shape == (n, 224, 224, 3)
    for name in ("images", "labels", "ids", "masks"):
        assert np.array_equal(photo["val"][name][:], square["val"][name][:]), name
    texture = zarr.open_group(str(photo_stores["texture_photo"]), mode="r")
    assert texture["train"]["images"].shape == (n, 224, 224, 3) and texture["val"]["images"].shape[1:] == (224, 224, 3)


def test_texture_negatives_cut_their_example_patches_from_the_whole_training_photo(photo_stores):
    """Under `train_views: photo` a training row's example image is its photo as stored (squashed, with
    its aspect) and its patches are sized by the photo's shorter side; a val row's, the test square."""
    from debias_workbench.pipeline.texture_patches import texture_examples

    seg = zarr.open_group(str(photo_stores["original_photo"].parent / "segmented.zarr"), mode="r")
    rows, splits, shapes = np.arange(seg["ids"].shape[0]), seg["splits"][:], seg["photo_shapes"][:]
    section = {"train_views": "photo", "view_source_size": 256, "geometry": "crop", "crop_fraction": 0.875}
    examples, sides = texture_examples(seg, rows, seg["images"][:], section)
    for (image, aspect), side, split, (height, width), row in zip(examples, sides, splits, shapes, rows):
        if split == "train":
            assert image.shape == (256, 256, 3) and aspect == width / height and side == min(height, width)
            assert np.array_equal(image, seg["photos"][int(row)])
        else:
            assert image.shape == (224, 224, 3) and aspect is None and side == seg["source_sides"][int(row)]


def test_the_photo_store_is_verified_read_and_exported_at_the_photos_aspect(photo_stores, tmp_path):
    """`workbench verify` holds; `load_variant` and `workbench export` give each training photo at its
    aspect (shorter side 256) with its aspect; every other reader of the split is refused, naming it."""
    from PIL import Image

    from debias_workbench.pipeline.export import export
    from debias_workbench.pipeline.fingerprint import verify
    from debias_workbench import load_variant
    from debias_workbench.training.data import ZarrBatches

    store = photo_stores["original_photo"]
    assert verify(store) == []
    train = load_variant(store, "train")
    item = train[0]
    height, width = item["image"].shape[1:]
    assert min(height, width) == 256 and width / height == pytest.approx(item["aspect"], rel=0.01)
    assert load_variant(store, "val")[0]["image"].shape == (3, 224, 224) and "aspect" not in load_variant(store, "val")[0]
    out = export(store, "imagefolder", tmp_path / "export")
    first = sorted((out / "train").rglob("*.png"))[0]
    assert min(Image.open(first).size) == 256
    with pytest.raises(ValueError, match=r"original.zarr/train holds whole photos .*score the val split"):
        ZarrBatches(store, "train", 4, shuffle=False)


@pytest.mark.parametrize("name,args", [("moco_v2_texture", {}), ("byol", {"negative": "patch", "alpha": 0.05})])
def test_self_supervised_views_and_probe_of_the_photos(name, args, photo_stores, default_config, monkeypatch):
    """A training step on the photo store: every image the encoders see is a 224-px view (query, key,
    negatives); the texture image gets the query's draw in its own (square) proportions; the probe's
    crops and its unaugmented features are 224 px too, the latter the test view (the centred square)."""
    from debias_workbench.training.data import ZarrBatches

    from .test_ssl import ssl_method

    method = ssl_method(name, default_config, batch_size=4, **{"probe_epochs": 1, "probe_augment": True, **args})
    aligned = {"textures": photo_stores["texture_photo"]} if name == "moco_v2_texture" else {}
    batches = ZarrBatches(photo_stores["original_photo"], "train", 4, shuffle=True, drop_last=True,
                          aligned=aligned, cuts_views=True)
    method.setup(batches)
    seen = []
    monkeypatch.setattr(type(method.network), "features", lambda net, x, f=type(method.network).features:
                        seen.append(tuple(x.shape[-2:])) or f(net, x))
    method.update(next(iter(batches.epoch(0))))
    assert seen and set(seen) == {(224, 224)}
    seen.clear()
    centre = []
    monkeypatch.setattr(Augmenter, "centre", staticmethod(lambda a, f, c=Augmenter.centre: centre.append(f) or c(a, f)))
    method.finish(batches)
    assert set(seen) == {(224, 224)} and centre == [0.875] * len(centre) and centre


def test_the_checks_name_what_photo_views_cannot_do():
    from debias_workbench.workflow.config import ConfigError, deep_merge, validate_config

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    cfg = deep_merge(cfg, yaml.safe_load(CONFIG.read_text()))
    assert cfg["datasets"]["imagenet100"]["train_views"] == "photo"
    bad = copy.deepcopy(cfg)
    bad["experiments"]["in100_moco"]["method"] = "erm"
    bad["experiments"]["in100_moco"]["method_args"] = {}
    with pytest.raises(ConfigError, match=r"experiments\.in100_moco\.method: 'erm' crops the stored square"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    bad["datasets"]["imagenet100"]["corrupted"]["splits"] = ["train", "val"]
    bad["datasets"]["imagenet100"]["view_source_size"] = 200
    with pytest.raises(ConfigError, match=r"view_source_size: 200 is under image_size 224(.|\n)*variants: "
                                          r"\['corrupted'\] would cut their train split from the stored square"):
        validate_config(bad)
    bad = copy.deepcopy(cfg)
    del bad["datasets"]["imagenet100"]["view_source_size"]
    with pytest.raises(ConfigError, match=r"'view_source_size' is a required property"):
        validate_config(bad)
