"""CLAD: InfoNCE with a dictionary, the per-background-class FIFO queues, positive generation,
a CLAD training run through the trainer, and the analyses on hand-made inputs."""

import copy
import math

import numpy as np
import pytest
import torch

from debias_workbench.training.analysis import (corner_crops, decision_consistency, feature_similarity, foreground_share,
                               smoothgrad)
from debias_workbench.training.losses import info_nce
from debias_workbench.training.methods import METHODS
from debias_workbench.training.methods.clad import CLAD, NegativeDictionary, choose_partners
from debias_workbench.training.trainer import train
from debias_workbench.workflow.slices import run_config

from .conftest import debug_batch


def _info_nce_by_hand(anchor, positive, negatives, tau, mask):
    """Eq. (1) written out with Python floats, one anchor at a time."""
    cos = lambda a, b: float(a @ b) / (math.sqrt(float(a @ a)) * math.sqrt(float(b @ b)))  # noqa: E731
    losses = []
    for i in range(len(anchor)):
        pos = math.exp(cos(anchor[i], positive[i]) / tau)
        neg = sum(math.exp(cos(anchor[i], n) / tau) for n, ok in zip(negatives[i], mask[i]) if ok)
        losses.append(-math.log(pos / (pos + neg)))
    return sum(losses) / len(losses)


def test_info_nce_matches_the_equation_computed_by_hand():
    g = torch.Generator().manual_seed(0)
    anchor, positive = torch.randn(5, 7, generator=g), torch.randn(5, 7, generator=g)
    negatives = torch.randn(5, 4, 7, generator=g)
    mask = torch.rand(5, 4, generator=g) > 0.3
    mask[0] = False  # an anchor without negatives: -log 1 = 0
    for tau in (0.2, 1.0):
        got = info_nce(anchor, positive, negatives, tau, mask).item()
        assert got == pytest.approx(_info_nce_by_hand(anchor, positive, negatives, tau, mask), abs=1e-5)
    full = torch.ones(5, 4, dtype=torch.bool)
    assert info_nce(anchor, positive, negatives, 0.2).item() == pytest.approx(
        _info_nce_by_hand(anchor, positive, negatives, 0.2, full), abs=1e-5)
    # scaling features changes nothing (cosine similarity)
    assert info_nce(3 * anchor, positive, 2 * negatives, 0.2).item() == pytest.approx(
        info_nce(anchor, positive, negatives, 0.2).item(), abs=1e-5)


def test_dictionary_is_fifo_per_background_label():
    d = NegativeDictionary(keys=3, size=2, dim=1)
    feats = torch.tensor([[1.0], [2.0], [3.0], [4.0], [5.0]])
    d.push(feats, keys=torch.tensor([0, 1, 0, 0, 2]), rows=torch.tensor([10, 11, 12, 13, 14]))
    content = lambda key: sorted(d.feats[key, d.rows[key] >= 0, 0].tolist())  # noqa: E731
    # key 0 got 1, 3, 4 in that order: only the last two stay
    assert content(0) == [3.0, 4.0] and content(1) == [2.0] and content(2) == [5.0]
    assert sorted(d.rows[0].tolist()) == [12, 13] and sorted(d.rows[1].tolist()) == [-1, 11]
    d.push(torch.tensor([[6.0]]), keys=torch.tensor([0]), rows=torch.tensor([15]))
    assert content(0) == [4.0, 6.0]  # the oldest (3) left first
    d.push(torch.tensor([[7.0], [8.0]]), keys=torch.tensor([0, 1]), rows=torch.tensor([16, 17]))
    assert content(0) == [6.0, 7.0] and content(1) == [2.0, 8.0]
    neg, usable = d.negatives(torch.tensor([0, 2, 2]), rows=torch.tensor([99, 99, 14]))
    assert sorted(neg[0, :, 0].tolist()) == [6.0, 7.0] and usable[0].tolist() == [True, True]
    assert sorted(usable[1].tolist()) == [False, True]  # empty slot masked
    assert usable[2].tolist() == [False, False]  # an anchor never meets the entry made from itself


