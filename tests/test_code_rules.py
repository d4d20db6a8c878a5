"""Each rule of `workflow.protocol.code_rules()` (a value kept by hand, which the protocols compare
with the paper's) against what the code does: a change of the code that leaves the table as it was
fails here, so the protocol table cannot go on declaring a rule the code no longer follows."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest
import torch

from debias_workbench.training.methods import METHODS
from debias_workbench.workflow.protocol import code_rules

RULES: dict[str, Callable[..., None]] = {}


def rule(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register the check of code_rules()[name]."""
    def register(check: Callable[..., None]) -> Callable[..., None]:
        RULES[name] = check
        return check
    return register


def _method(name: str, default_config: dict, **args: object) -> torch.nn.Module:
    cfg = copy.deepcopy(default_config["training"])
    cfg["arch"] = "simple_cnn7"
    return METHODS[name](10, cfg, {"biased_arch": "simple_cnn1", **args})


def _batch(n: int = 8) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"images": torch.randint(0, 256, (n, 28, 28, 3), dtype=torch.uint8, generator=g),
            "labels": torch.arange(n) % 10}


def _optimised(optimizer: torch.optim.Optimizer, module: torch.nn.Module) -> bool:
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    return all(id(p) in held for p in module.parameters())


@rule("probe_checkpoint")
def _probe_checkpoint(default_config, monkeypatch, request) -> None:
    """The probe's head after `finish` is the one of its last SGD step (no epoch picked afterwards)."""
    from debias_workbench.training.data import ZarrBatches

    from .test_ssl import ssl_method

    stores = request.getfixturevalue("tiny_stores")
    method = ssl_method("moco_v2", default_config, batch_size=8, probe_epochs=2, probe_milestones=[1])
    after_step, step = [], torch.optim.SGD.step
    monkeypatch.setattr(torch.optim.SGD, "step", lambda opt, *a, **k: (step(opt, *a, **k),
                        after_step.append(method.network.head.weight.detach().clone()))[0])
    method.finish(ZarrBatches(stores["original"], "train", 8, shuffle=True, drop_last=True))
    assert after_step and torch.equal(after_step[-1], method.network.head.weight)


@rule("partial_class_scoring")
def _partial_class_scoring(default_config, monkeypatch, request) -> None:
    """score_run predicts the argmax over every class of the model, whatever classes the test set holds."""
    from debias_workbench.training import evaluation

    predictors = []
    monkeypatch.setattr(evaluation, "run_tags", lambda run_cfg: {})
    monkeypatch.setattr(evaluation, "accuracy_rows", lambda predict, *a, **k: predictors.append(predict) or [])
    method = SimpleNamespace(predict=lambda x: x, augmenter=None, scores_similarity=False)
    evaluation.score_run(method, {"run_config": {}}, {"dataset": "d", "split": "val", "batch_size": 2}, {}, "cpu")
    assert predictors[0](torch.tensor([[0.0, 1.0, 5.0], [3.0, 1.0, 0.0]])).tolist() == [2, 0]


@rule("random_resized_crop")
def _random_resized_crop(default_config, monkeypatch, request) -> None:
    """A crop larger than the image on one side is clamped to it (torchvision would draw again)."""
    from debias_workbench.training.augment import Augmenter

    theta = Augmenter([0.0] * 3, [1.0] * 3, crop_scale=(0.9, 1.0)).sample(500, torch.Generator().manual_seed(0))
    sides = torch.stack([theta[:, 0, 0].abs(), theta[:, 1, 1]])
    assert sides.max() == 1.0 and (sides == 1.0).any(0).float().mean() > 0.5


@rule("random_resized_crop_of_photos")
def _random_resized_crop_of_photos(default_config, monkeypatch, request) -> None:
    """Photos (aspects given): of a 10:1 photo no draw at scale 0.9-1 fits, and every crop is the
    central window of ratio 4:3 at the photo's full height; of a 6:5 photo a draw fits with some p, and
    the share that falls back is (1 - p)^10, p measured with one try: get_params' ten."""
    from debias_workbench.training import augment
    from debias_workbench.training.augment import Augmenter

    crop, n = Augmenter([0.0] * 3, [1.0] * 3, crop_scale=(0.9, 1.0)), 20_000
    wide = torch.full((50,), 10.0)
    theta = Augmenter.theta(crop.draw(50, torch.Generator().manual_seed(0), wide), wide)
    assert torch.allclose(theta[:, 1, 1], torch.ones(50)) and torch.allclose(theta[:, 0, 0], torch.full((50,), 0.4 / 3))
    assert (theta[:, :, 2] == 0).all()
    fell_back = lambda: float((crop.draw(n, torch.Generator().manual_seed(1), torch.full((n,), 1.2)).place  # noqa: E731
                               == 0.5).all(1).float().mean())
    tries = fell_back()
    monkeypatch.setattr(augment, "CROP_TRIES", 1)
    assert abs(tries - fell_back() ** 10) < 0.015 and tries > 0.05


