"""LfF, BiasEnsemble and Park et al.'s pieces against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from debias_workbench.training.methods import committee
from debias_workbench.training.methods.amplification_parts import (BNScore, LossEMA, RowFlags, bias_aligned, bn_candidates, class_activation_map,
                                         draw_partners, gce_loss, guide_similarity, ie_weight, lff_weight)
from debias_workbench.training.methods.committee import committee_votes


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


def _descent_step(z: torch.Tensor, ie: torch.Tensor, reading: str) -> torch.Tensor:
    """z after one gradient step of size 0.1 on the Eq. 9 distance."""
    z = z.clone().requires_grad_(True)
    guide_similarity(z, ie, reading).sum().backward()
    return (z - 0.1 * z.grad).detach()


def test_eq9_target_reading_moves_z_towards_the_enhanced_features():
    # channel 0 lives where IE = 3 (an under-used intrinsic feature), channel 1 where IE = 1
    z = torch.tensor([[[[1.0, 0.0]], [[0.0, 1.0]]]])                       # (1, 2, 1, 2)
    ie = torch.tensor([[[3.0, 1.0]]])                                      # (1, 1, 2)
    share = lambda v: (v.mean((2, 3)) / v.mean((2, 3)).sum(1, keepdim=True))[0, 0].item()  # noqa: E731
    # target: GAP(z) = (.5, .5) vs GAP(g(z)) = (1.5, .5): channel shares .5 vs .75, L1 .5
    assert guide_similarity(z, ie, "target_shares").item() == pytest.approx(0.5)
    assert share(_descent_step(z, ie, "target_shares")) > share(z)        # channel 0's share grows
    # the literal target: L1 1.0, a step raises channel 0 where it lives and leaves channel 1
    assert guide_similarity(z, ie, "target_raw").item() == pytest.approx(1.0)
    raw = _descent_step(z, ie, "target_raw")
    assert raw[0, 0, 0, 0] > z[0, 0, 0, 0] and raw[0, 1, 0, 1] == z[0, 1, 0, 1]
    # through both sides the distance is GAP(z ⊙ (IE - 1)): the step lowers the enhanced feature
    assert guide_similarity(z, ie, "through_both").item() == pytest.approx(1.0)
    stepped = _descent_step(z, ie, "through_both")
    assert stepped[0, 0, 0, 0] < z[0, 0, 0, 0] and stepped[0, 1, 0, 1] == z[0, 1, 0, 1]
    # bounded: scaling z leaves the shares reading unchanged, the others grow with it
    assert guide_similarity(10 * z, ie, "target_shares").item() == pytest.approx(0.5)
    assert guide_similarity(10 * z, ie, "target_raw").item() == pytest.approx(10.0)
    assert guide_similarity(10 * z, ie, "through_both").item() == pytest.approx(10.0)


def test_partners_share_the_class_and_are_never_the_anchor():
    labels = torch.tensor([0, 0, 0, 1, 1, 2])
    members = torch.tensor([True, True, False, True, False, True])
    y, index = torch.tensor([0, 0, 1, 2, 0]), torch.tensor([0, 1, 3, 5, 2])
    for seed in range(50):
        partner, has = draw_partners(members, labels, y, index, torch.Generator().manual_seed(seed))
        # class 0's members are rows 0 and 1: each takes the other, row 2 takes either;
        # class 1's and class 2's only member is the anchor itself: no partner
        assert has.tolist() == [True, True, False, False, True]
        assert partner[:2].tolist() == [1, 0] and partner[4].item() in (0, 1)
    picks = [draw_partners(members, labels, y, index, torch.Generator().manual_seed(s))[0][4].item() for s in range(200)]
    assert 60 < picks.count(0) < 140  # uniform over the two rows


def _unaugmented(run: dict) -> dict:
    """`run` training without random crops or flips (a committee's scoring then draws no difference)."""
    run["training"]["augment"] = {"crop_scale": [1.0, 1.0], "hflip": False, "crop_padding": 0}
    return run


def test_committee_votes_with_each_members_best_validation_checkpoint(default_config, tiny_stores, monkeypatch):
    """BiasEnsemble scores each member at its best-validation checkpoint: with val accuracies
    10, 50, 20, 30 after steps 1-4, the member of step 2 votes, exactly as a member trained 2 steps
    that votes with its last iterate."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches

    batches = ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True, drop_last=True)
    accuracies = iter([10.0, 50.0, 20.0, 30.0])
    monkeypatch.setattr(committee, "_val_accuracy", lambda method, model, valid, device: next(accuracies))
    four = build_method(_unaugmented(_run(default_config, "lff_be", committee_size=1, committee_steps=4,
                                          committee_valid_every=1)), 9, torch.device("cpu"))
    p4, wrong4, stats = committee_votes(four, batches, torch.device("cpu"))
    assert stats["committee_best_step_mean"] == 2 and stats["committee_valid_accuracy_mean"] == 50.0
    monkeypatch.setattr(committee, "_val_accuracy", lambda method, model, valid, device: 0.0)
    two = build_method(_unaugmented(_run(default_config, "lff_be", committee_size=1, committee_steps=2,
                                         committee_vote="last")), 9, torch.device("cpu"))
    p2, wrong2, _ = committee_votes(two, batches, torch.device("cpu"))
    assert torch.equal(p4, p2) and torch.equal(wrong4, wrong2)


def test_committee_checkpoints_fidelity_after_updates_1_and_501_strictly_better(default_config, tiny_stores,
                                                                                monkeypatch):
    """BiasEnsemble's schedule (learner.py:440, 465): a member is scored at `step % valid_freq == 0`
    of its 0-based steps, i.e. after updates 1, 1 + every, ... and never after its last (1 and 501 of
    1,000); a later checkpoint replaces the kept one only if strictly better (learner.py:364)."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches
    from debias_workbench.training.methods.amplification_parts import checkpoint_steps
    from debias_workbench.training.methods.bias_amplification import LfFBiasEnsemble

    assert checkpoint_steps(1000, 500, "best_valid") == [1, 501] and checkpoint_steps(2, 2, "best_valid") == [1]
    assert checkpoint_steps(150, 150, "last") == [150]
    updates, scored_after = [], []
    step = LfFBiasEnsemble.step
    monkeypatch.setattr(LfFBiasEnsemble, "step", staticmethod(lambda opt, loss: (updates.append(1), step(opt, loss))))
    accuracies = iter([40.0, 40.0, 90.0])   # a tie with the first, then better: but the last never scored
    monkeypatch.setattr(committee, "_val_accuracy",
                        lambda method, model, valid, device: (scored_after.append(len(updates)), next(accuracies))[1])
    method = build_method(_run(default_config, "lff_be", committee_size=1, committee_steps=6, committee_valid_every=2),
                          9, torch.device("cpu"))
    batches = ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True, drop_last=True)
    _, _, stats = committee_votes(method, batches, torch.device("cpu"))
    assert scored_after == [1, 3, 5]
    assert stats["committee_best_step_mean"] == 5 and stats["committee_valid_accuracy_mean"] == 90.0
    scored_after.clear(), updates.clear()
    accuracies = iter([40.0, 40.0, 20.0])
    _, _, stats = committee_votes(method, batches, torch.device("cpu"))
    assert stats["committee_best_step_mean"] == 1   # the tie keeps the earlier checkpoint