def test_dictionary_entries_carry_no_gradient():
    d = NegativeDictionary(keys=2, size=4, dim=3)
    feats = torch.randn(3, 3, requires_grad=True)
    d.push(feats * 2, keys=torch.tensor([0, 1, 0]), rows=torch.arange(3))
    neg, usable = d.negatives(torch.tensor([0]), torch.tensor([9]))
    assert not d.feats.requires_grad and neg.grad_fn is None
    loss = info_nce(feats[:1], feats[1:2], neg, 0.2, usable)
    loss.backward()
    assert feats.grad is not None  # the anchor and positive get gradients, the dictionary does not


def test_partners_never_share_the_anchor_class():
    g = torch.Generator().manual_seed(1)
    for _ in range(200):
        labels = torch.randint(0, 4, (12,), generator=g)
        partner, found = choose_partners(labels, g)
        assert found.tolist() == [bool((labels != y).any()) for y in labels]
        assert (labels[partner][found] != labels[found]).all()
    partner, found = choose_partners(torch.zeros(5, dtype=torch.long), g)
    assert not found.any()


def test_positives_paste_the_foreground_on_another_class_background(tiny_stores, default_config):
    method = CLAD(9, default_config["training"], {})
    batch = debug_batch(method, tiny_stores, batch_size=12)
    positives, bg_labels, found = method.make_positives(batch)
    fg = batch["masks"].bool()
    assert found.all() and (bg_labels != batch["labels"]).all()
    assert torch.equal(positives[fg], batch["images"][fg])  # the anchor's own foreground
    for i in range(len(positives)):  # the background is one of another class's ONLY_BG_T images
        j = [k for k in range(len(positives)) if torch.equal(positives[i][~fg[i]], batch["backgrounds"][k][~fg[i]])]
        assert j and all(batch["labels"][k] == bg_labels[i] for k in j)


def test_clad_bn_fidelity_anchors_and_positives_in_two_batch_norm_batches(tiny_stores, default_config):
    """The authors pass anchors and positives through the encoder separately (main_clad_bg.py:118,
    128): the first batch norm normalises the B anchors by their own statistics, then the B
    positives by theirs (the anchors' never mix with the positives'), and its running statistics
    after a step are those of these two passes in that order."""
    method = CLAD(9, default_config["training"], {})
    batch = debug_batch(method, tiny_stores, batch_size=6)
    bn = next(m for m in method.network.modules() if isinstance(m, torch.nn.BatchNorm2d))
    reference, seen = copy.deepcopy(bn), []
    bn.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    method.update(batch)
    assert [len(x) for x in seen] == [6, 6]
    for x in seen:
        reference(x)
    assert torch.allclose(bn.running_mean, reference.running_mean) and torch.allclose(bn.running_var, reference.running_var)


def test_clad_views_carry_the_padded_crop_aligned_or_drawn_anew(default_config):
    """With `training.augment.crop_padding`, CLAD's anchor and positive views are padded crops too:
    the positive's the anchor's own window under `positive_view: aligned`, its own otherwise."""
    training = {**default_config["training"], "augment": {"crop_scale": [1.0, 1.0], "hflip": False, "crop_padding": 4}}
    images = torch.randint(1, 256, (16, 12, 12, 3), dtype=torch.uint8)
    aligned = CLAD(9, training, {"positive_view": "aligned"})
    anchors, positives = aligned.augmented_pair(images, images)
    assert torch.equal(anchors, positives) and not torch.allclose(anchors, aligned.augmenter.normalize(images))
    anchors, positives = CLAD(9, training, {}).augmented_pair(images, images)
    assert not torch.equal(anchors, positives)


def test_clad_trains_resumes_and_keeps_its_dictionary(tmp_path, tiny_stores, default_config):
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=2, batch_size=6)
    aligned = {"backgrounds": tiny_stores["only_bg_t"]}
    straight = train(run_config(cfg, "clad_plus", 0), tiny_stores["original"], tmp_path / "a", aligned)
    train(run_config(cfg, "clad_plus", 0), tiny_stores["original"], tmp_path / "b", aligned, stop_after_epochs=1)
    resumed = train(run_config(cfg, "clad_plus", 0), tiny_stores["original"], tmp_path / "b", aligned)
    a, b = torch.load(straight)["state_dict"], torch.load(resumed)["state_dict"]
    assert (a["dictionary.rows"] >= 0).any()
    assert all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="backgrounds"):
        train(run_config(cfg, "clad", 0), tiny_stores["original"], tmp_path / "c")
    with pytest.raises(FileNotFoundError, match="nope.zarr not found"):
        train(run_config(cfg, "clad", 0), tiny_stores["original"], tmp_path / "d", {"backgrounds": tmp_path / "a" / "nope.zarr"})