@rule("positive_partner")
def _positive_partner(default_config, monkeypatch, request) -> None:
    """Three anchors of one class and one of another: all three take the one other-class sample."""
    from debias_workbench.training.methods.clad import choose_partners

    partner, found = choose_partners(torch.tensor([0, 0, 0, 1]), torch.Generator().manual_seed(0))
    assert partner[:3].tolist() == [3, 3, 3] and int(partner[3]) in (0, 1, 2) and bool(found.all())


@rule("negative_dictionary_start")
def _negative_dictionary_start(default_config, monkeypatch, request) -> None:
    """A new dictionary offers no usable negative until something is pushed."""
    from debias_workbench.training.methods.clad import NegativeDictionary

    _, usable = NegativeDictionary(3, 4, 5).negatives(torch.tensor([0, 2]), torch.tensor([7, 8]))
    assert not usable.any()


@rule("learned_mixin_gate")
def _learned_mixin_gate(default_config, monkeypatch, request) -> None:
    method = _method("learned_mixin_h", default_config, g_pretrain_epochs=0)
    assert _optimised(method.optimizer, method.gate)


@rule("fixed_g_batch_norm")
def _fixed_g_batch_norm(default_config, monkeypatch, request) -> None:
    """After G's pre-training, every forward of G in F's step runs in eval mode."""
    method = _method("learned_mixin_h", default_config, g_pretrain_epochs=0)
    modes = []
    for module in method.biased.modules():
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
            module.register_forward_pre_hook(lambda module, args: modes.append(module.training))
    method.train()
    method.update(_batch())
    assert modes and not any(modes)


@rule("rubi_mask_head")
def _rubi_mask_head(default_config, monkeypatch, request) -> None:
    method = _method("rubi", default_config)
    assert method.mask_head.in_features == 10 and _optimised(method.optimizer, method.mask_head)


@rule("rubi_question_loss")
def _rubi_question_loss(default_config, monkeypatch, request) -> None:
    """RUBi's loss is CE of the masked logits plus G's CE, nothing more."""
    stats = _method("rubi", default_config).update(_batch())
    assert math.isclose(float(stats["loss"]), float(stats["ce_masked"] + stats["ce_g"]), rel_tol=1e-6)


@rule("rebias_update_order")
def _rebias_update_order(default_config, monkeypatch, request) -> None:
    method = _method("rebias", default_config)
    stepped, step = [], method.step
    monkeypatch.setattr(method, "step", lambda opt, loss: (stepped.append("G" if opt is method.optimizer_g else "F"),
                                                           step(opt, loss)))
    method.update(_batch())
    assert ", then ".join(stepped) == code_rules()["rebias_update_order"]


@rule("biased_test_rho")
def _biased_test_rho(default_config, monkeypatch, request) -> None:
    from debias_workbench.pipeline.datasets.biased_mnist import BIASED_TEST_RHO

    assert BIASED_TEST_RHO == code_rules()["biased_test_rho"]


@rule("leftover_colours")
def _leftover_colours(default_config, monkeypatch, request) -> None:
    """50 samples of a class outside its colour: 5 or 6 per other colour (the authors' chunks of
    ceil(50 / 9) = 6 would leave 2 to the last)."""
    from debias_workbench.pipeline.mnist import assign_colours

    counts = np.bincount(assign_colours(np.zeros(100, np.int64), 0.5, "rule"), minlength=10)
    assert counts[0] == 50 and counts[1:].max() - counts[1:].min() <= 1


@rule("corruption_copies")
def _corruption_copies(default_config, monkeypatch, request) -> None:
    """One pair index per image, the pairs used in turn within each class."""
    from debias_workbench.pipeline.corruptions import assign_pairs

    labels = np.arange(150) % 2
    pairs = assign_pairs(labels, np.array([f"img{i}" for i in range(150)]), 75, 0)
    assert pairs.shape == (150,) and all(len(set(pairs[labels == c])) == 75 for c in (0, 1))


@rule("patch_tiling")
def _patch_tiling(default_config, monkeypatch, request) -> None:
    """Each view's ceil(224 / d)^2 patches sit on the d-px grid at the view's offset, inside the view."""
    from debias_workbench.training.negatives import draw_tilings

    tilings = draw_tilings(16, 224, torch.Generator().manual_seed(0))
    sources = tilings.sources()
    for i, d in enumerate(tilings.d.tolist()):
        used = sources[i, :math.ceil(224 / d) ** 2]
        assert ((used - tilings.offset[i]) % d == 0).all() and (used >= 0).all() and (used + d <= 224).all()