def test_committee_scores_p_y_fidelity_through_the_training_transforms(default_config, tiny_stores, monkeypatch):
    """BiasEnsemble computes each member's p_y on its `pretrain_loader`, the training set with its
    training transform (learner.py:66-73, 115-122, 471-478): every training row, in order, goes
    through the method's augmentation once for the vote (besides the members' training batches)."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches

    method = build_method(_run(default_config, "lff_be", committee_size=1, committee_steps=1), 9, torch.device("cpu"))
    scored = []
    augment = method.augment
    monkeypatch.setattr(method, "augment", lambda images: (scored.append(images) if not torch.is_grad_enabled()
                                                           else None, augment(images))[1])
    batches = ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True, drop_last=True)
    committee_votes(method, batches, torch.device("cpu"))
    rows = torch.cat([batch["images"] for batch in batches.in_order()])
    assert scored and torch.equal(torch.cat(scored), rows)


def _guided_losses(default_config, tiny_stores, **method_args) -> dict[str, float]:
    """One guided step (t = T2) of a Park et al. method set up on the tiny store; returns the
    step's statistics and its loss."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches

    method = build_method(_run(default_config, "intrinsic_feature_enhancement", committee_size=1, committee_steps=1,
                               t1=0, t2=0, **method_args), 9, torch.device("cpu"))
    batches = ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True, drop_last=True)
    method.setup(batches)
    method.bn_score.score.fill_(0.5)
    batch = next(iter(batches.epoch(0)))
    x, y, index = method.augment(batch["images"]), batch["labels"], batch["index"]
    z = method.network.feature_map(x)
    w = torch.full((len(y),), 0.5)
    main = (w * torch.nn.functional.cross_entropy(method.network.head(z.mean((2, 3))), y, reduction="none")).mean()
    method.iteration.fill_(method.total_steps * 2)  # lambda_main = 1
    loss, stats = method._guided(x, y, index, z, w, main, int(method.iteration))
    return {**{k: float(v) for k, v in stats.items()}, "loss": loss.item(), "main": main.item()}


