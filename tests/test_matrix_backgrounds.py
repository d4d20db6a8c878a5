"""Applicability per train variant (`training.applicability`, `DatasetFamily.aligned_store`): CLAD reads its
positives' backgrounds from a store row-aligned with its train split, so it is refused where a family builds
none for that train variant (IN-9's background-biased and Mixed-Rand train variants), and Biased MNIST offers
one behind `backgrounds: true` (the digit strokes as masks, the colour field as background)."""

import copy
import json

import numpy as np
import pytest
import torch
import zarr

from debias_workbench.pipeline.datasets import get_family
from debias_workbench.pipeline.datasets.biased_mnist import load_digits
from debias_workbench.pipeline.mnist import COLOURS, stroke_masks
from debias_workbench.training.applicability import applicability
from debias_workbench.training.trainer import train
from debias_workbench.workflow.config import ConfigError, resolve_config, validate_config
from debias_workbench.workflow.lookup import dataset_variants
from debias_workbench.workflow.slices import dataset_job_config, run_config


def _with_clad(config: dict, dataset: str, train_variant: str, **section) -> dict:
    """`config` with a CLAD experiment on `dataset`'s `train_variant` and `section` set in its dataset's section."""
    cfg = copy.deepcopy(config)
    cfg["datasets"][dataset].update(section)
    cfg["experiments"]["clad_here"] = {"method": "clad", "dataset": dataset, "train_variant": train_variant,
                                       "label": "CLAD here"}
    return cfg


@pytest.mark.parametrize("train_variant", ["bg_conflict_5", "mixed_rand"])
def test_matrix_clad_is_refused_on_in9_train_variants_its_backgrounds_are_not_aligned_with(default_config,
                                                                                            train_variant):
    """IN-9's only_bg_t store holds `original`'s rows: read beside another train split it would pair each image
    with another image's background. The table's reason and the config check name the method and the variant."""
    ds_cfg = default_config["datasets"]["in9"]
    assert train_variant in dataset_variants(default_config, "in9")
    ok, reason = applicability("clad", "in9", ds_cfg, train_variant, "in9")
    assert not ok and "'clad'" in reason and "'in9'" in reason and repr(train_variant) in reason
    assert "only_bg_t" in reason and "'original'" in reason
    assert applicability("clad", "in9", ds_cfg, "original", "in9") == (True, "")
    with pytest.raises(ConfigError, match=rf"experiments\.clad_here\.method: method 'clad' needs only_bg_t, .*"
                                          rf"train variant '{train_variant}' of dataset 'in9'"):
        validate_config(_with_clad(default_config, "in9", train_variant))


def test_matrix_clad_on_biased_mnist_needs_backgrounds_and_reads_its_rho_stores_copy(default_config):
    """Off (the default): refused, the reason naming the key to set; on: a rho_<rho> run reads
    rho_<rho>_only_bg_t, and the unbiased test set, which is no train split of a rho, is still refused."""
    ds_cfg = default_config["datasets"]["biased_mnist"]
    ok, reason = applicability("clad", "biased_mnist", ds_cfg, "rho_0.5", "biased_mnist")
    assert not ok and "'clad'" in reason and "'biased_mnist'" in reason and "'rho_0.5'" in reason
    assert "backgrounds: true" in reason
    with pytest.raises(ConfigError, match=r"experiments\.clad_here\.method: .*backgrounds: true"):
        validate_config(_with_clad(default_config, "biased_mnist", "rho_0.5"))
    on = {**ds_cfg, "backgrounds": True}
    assert applicability("clad", "biased_mnist", on, "rho_0.5", "biased_mnist") == (True, "")
    assert applicability("clad_plus", "biased_mnist", on, "rho_0.7", "biased_mnist") == (True, "")
    assert not applicability("clad", "biased_mnist", on, "unbiased", "biased_mnist")[0]
    assert not applicability("clad", "colored_mnist", default_config["datasets"]["colored_mnist"], "conflict_1")[0]
    cfg = resolve_config(_with_clad(default_config, "biased_mnist", "rho_0.5", backgrounds=True))
    run = run_config(cfg, "clad_here", 0)
    assert run["aligned_variants"] == {"backgrounds": "rho_0.5_only_bg_t"} and run["dataset_config"]["backgrounds"]
    assert "rho_0.5_only_bg_t" in dataset_variants(cfg, "biased_mnist")


