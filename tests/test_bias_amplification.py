"""LfF, BiasEnsemble and Park et al.'s pieces against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from training.bias_amplification import (BNScore, LossEMA, RowFlags, bias_aligned, bn_candidates, class_activation_map,
                                         gce_loss, ie_weight, lff_weight)


def test_gce_is_one_minus_p_to_the_q_over_q():
    logits = torch.tensor([[math.log(3.0), 0.0], [0.0, 0.0]])  # p = (3/4, 1/4) and (1/2, 1/2)
    loss = gce_loss(logits, torch.tensor([0, 1]), q=0.7)
    assert loss.tolist() == pytest.approx([(1 - 0.75 ** 0.7) / 0.7, (1 - 0.5 ** 0.7) / 0.7])
    # its gradient is p_y^q times the CE gradient
    x = logits.clone().requires_grad_(True)
    gce_loss(x[:1], torch.tensor([0]), 0.7).sum().backward()
    y = logits.clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(y[:1], torch.tensor([0])).backward()
    assert torch.allclose(x.grad[0], 0.75 ** 0.7 * y.grad[0])


def test_lff_weight_and_the_class_normalised_ema():
    labels = torch.tensor([0, 0, 1])
    ema = LossEMA(labels, num_classes=2, alpha=0.7)
    ema.update(torch.tensor([0, 2]), torch.tensor([2.0, 1.0]))   # first sight: taken as is
    ema.update(torch.tensor([0, 1]), torch.tensor([1.0, 4.0]))   # row 0: 0.7 * 2 + 0.3 * 1
    assert ema.ema.tolist() == pytest.approx([1.7, 4.0, 1.0])
    assert ema.normalized(torch.tensor([0, 1, 2])).tolist() == pytest.approx([1.7 / 4.0, 1.0, 1.0])
    assert lff_weight(torch.tensor([3.0, 0.0]), torch.tensor([1.0, 2.0])).tolist() == pytest.approx([0.75, 0.0])


def test_committee_sets_on_a_hand_made_committee():
    # 5 members x 4 samples: p of the true class
    p = torch.tensor([[0.995, 0.995, 0.2, 0.999],
                      [0.999, 0.98, 0.1, 0.999],
                      [0.996, 0.995, 0.3, 0.5],
                      [0.5, 0.999, 0.2, 0.4],
                      [0.1, 0.2, 0.995, 0.3]])
    assert bias_aligned(p, 0.99).tolist() == [True, True, False, False]   # 3, 3, 1, 2 confident members
    wrong = p < 0.5
    assert bn_candidates(wrong).tolist() == [False, False, True, False]  # 1, 1, 4, 2 members wrong


def test_bn_score_follows_equations_1_to_3():
    score = BNScore(3, alpha_l=0.5, alpha_s=0.5, t1=2)
    history = [(0, [0, 1], [2.0, 1.0]),   # before T1: l only
               (1, [0, 2], [4.0, 3.0]),
               (2, [0, 1], [1.0, 3.0]),   # T1: l_ref <- l before the update (row 0: 3, row 1: 1)
               (3, [0, 1, 2], [1.0, 1.0, 1.0])]
    for t, index, ce in history:
        score.update(torch.tensor(index), torch.tensor(ce), t)
    # row 0: l = 2, 3, 2, 1.5; ref 3; s = 0.5 (2 - 3) = -0.5, then 0.5 (1.5 - 3) + 0.5 (-0.5) = -1.0
    # row 1: l = 1, 2, 1.5; ref 1; s = 0.5 (2 - 1) = 0.5, then 0.5 (1.5 - 1) + 0.25 = 0.5
    # row 2: l = 3, 2; ref (first drawn at t >= T1: t = 3) 3; s = 0.5 (2 - 3) = -0.5
    assert score.loss.tolist() == pytest.approx([1.5, 1.5, 2.0])
    assert score.ref.tolist() == pytest.approx([3.0, 1.0, 3.0])
    assert score.score.tolist() == pytest.approx([-1.0, 0.5, -0.5])
    candidates = torch.tensor([True, True, False])
    assert score.bias_negative(candidates).tolist() == [False, True, False]


def test_grad_cam_of_gap_and_linear_is_the_class_activation_map():
    z = torch.rand(2, 3, 4, 4, requires_grad=True)
    head = torch.nn.Linear(3, 5)
    labels = torch.tensor([1, 4])
    logits = head(z.mean((2, 3)))
    grads = torch.autograd.grad(logits.gather(1, labels[:, None]).sum(), z)[0]       # (B, c, h, w)
    grad_cam = torch.relu((grads.mean((2, 3), keepdim=True) * z).sum(1))              # Selvaraju et al.
    ours = class_activation_map(z.detach(), head.weight.detach(), labels)
    assert torch.allclose(ours / 16, grad_cam.detach(), atol=1e-6)


def test_ie_weight_on_a_hand_made_feature_map():
    # two channels, 1 x 2 positions each
    z = torch.tensor([[[[1.0, 0.0]], [[0.0, 2.0]]]])        # positions n0 = (1, 0), n1 = (0, 2)
    z_bn = torch.tensor([[[[2.0, 0.0]], [[0.0, 1.0]]]])     # positions i0 = (2, 0), i1 = (0, 1)
    # dot products: n0.i0 = 2, n0.i1 = 0, n1.i0 = 0, n1.i1 = 2 -> i* = (0, 1), max = 2, c = (1, 1)
    cam = torch.tensor([[[1.0, 0.25]]])                     # E normalised: (1, 0.25)
    cam_bn = torch.tensor([[[0.5, 1.0]]])                   # E_bn normalised: (0.5, 1)
    tau = 2.0
    r = [(2 * 0.5 / (0.5 + 1.0)) ** tau, (2 * 1.0 / (1.0 + 0.25)) ** tau]   # (0.444, 2.56)
    ie = ie_weight(z, z_bn, cam, cam_bn, tau)
    assert ie.shape == (1, 1, 2)
    assert ie.flatten().tolist() == pytest.approx([max(1.0 * r[0], 1.0), max(1.0 * r[1], 1.0)])
    assert ie.flatten().tolist() == pytest.approx([1.0, 2.56])


def _run(default_config, method: str, **method_args):
    from workbench.config import resolve_config
    from workbench.slices import run_config

    cfg = resolve_config(default_config)
    cfg["experiments"]["amp"] = {"method": method, "dataset": "in9", "train_variant": "original", "label": method,
                                 "method_args": method_args}
    run = run_config(cfg, "amp", 0)
    run["training"].update(batch_size=6, epochs=2, arch="small_cnn", small_cnn_channels=[8, 8])
    return run


def test_intrinsic_feature_enhancement_trains_resumes_and_loads(tiny_stores, default_config, tmp_path):
    """Committee, BN score and guidance run through the trainer; a run killed after its first
    epoch resumes to the same weights and per-row state; model.pt loads into a fresh method."""
    import json

    from training.build import build_method
    from training.evaluation import load_trained
    from training.trainer import train

    run = _run(default_config, "intrinsic_feature_enhancement", committee_size=3, committee_steps=4, t1=1, t2=2,
               confidence=0.5)
    straight = torch.load(train(run, tiny_stores["original"], tmp_path / "a"), weights_only=False)
    train(run, tiny_stores["original"], tmp_path / "b", stop_after_epochs=1)
    resumed = torch.load(train(run, tiny_stores["original"], tmp_path / "b"), weights_only=False)
    for key, value in straight["state_dict"].items():
        assert torch.equal(value, resumed["state_dict"][key]), key
    n = len(straight["state_dict"]["flags.conflicting"])
    assert n == 18 and straight["state_dict"]["bn_score.score"].shape == (n,)
    assert int(straight["state_dict"]["iteration"]) == 2 * (n // 6)
    rows = [json.loads(line) for line in (tmp_path / "a" / "train_metrics.jsonl").read_text().splitlines()]
    metrics = {r["metric"] for r in rows}
    assert {"aligned_set_precision", "candidate_set_recall", "loss_guide_cls", "bn_kept_conflicting_percent"} <= metrics
    assert all(np.isfinite(r["value"]) for r in rows)
    method, _ = load_trained(tmp_path / "a" / "model.pt", torch.device("cpu"))
    assert method.predict(torch.rand(2, 3, 32, 32)).shape == (2, 9)
    fresh = build_method(run, 9, torch.device("cpu"))
    assert fresh.bn_score.score.shape == (0,)  # sized by setup or by loading


def test_biased_model_skips_a_batch_without_aligned_samples(default_config, tiny_stores):
    from training.build import build_method

    method = build_method(_run(default_config, "lff_be"), 9, torch.device("cpu"))
    method.flags = RowFlags(conflicting=torch.zeros(4), aligned=torch.tensor([False, False, True, True]),
                            candidates=torch.zeros(4))
    logits = torch.randn(2, 9, requires_grad=True)
    loss = method.biased_loss(logits, torch.tensor([1, 2]), torch.tensor([0, 1]))
    assert loss.item() == 0.0 and torch.isfinite(loss)
    loss.backward()
    assert torch.equal(logits.grad, torch.zeros_like(logits))
    both = method.biased_loss(logits, torch.tensor([1, 2]), torch.tensor([2, 3]))
    assert torch.isclose(both, torch.nn.functional.cross_entropy(logits, torch.tensor([1, 2])))