def test_a_sample_without_a_partner_gets_no_guidance(default_config, tiny_stores):
    """With an empty partner set nobody has a partner: the loss is lambda_main L_main alone (before,
    L_guide.cls added w CE(f(x)) = L_main a second time)."""
    from debias_workbench.training.methods.bias_amplification import IntrinsicFeatureEnhancement

    empty = IntrinsicFeatureEnhancement._partners
    IntrinsicFeatureEnhancement._partners = lambda self, y, index: (torch.zeros_like(y), torch.zeros_like(y, dtype=torch.bool))
    try:
        out = _guided_losses(default_config, tiny_stores)
    finally:
        IntrinsicFeatureEnhancement._partners = empty
    assert out["partner_fraction"] == 0 and out["loss_guide_cls"] == 0 and out["loss_bn"] == 0
    assert out["loss"] == pytest.approx(out["lambda_main"] * out["main"])


@pytest.mark.parametrize("switches", [{}, {"guide": False}, {"bn_loss": False}, {"score_weight": False},
                                      {"partner_source": "D", "score_weight": False}, {"guide_sim": "through_both"},
                                      {"guide_sim": "target_raw"}])
def test_table3_switches_pick_the_terms_of_eq13(default_config, tiny_stores, switches):
    out = _guided_losses(default_config, tiny_stores, **switches)
    args = {"guide": True, "bn_loss": True, **switches}
    expected = (out["lambda_main"] * out["main"] + (0.1 * out["loss_guide_sim"] + out["loss_guide_cls"]) * args["guide"]
                + out["loss_bn"] * args["bn_loss"])
    assert out["loss"] == pytest.approx(expected, rel=1e-5)
    assert out["partner_fraction"] > 0 and out["loss_bn"] > 0
    weight = 1.0 if switches.get("score_weight") is False else 0.5       # s(x^BN) logged beside the bare distance
    assert out["partner_weight"] == pytest.approx(weight)
    assert out["loss_guide_sim"] == pytest.approx(weight * out["guide_distance"] * out["partner_fraction"], rel=1e-4)
    # s(x^BN) = 0.5 on every row: with score_weight off the weight is 1, doubling L_BN
    with_weight = _guided_losses(default_config, tiny_stores, **{**switches, "score_weight": True})
    if switches.get("score_weight") is False:
        assert out["loss_bn"] == pytest.approx(2 * with_weight["loss_bn"], rel=1e-5)


def _run(default_config, method: str, **method_args):
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

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

    from debias_workbench.training.build import build_method
    from debias_workbench.training.evaluation import load_trained
    from debias_workbench.training.trainer import train

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