def test_unknown_method_args_are_rejected(default_config):
    with pytest.raises(ValueError, match="queue"):
        METHODS["clad"](9, default_config["training"], {"queue": 8})


def test_consistency_numbers_on_hand_made_features():
    a = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    b = np.array([[2.0, 0.0], [1.0, 0.0], [-1.0, -1.0]])
    assert feature_similarity(a, b).tolist() == pytest.approx([1.0, 0.0, -1.0])
    assert decision_consistency([0, 1, 2, 3], [0, 1, 0, 0]) == 0.5


def test_corner_crops_take_the_four_corners():
    x = torch.arange(16.0).view(1, 1, 4, 4)
    tl, tr, bl, br = corner_crops(x, 0.5)
    assert tl.flatten().tolist() == [0, 1, 4, 5] and tr.flatten().tolist() == [2, 3, 6, 7]
    assert bl.flatten().tolist() == [8, 9, 12, 13] and br.flatten().tolist() == [10, 11, 14, 15]


def test_smoothgrad_of_a_linear_model_is_its_weight_map():
    w = torch.randn(3, 3, 5, 5, generator=torch.Generator().manual_seed(0))  # (classes, C, H, W)
    model = lambda x: torch.einsum("bchw,kchw->bk", x, w)  # noqa: E731  gradient of class k = w[k]
    x = torch.randn(2, 3, 5, 5)
    sal = smoothgrad(model, x, torch.tensor([2, 0]), samples=4, noise=0.2, generator=torch.Generator())
    assert torch.allclose(sal[0], w[2].abs().sum(0), atol=1e-5) and torch.allclose(sal[1], w[0].abs().sum(0), atol=1e-5)


def test_foreground_share():
    sal = np.zeros((2, 2, 2))
    sal[0, 0, 0], sal[0, 1, 1] = 3.0, 1.0
    sal[1] = 1.0
    masks = np.array([[[1, 0], [0, 0]], [[1, 1], [0, 0]]])
    assert foreground_share(sal, masks).tolist() == pytest.approx([0.75, 0.5])


def test_the_dictionary_enqueues_as_a_per_key_fifo(tmp_path):
    """`NegativeDictionary.push` (every key at once, no host reads) against the plain per-key FIFO it
    implements: random keys, batches larger than a queue, wrap-around, entries marked invalid."""
    from debias_workbench.training.methods.clad import NegativeDictionary

    def fifo_push(d, feats, keys, rows):
        size = d.feats.shape[1]
        for key in torch.unique(keys).tolist():
            f, r = feats[keys == key][-size:], rows[keys == key][-size:]
            slots = (d.ptr[key] + torch.arange(len(f))) % size
            d.feats[key, slots], d.rows[key, slots] = f, r
            d.ptr[key] = (d.ptr[key] + len(f)) % size

    g = torch.Generator().manual_seed(0)
    for trial in range(60):
        n_keys, size = 1 + trial % 4, 1 + trial % 5
        reference, ours = NegativeDictionary(n_keys, size, 3), NegativeDictionary(n_keys, size, 3)
        for m in (0, 3, 2 * size + 1, 7):
            feats, keys = torch.randn(m, 3, generator=g), torch.randint(0, n_keys, (m,), generator=g)
            rows, valid = torch.randint(0, 99, (m,), generator=g), torch.rand(m, generator=g) < 0.8
            fifo_push(reference, feats[valid], keys[valid], rows[valid])
            ours.push(feats, keys, rows, valid=valid)
            assert torch.equal(reference.feats, ours.feats) and torch.equal(reference.rows, ours.rows)
            assert torch.equal(reference.ptr, ours.ptr)