@rule("texture_scale")
def _texture_scale(default_config, monkeypatch, request) -> None:
    """A 96-px patch of a 375-px photo becomes a patch of the same share of the 224-px work image (57 px):
    the texture is synthesised at the work image's scale, not at the photo's."""
    from debias_workbench.pipeline.texture_patches import work_patch_side

    cfg = {"patch": 96, "small_patch": 48}
    assert work_patch_side(375, 224, cfg) == round(96 * 224 / 375) == 57
    assert work_patch_side(224, 224, cfg) == 96   # a photo already at the work size keeps the paper's patch


@rule("scored_checkpoint")
def _scored_checkpoint(default_config, monkeypatch, request) -> None:
    """model.pt, which `load_trained` hands to `score_run`, holds the method's weights as the trainer leaves them after
    its last step (no checkpoint picked along the way)."""
    from debias_workbench.training import trainer
    from debias_workbench.training.evaluation import load_trained

    cfg = {**copy.deepcopy(default_config["training"]), "arch": "simple_cnn7"}
    method = METHODS["vanilla"](10, cfg, {})
    run_cfg = {"method": "vanilla", "method_args": {}, "training": method.cfg, "experiment": "e", "seed": 0}
    state = SimpleNamespace(method=method, history=[], run_hash="h")
    path = trainer._save_outputs(request.getfixturevalue("tmp_path"), run_cfg, state, [str(c) for c in range(10)])
    loaded, _ = load_trained(path, torch.device("cpu"))
    assert code_rules()["scored_checkpoint"] == "the last iterate"
    assert all(torch.equal(v, loaded.state_dict()[k]) for k, v in method.state_dict().items())


@rule("colour_jitter")
def _colour_jitter(default_config, monkeypatch, request) -> None:
    """Brightness, contrast, saturation, hue in that order whatever the draw (with a brightness that clips, the two
    orders of brightness and contrast differ), and the hue a rotation of the YIQ chroma plane: it keeps each pixel's
    luma, which an HSV shift does not."""
    from debias_workbench.training.methods.ssl_augment import RGB_TO_YIQ, color_jitter

    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    b, c = torch.tensor([[1.6, 1.0, 1.0, 0.0]] * 2), torch.tensor([[1.0, 0.5, 1.0, 0.0]] * 2)
    both = color_jitter(x, torch.tensor([[1.6, 0.5, 1.0, 0.0]] * 2))
    assert torch.allclose(both, color_jitter(color_jitter(x, b), c), atol=1e-6)
    assert not torch.allclose(both, color_jitter(color_jitter(x, c), b), atol=1e-3)
    grey = torch.full_like(x, 0.5)   # no channel clipped by the rotation
    hue = color_jitter(x * 0.2 + grey * 0.8, torch.tensor([[1.0, 1.0, 1.0, 0.25]] * 2))
    luma = lambda im: torch.einsum("j,bjhw->bhw", RGB_TO_YIQ[0], im)  # noqa: E731
    assert torch.allclose(luma(hue), luma(x * 0.2 + grey * 0.8), atol=1e-5)
    assert code_rules()["colour_jitter"] == "fixed order, hue as a YIQ rotation"


@rule("partner_batch_norm")
def _partner_batch_norm(default_config, monkeypatch, request) -> None:
    """A guided step runs f_d's feature map on x^BN in a pass of its own: two calls of B rows each (the batch's, then
    the partners'), never one over the 2B rows together."""
    from debias_workbench.training.models import SmallCNN

    from .test_bias_amplification import _guided_losses

    rows: list[int] = []
    feature_map = SmallCNN.feature_map   # the network of `_guided_losses`' runs (arch small_cnn)
    monkeypatch.setattr(SmallCNN, "feature_map", lambda net, x: (rows.append(len(x)), feature_map(net, x))[1])
    _guided_losses(default_config, request.getfixturevalue("tiny_stores"))
    assert rows == [6, 6]   # the test's own pass over the batch, then _guided's over the partners
    assert code_rules()["partner_batch_norm"] == "its own pass (the partner batch's statistics)"


def test_every_code_rule_has_its_check():
    assert set(RULES) == set(code_rules())


@pytest.mark.parametrize("name", sorted(RULES))
def test_code_rule_matches_the_code(name, default_config, monkeypatch, request):
    """code_rules()[name]'s declared value holds in the code (each check's docstring says how it is read)."""
    RULES[name](default_config, monkeypatch, request)