def test_a_run_in_iterations_ends_at_its_step_and_resumes(tiny_stores, default_config, tmp_path):
    """`training.iterations` 7 at 3 steps an epoch (18 rows, batch 6): three epochs, the last cut to
    one step, so Park et al.'s iteration counter ends at 7 (and the guidance, T2 = 5, ran); a run
    killed after two epochs resumes to the same weights. A switch past the run's end stops the run
    before it trains, naming the argument (the config check does the same from the config alone)."""
    import json

    from debias_workbench.training.trainer import train

    run = _run(default_config, "intrinsic_feature_enhancement", committee_size=3, committee_steps=4, t1=1, t2=5,
               confidence=0.5)
    run["training"]["iterations"] = 7
    straight = torch.load(train(run, tiny_stores["original"], tmp_path / "a"), weights_only=False)
    assert int(straight["state_dict"]["iteration"]) == 7
    rows = [json.loads(line) for line in (tmp_path / "a" / "train_metrics.jsonl").read_text().splitlines()]
    assert sorted({r["epoch"] for r in rows if r["metric"] == "loss_guide_cls"}) == [1, 2]
    train(run, tiny_stores["original"], tmp_path / "b", stop_after_epochs=2)
    resumed = torch.load(train(run, tiny_stores["original"], tmp_path / "b"), weights_only=False)
    for key, value in straight["state_dict"].items():
        assert torch.equal(value, resumed["state_dict"][key]), key
    run["method_args"]["t2"] = 7
    with pytest.raises(ValueError, match="method_args t2 = 7 is not inside the run's 7 iterations"):
        train(run, tiny_stores["original"], tmp_path / "c")


def test_biased_model_skips_a_batch_without_aligned_samples(default_config, tiny_stores):
    from debias_workbench.training.build import build_method

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