def test_matrix_backgrounds_off_leaves_every_store_and_run_of_the_demo_as_it_was(default_config):
    """`backgrounds: false` written out is the key left out: the same variants, dataset job configs and runs
    (the demo's stores and runs keep their hash); IN-9's CLAD runs still read only_bg_t itself."""
    cfg = resolve_config(copy.deepcopy(default_config))
    off = copy.deepcopy(default_config)
    off["datasets"]["biased_mnist"]["backgrounds"] = False
    off = resolve_config(off)
    assert dataset_variants(off, "biased_mnist") == dataset_variants(cfg, "biased_mnist") == [
        "rho_0.3", "rho_0.5", "rho_0.7", "unbiased"]
    for variant in [None, *dataset_variants(cfg, "biased_mnist")]:
        assert dataset_job_config(off, "biased_mnist", variant) == dataset_job_config(cfg, "biased_mnist", variant)
    for name, exp in cfg["experiments"].items():
        assert run_config(off, name, 0) == run_config(cfg, name, 0), name
    assert run_config(cfg, "clad", 0)["aligned_variants"] == {"backgrounds": "only_bg_t"}


def _tiny_mnist_config(config: dict) -> dict:
    """The demo config with Biased MNIST's `backgrounds` on, built from scikit-learn's 1,797 digits."""
    cfg = copy.deepcopy(config)
    cfg["datasets"]["biased_mnist"].update(backgrounds=True, chunk_images=256,
                                           source={"kind": "sklearn_digits", "test_fraction": 0.2, "copies": 1})
    return cfg


@pytest.fixture(scope="module")
def background_stores(tmp_path_factory) -> dict[str, object]:
    """rho_0.5 (with masks) and rho_0.5_only_bg_t built with `backgrounds` on, and rho_0.5 built with it off."""
    import yaml

    from .conftest import ROOT

    cfg = _tiny_mnist_config(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    ds_cfg, root, fam = cfg["datasets"]["biased_mnist"], tmp_path_factory.mktemp("mnist"), get_family("biased_mnist")
    stores = {}
    for variant in ("rho_0.5", "rho_0.5_only_bg_t"):
        stores[variant] = root / f"{variant}.zarr"
        fam.run_step("variant", ds_cfg, 0, stores[variant], [], 1, variant)
    off = {k: v for k, v in ds_cfg.items() if k != "backgrounds"}
    stores["off"] = root / "off" / "rho_0.5.zarr"
    fam.run_step("variant", off, 0, stores["off"], [], 1, "rho_0.5")
    return {"config": cfg, **stores}


def test_matrix_background_store_is_row_aligned_and_masks_are_the_strokes(background_stores):
    """Same rows, digits and colours as its rho store; each image that store's outside the strokes and its
    background colour on them; the masks the binarised digits; the rho store's images those of `backgrounds`
    off (which has no masks)."""
    rho, bg = zarr.open_group(str(background_stores["rho_0.5"])), zarr.open_group(str(background_stores["rho_0.5_only_bg_t"]))
    off = zarr.open_group(str(background_stores["off"]))
    digits = load_digits(background_stores["config"]["datasets"]["biased_mnist"], 0)
    for split, source in (("train", "train"), ("val", "test")):
        for field in ("labels", "bias_labels", "ids"):
            assert np.array_equal(rho[split][field][:], bg[split][field][:]), (split, field)
        masks = rho[split]["masks"][:]
        assert masks.dtype == np.uint8 and np.array_equal(masks, stroke_masks(digits[source][0]))
        image, background, stroke = rho[split]["images"][:], bg[split]["images"][:], masks.astype(bool)
        assert np.array_equal(background[~stroke], image[~stroke])
        colour = np.broadcast_to(COLOURS[bg[split]["bias_labels"][:]][:, None, None, :], background.shape)
        assert np.array_equal(background[stroke], colour[stroke]) and (image[stroke] == 255).all()
        assert np.array_equal(off[split]["images"][:], image) and "masks" not in off[split]
        assert "masks" not in bg[split]


def test_matrix_clad_trains_on_biased_mnist_backgrounds(background_stores, tmp_path):
    """A real CLAD run (a few steps of simple_cnn7) through the trainer on rho_0.5 with its ONLY_BG_T copy."""
    cfg = background_stores["config"]
    cfg = _with_clad(cfg, "biased_mnist", "rho_0.5")
    cfg["experiments"]["clad_here"]["training"] = {
        "arch": "simple_cnn7", "simple_cnn_channels": [4, 4, 4, 4], "epochs": 1, "batch_size": 32,
        "steps_per_epoch": 4, "amp": False, "schedule": {"name": "constant"},
        "augment": {"crop_scale": [1.0, 1.0], "hflip": False}}
    run = run_config(resolve_config(cfg), "clad_here", 0)
    aligned = {field: background_stores[variant] for field, variant in run["aligned_variants"].items()}
    model = torch.load(train(run, background_stores["rho_0.5"], tmp_path / "run", aligned), weights_only=False)
    assert model["run_config"] == run and run["aligned_variants"] == {"backgrounds": "rho_0.5_only_bg_t"}
    rows = [json.loads(line) for line in (tmp_path / "run" / "train_metrics.jsonl").read_text().splitlines()]
    contrastive = [r["value"] for r in rows if r["metric"] == "contrastive"]
    assert contrastive and all(np.isfinite(contrastive)) and min(contrastive) > 0  # the InfoNCE term was trained