def _train_rows(run_dir) -> list[dict]:
    """A run's metric rows without its timings (epoch_seconds, images_per_second)."""
    import json

    rows = [json.loads(line) for line in (run_dir / "train_metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["metric"] not in ("epoch_seconds", "images_per_second")]


def test_a_committee_from_its_own_job_trains_the_runs_bit_for_bit_as_one_trained_in_their_set_up(
        tiny_stores, default_config, tmp_path):
    """LfF+BE and Park et al. on one store and seed share one committee job (one job config, one file);
    each run reading that file ends with the weights and metric rows of the same run training the
    committee itself in its set-up (the old way), a run resumed from its checkpoint too."""
    from debias_workbench.training.methods.committee_job import build_committee
    from debias_workbench.training.prerequisites import files, run_jobs
    from debias_workbench.training.trainer import train

    common = {"committee_size": 3, "committee_steps": 4, "committee_valid_every": 2, "confidence": 0.5}
    runs = [_run(default_config, "lff_be", **common),
            _run(default_config, "intrinsic_feature_enhancement", t1=1, t2=2, **common)]
    (job,) = run_jobs(runs[0])  # the committee, the one prerequisite of both methods
    assert job.kind.name == "committee" and [j.config for j in run_jobs(runs[1])] == [job.config]
    assert files(tmp_path, runs[0]) == files(tmp_path, runs[1]) == {"committee": tmp_path / job.path}
    path = tmp_path / job.path
    build_committee(job.config, tiny_stores["original"], path)
    for i, run in enumerate(runs):
        alone = tmp_path / f"alone{i}"
        shared = tmp_path / f"shared{i}"
        before = torch.load(train(run, tiny_stores["original"], alone), weights_only=False)["state_dict"]
        given = {"committee": path}
        train(run, tiny_stores["original"], shared, stop_after_epochs=1, prerequisites=given)
        after = torch.load(train(run, tiny_stores["original"], shared, prerequisites=given), weights_only=False)
        assert before.keys() == after["state_dict"].keys()
        for key, value in before.items():
            assert torch.equal(value, after["state_dict"][key]), key
        assert _train_rows(alone) == _train_rows(shared)


def _colour_store(path, n_train: int = 640, n_val: int = 320, conflicting: float = 0.02, seed: int = 0):
    """A stand-in of BiasEnsemble's Colored MNIST, 4 classes at 16 px: each image's background wears its bias colour
    (the bias: strong, learnt first) and its class a faint square in one quadrant (the intrinsic signal). The train
    split has `conflicting` of each class in another class's colour; the val split as the authors' cmnist/<pct>/valid
    (the training's bias degree, DisEnt issue 1) with every conflicting image first, the rest aligned."""
    from debias_workbench.pipeline.datasets.labelled_store import write_labelled_store

    rng = np.random.default_rng(seed)
    colours = np.array([[220, 30, 30], [30, 220, 30], [30, 30, 220], [220, 220, 30]], np.uint8)

    def split(n: int) -> dict:
        labels = np.arange(n) % 4
        bias = labels.copy()
        flip = np.arange(n) < max(1, round(conflicting * n))
        bias[flip] = (labels[flip] + 1 + np.arange(flip.sum()) % 3) % 4
        images = np.repeat(np.repeat(colours[bias][:, None, None], 16, 1), 16, 2).astype(np.int16)
        images += rng.integers(-20, 21, images.shape)
        for i, y in enumerate(labels):
            r, c = divmod(int(y), 2)
            images[i, 8 * r + 2: 8 * r + 6, 8 * c + 2: 8 * c + 6] += 25
        return {"images": images.clip(0, 255).astype(np.uint8), "labels": labels, "bias_labels": bias,
                "ids": np.array([f"{i:05d}" for i in range(n)]), "manifest": {}}

    write_labelled_store(path, "colored_mnist", "conflict_2", {"chunk_images": 64}, seed,
                         {"train": split(n_train), "val": split(n_val)}, ["0", "1", "2", "3"], ["r", "g", "b", "y"])
    return path


def test_fidelity_committee_on_the_authors_validation_composition_votes_bias_only_members(default_config, tmp_path):
    """On a val split of the training's bias degree (BiasEnsemble's cmnist/<pct>/valid), the best-validation vote
    keeps each member's later checkpoint, the one after update 1 + committee_valid_every (BiasEnsemble's 501 of
    1,000), and never its first: the chosen members follow the colour (they get the bias-conflicting val images
    wrong, calling them by their colour) and the bias-aligned set D^A is non-empty and holds no conflicting row.
    That checkpoint is what `committee_vote: last` of 1 + committee_valid_every steps votes with, where a val split
    is independent of the bias (config/park_real_data.yaml's Waterbirds and Colored MNIST rows)."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches
    from debias_workbench.training.evaluation import predict_store
    from debias_workbench.training.methods.amplification_parts import bias_aligned
    store = _colour_store(tmp_path / "stand_in.zarr")
    run = _unaugmented(_run(default_config, "lff_be", committee_size=3, committee_steps=60, committee_valid_every=30))
    run["training"].update(batch_size=32, optimizer={"name": "adam", "lr": 0.03, "weight_decay": 0.0})
    method = build_method(run, 4, torch.device("cpu"))
    batches = ZarrBatches(store, "train", 32, shuffle=True, drop_last=True)
    for k in range(3):
        member, best_step, best_acc = committee.committee_member(method, k, batches, torch.device("cpu"))
        assert best_step == 31 and best_acc > 90.0   # the later checkpoint, never the one after update 1
        member.eval()
        with torch.no_grad():
            val = predict_store(lambda x, m=member: m(x).argmax(1), store, "val", 64, method.augmenter,
                                torch.device("cpu"))
        conflicting = val["bias_labels"] != val["labels"]
        assert conflicting.sum() >= 4 and (val["pred"][conflicting] == val["bias_labels"][conflicting]).all()
    correct_prob, _, stats = committee_votes(method, batches, torch.device("cpu"))
    aligned = bias_aligned(correct_prob, method.args["confidence"]).numpy()
    train_conflicting = np.array(batches.column("bias_labels") != batches.column("labels"))
    assert aligned.sum() > 0.5 * len(aligned) and not (aligned & train_conflicting).any()
    assert stats["committee_best_step_mean"] == 31
