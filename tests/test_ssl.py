"""Non-semantic negatives (Ge et al. 2021): the MoCo and BYOL losses against per-sample
computations, the patch negatives' geometry, negatives without gradient and never enqueued,
negatives in their query view's colours (Sec. 3.3), MoCo's shuffled batch norm, and a MoCo-v2
run with its linear probe (on every training row) through the trainer."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .conftest import debug_batch


def test_moco_nce_matches_a_per_sample_computation():
    from debias_workbench.training.losses import moco_nce

    g = torch.Generator().manual_seed(0)
    q, k, ns = (torch.randn(5, 8, generator=g) for _ in range(3))
    queue = torch.randn(7, 8, generator=g)
    unit = lambda v: v / v.norm()
    for alpha, with_ns in ((1.0, False), (2.0, True), (3.0, True)):
        total = 0.0
        for i in range(5):
            pos = math.exp(float(unit(q[i]) @ unit(k[i])) / 0.2)
            denom = pos + sum(math.exp(float(unit(q[i]) @ unit(n)) / 0.2) for n in queue)
            if with_ns:
                denom += math.exp(alpha * float(unit(q[i]) @ unit(ns[i])) / 0.2)
            total += -math.log(pos / denom)
        got = moco_nce(q, k, queue, 0.2, ns if with_ns else None, alpha)
        assert float(got) == pytest.approx(total / 5, rel=1e-5)


def test_byol_loss_matches_equation_2_per_sample():
    from debias_workbench.training.losses import byol_loss

    g = torch.Generator().manual_seed(1)
    p, z, ns = (torch.randn(4, 6, generator=g) for _ in range(3))
    unit = lambda v: v / v.norm()
    plain = sum(float((unit(p[i]) - unit(z[i])).pow(2).sum()) for i in range(4)) / 4
    assert float(byol_loss(p, z)) == pytest.approx(plain, rel=1e-5)
    alpha = 0.05
    with_ns = sum(float((unit(p[i]) - unit(z[i])).pow(2).sum()) - alpha * float((unit(p[i]) - unit(ns[i])).pow(2).sum())
                  for i in range(4)) / 4
    assert float(byol_loss(p, z, ns, alpha)) == pytest.approx(with_ns, rel=1e-5)
    # the paper's expansion: 2 - 2 alpha - 2 p.z + 2 alpha p.z_ns
    expansion = sum(2 - 2 * alpha - 2 * float(unit(p[i]) @ unit(z[i])) + 2 * alpha * float(unit(p[i]) @ unit(ns[i]))
                    for i in range(4)) / 4
    assert float(byol_loss(p, z, ns, alpha)) == pytest.approx(expansion, rel=1e-5)


@pytest.mark.parametrize("size,d", [(32, 5), (32, 8), (224, 72), (224, 16), (64, 30)])
def test_patch_negative_tiles_non_overlapping_patches_from_inside_the_view(size, d):
    from debias_workbench.training.negatives import draw_tilings, tile, tiling_map

    g = torch.Generator().manual_seed(size * 100 + d)
    views = torch.randn(2, 3, size, size, generator=g)
    tilings = draw_tilings(2, size, g, (d, d))
    negatives = tile(views, tiling_map(tilings))
    tiles, cells = math.ceil(size / d), size // d
    assert negatives.shape == views.shape and negatives.is_contiguous(memory_format=torch.channels_last)
    for view, negative, sources in zip(views, negatives, tilings.sources()):
        sources = sources[:tiles ** 2]
        assert (sources >= 0).all() and (sources + d <= size).all()      # every patch lies inside the view
        first_pass = [tuple(s) for s in sources[:cells ** 2].tolist()]
        assert len(set(first_pass)) == len(first_pass)                    # no cell twice before all are used
        for (y1, x1) in set(first_pass):                                  # distinct patches never overlap
            for (y2, x2) in set(first_pass) - {(y1, x1)}:
                assert abs(y1 - y2) >= d or abs(x1 - x2) >= d
        # the tiling, cropped at its top-left: every pixel is the pixel of its tile's source patch
        for t, (y, x) in enumerate(sources.tolist()):
            ty, tx = divmod(t, tiles)
            block = negative[:, ty * d:(ty + 1) * d, tx * d:(tx + 1) * d]
            assert torch.equal(block, view[:, y:y + block.shape[1], x:x + block.shape[2]])


def test_patch_negative_of_a_dividing_size_is_a_permutation_of_the_cells():
    from debias_workbench.training.negatives import draw_tilings, tile, tiling_map

    view = torch.arange(3 * 32 * 32, dtype=torch.int32).reshape(1, 3, 32, 32)
    tilings = draw_tilings(1, 32, torch.Generator().manual_seed(3), (8, 8))
    negative = tile(view, tiling_map(tilings))
    assert sorted(map(tuple, tilings.sources()[0].tolist())) == [(y, x) for y in range(0, 32, 8) for x in range(0, 32, 8)]
    assert sorted(negative.flatten().tolist()) == sorted(view.flatten().tolist())
    assert not torch.equal(negative, view)


def test_patch_sizes_are_the_papers_range_inclusive_drawn_per_view():
    """d ~ U(16, 72) at 224 px, both ends included (the authors' random.randint), scaled with the side."""
    from debias_workbench.training.negatives import draw_tilings, patch_negatives, patch_size_range

    assert patch_size_range(224) == (16, 72) and patch_size_range(32) == (2, 10) and patch_size_range(112) == (8, 36)
    d = draw_tilings(2000, 224, torch.Generator().manual_seed(0)).d
    assert int(d.min()) == 16 and int(d.max()) == 72 and len(d.unique()) == 57
    views = torch.randn(6, 3, 32, 32)
    a = patch_negatives(views, torch.Generator().manual_seed(0))
    assert a.shape == views.shape and torch.equal(a, patch_negatives(views, torch.Generator().manual_seed(0)))
    assert not torch.equal(a, patch_negatives(views, torch.Generator().manual_seed(1)))


def ssl_method(name: str, default_config, batch_size: int = 6, training: dict | None = None, **method_args):
    """A freshly built `name` for batches of `batch_size` (MoCo: queue 16; shuffled BN in 2 splits where the
    default 8 does not divide the batch)."""
    from debias_workbench.training.build import build_method
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    cfg = resolve_config(default_config)
    moco = {"queue_size": 16, **({"bn_splits": 2} if batch_size % 8 else {})} if name.startswith("moco") else {}
    cfg["experiments"]["probe"] = {"method": name, "dataset": "in9", "train_variant": "original", "label": name,
                                   "method_args": {**moco, **method_args}}
    run = run_config(cfg, "probe", 0)
    run["training"].update(batch_size=batch_size, **(training or {}))
    return build_method(run, 9, torch.device("cpu"))


@pytest.mark.parametrize("name,args", [("moco_v2", {"negative": "patch", "alpha": 2.0}),
                                       ("moco_v2_texture", {"alpha": 2.0}),
                                       ("byol", {"negative": "patch", "alpha": 0.05})])
def test_negatives_get_no_gradient_and_are_never_enqueued(name, args, tiny_stores, default_config, monkeypatch):
    from debias_workbench.training.methods import ssl

    method = ssl_method(name, default_config, **args)
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]})
    seen = {}
    loss_fn = "moco_nce" if name.startswith("moco") else "byol_loss"
    original = getattr(ssl, loss_fn)

    def spy(*a, **kw):
        seen["ns"] = a[4] if loss_fn == "moco_nce" else a[2]
        if loss_fn == "moco_nce":
            seen["k"] = a[1]
        return original(*a, **kw)

    monkeypatch.setattr(ssl, loss_fn, spy)
    stats = method.update(batch)
    assert torch.isfinite(torch.as_tensor(stats["loss"]))
    assert seen["ns"] is not None and not seen["ns"].requires_grad and seen["ns"].grad_fn is None
    assert all(p.grad is None for p in method.parameters() if not p.requires_grad)
    if loss_fn == "moco_nce":  # exactly the B keys were enqueued, and no negative
        k = F.normalize(seen["k"].float(), dim=1)
        assert int(method.queue_ptr) == len(k)
        assert torch.allclose(method.queue[:len(k)], k, atol=1e-6)
        ns = F.normalize(seen["ns"].float(), dim=1)
        assert not any(torch.allclose(row, n, atol=1e-4) for row in method.queue for n in ns)


def test_the_texture_negative_is_the_aligned_in9_texture_image_in_the_query_view(tiny_stores, default_config):
    method = ssl_method("moco_v2_texture", default_config)
    assert method.aligned_variants == {"textures": "texture"}
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]})
    view = method.views.sample(6, 32, torch.Generator().manual_seed(0))
    query = method.views.apply(batch["images"], view)
    assert torch.allclose(method.negative_inputs(batch, query, view), method.views.apply(batch["textures"], view))
    with pytest.raises(ValueError, match="moco_v2_texture"):
        ssl_method("moco_v2", default_config, negative="texture")


def seen_by_the_encoders(method, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(query views, non-semantic negatives) that one `update` feeds to the encoders, in [0, 1]
    (B, 3, H, W) each (BYOL: both views, 2B rows)."""
    seen = {}
    conv = next(m for m in method.network.modules() if isinstance(m, torch.nn.Conv2d))
    hook = conv.register_forward_pre_hook(lambda module, args: seen.setdefault("query", args[0].detach().clone()))
    negatives = method.negative_inputs
    method.negative_inputs = lambda *args: seen.setdefault("negative", negatives(*args))
    method.update(batch)
    hook.remove()
    unit = lambda x: x.float() * method.views.std + method.views.mean  # noqa: E731
    return unit(seen["query"]), unit(seen["negative"])


NEGATIVE_METHODS = [("moco_v2", {"negative": "patch"}), ("moco_v2_texture", {}),
                    ("byol", {"negative": "patch", "alpha": 0.05})]


@pytest.mark.parametrize("name,args", [m for m in NEGATIVE_METHODS if m[0] != "moco_v2_texture"])
def test_fidelity_patch_negatives_are_tiled_from_the_augmented_query_view(name, args, tiny_stores, default_config):
    """Ge et al.'s loader tiles the augmented query itself (moco/loader.py:64-66, `t = nonsem_transform(q)`),
    its crop (0.2-1) included: every pixel of a negative is a pixel of its own query view (BYOL: of
    each of the two views), and the negative is no copy of that view."""
    method = ssl_method(name, default_config, batch_size=8, **args)
    query, negative = seen_by_the_encoders(method, debug_batch(method, tiny_stores, batch_size=8))
    assert negative.shape == query.shape
    for q, n in zip(query, negative):
        q_pixels, n_pixels = q.flatten(1).T, n.flatten(1).T               # (H W, 3) each
        assert (n_pixels[:, None] == q_pixels[None]).all(2).any(1).all()
        assert not torch.equal(n, q)


@pytest.mark.parametrize("name,args", NEGATIVE_METHODS)
def test_a_negative_is_grey_exactly_when_its_query_view_is(name, args, tiny_stores, default_config):
    """Sec. 3.3: the negative's colours are its query's; with grey-scale at p = 0.5, the negative
    of a colourful image is grey exactly where the query view (BYOL: each of the two) is."""
    method = ssl_method(name, default_config, batch_size=16, **args)
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]}, batch_size=16)
    method.views.p_gray = 0.5
    query, negative = seen_by_the_encoders(method, batch)
    grey = lambda x: (x.amax(1) - x.amin(1)).flatten(1).amax(1) < 1e-4  # noqa: E731
    assert not grey(batch["images"].permute(0, 3, 1, 2).float()).any()   # colourful sources
    assert 0 < int(grey(query).sum()) < len(query)                       # both cases occur
    assert negative.shape == query.shape and torch.equal(grey(negative), grey(query))


@pytest.mark.parametrize("name,args", NEGATIVE_METHODS)
def test_the_negatives_channel_means_follow_the_query_views_jitter(name, args, tiny_stores, default_config):
    """One image repeated, so its query views differ only by their augmentation; with brightness
    jitter at p = 1 (no grey-scale), each channel's mean of the negative rises and falls with that
    of its query view. The texture is flat, so that the crop its view shares changes nothing."""
    method = ssl_method(name, default_config, batch_size=16, **args)
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]}, batch_size=16)
    batch = {k: v[:1].expand(16, *v.shape[1:]).clone() for k, v in batch.items()}
    if "textures" in batch:
        batch["textures"][:] = torch.tensor([100, 70, 40], dtype=torch.uint8)
    method.views.p_jitter, method.views.jitter, method.views.p_gray = 1.0, (0.8, 0.0, 0.0, 0.0), 0.0
    query, negative = seen_by_the_encoders(method, batch)
    q, n = query.mean((2, 3)), negative.mean((2, 3))                     # (B, 3) channel means
    for c in range(3):
        assert float(torch.corrcoef(torch.stack([q[:, c], n[:, c]]))[0, 1]) > 0.9


def test_shuffled_bn_keys_are_a_per_sub_batch_normalisation_of_the_permuted_batch(default_config):
    """He et al. Sec. 3.3 as the one-GPU demo emulates it: the keys equal the key encoder run on a
    permuted batch whose BN statistics are those of each sub-batch (blocks of consecutive rows of
    the permutation), then unpermuted; they differ from the keys of BN over the whole batch."""
    method = ssl_method("moco_v2", default_config, batch_size=8, training={"small_cnn_channels": [4]},
                        bn_splits=4)
    method.train()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 3, 6, 6, generator=g)
    conv, bn = (m for m in method.key_network.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.BatchNorm2d)))
    bn.weight.data.uniform_(0.5, 1.5, generator=g)                      # BN affine away from (1, 0)
    bn.bias.data.uniform_(-0.5, 0.5, generator=g)
    torch.nn.init.eye_(method.key_projector[0].weight)                   # the head's ReLU passes the features
    torch.nn.init.zeros_(method.key_projector[0].bias)
    method.generator.manual_seed(7)
    running = bn.running_mean.clone(), bn.running_var.clone()
    keys = method.shuffled_key(x)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(7))
    h = conv(x[perm])                                                    # (8, 4, 6, 6)
    normed = torch.empty_like(h)
    for j in range(4):                                                   # sub-batch j: rows 2 j, 2 j + 1
        rows = h[2 * j:2 * j + 2]
        mean, var = rows.mean((0, 2, 3), keepdim=True), rows.var((0, 2, 3), unbiased=False, keepdim=True)
        normed[2 * j:2 * j + 2] = (rows - mean) / torch.sqrt(var + bn.eps) * bn.weight.view(1, 4, 1, 1) + bn.bias.view(1, 4, 1, 1)
    by_hand = method.key_projector(torch.relu(normed).mean((2, 3)))[torch.argsort(perm)]
    assert torch.allclose(keys, by_hand, atol=1e-5)
    sub_var = torch.stack([h[2 * j:2 * j + 2].var((0, 2, 3)) for j in range(4)]).mean(0)  # running: the mean update
    assert torch.allclose(bn.running_mean, 0.9 * running[0] + 0.1 * h.mean((0, 2, 3)), atol=1e-6)
    assert torch.allclose(bn.running_var, 0.9 * running[1] + 0.1 * sub_var, atol=1e-6)
    whole = ssl_method("moco_v2", default_config, batch_size=8, training={"small_cnn_channels": [4]},
                       shuffle_bn=False)
    whole.load_state_dict(method.state_dict())                           # the same state dict either way
    method.eval(), whole.eval()                                          # eval: the running statistics
    assert torch.allclose(method.key(x), whole.key(x), atol=1e-6)
    assert torch.allclose(method.predict(x), whole.predict(x), atol=1e-6)
    whole.train()
    assert not torch.allclose(keys, whole.shuffled_key(x), atol=1e-3)   # BN over the whole key batch differs


def test_both_encoders_split_their_batch_norm_as_the_one_gpu_demo(default_config):
    """The query encoder's BN is per sub-batch too (the demo's ModelBase; MoCo's per-GPU BN): a block
    of query rows is normalised together, so the query of image i shares about 1/s of its BN batch
    with its key's sub-batch of the permuted batch."""
    from debias_workbench.training.methods.split_batch_norm import SplitBatchNorm2d

    split = ssl_method("moco_v2", default_config, batch_size=8, bn_splits=4)
    for encoder in (split.network, split.key_network):
        bns = [m for m in encoder.modules() if isinstance(m, torch.nn.BatchNorm2d)]
        assert bns and all(isinstance(m, SplitBatchNorm2d) and m.splits == 4 for m in bns)
    whole = ssl_method("moco_v2", default_config, batch_size=8, shuffle_bn=False)
    assert not any(isinstance(m, SplitBatchNorm2d) for m in whole.modules())
    assert split.args["probe_batch_size"] == 128   # the authors' README (main_lincls --batch-size 128)


def test_shuffled_bn_needs_a_batch_size_that_its_splits_divide(default_config):
    with pytest.raises(ValueError, match="batch_size 6 is not a multiple"):
        ssl_method("moco_v2", default_config, batch_size=6, bn_splits=4)
    assert ssl_method("moco_v2", default_config, batch_size=6, bn_splits=4, shuffle_bn=False) is not None


def test_the_linear_probe_fits_every_training_row(tiny_stores, default_config, monkeypatch):
    """The trainer's loader drops the last partial batch; the probe must still see every row once."""
    from debias_workbench.training.data import ZarrBatches

    method = ssl_method("moco_v2", default_config, batch_size=8, probe_epochs=1, probe_milestones=[1])
    batches = ZarrBatches(tiny_stores["original"], "train", 8, shuffle=True, drop_last=True)
    assert batches.n % 8 and sum(len(b["index"]) for b in batches.epoch(0)) < batches.n   # rows left out
    rows = []
    features = method.features
    monkeypatch.setattr(method, "features", lambda x: rows.append(len(x)) or features(x))
    method.finish(batches)
    assert sum(rows) == batches.n


def test_the_augmented_probe_sees_fresh_crops_every_epoch(tiny_stores, default_config, monkeypatch):
    """`probe_augment` (the authors' main_lincls.py): each of the probe's epochs passes the training loader's
    batches through the frozen backbone as new crop-and-flip views (the cached probe passes every row once,
    unaugmented); seeded, so two probes of one model end alike, and it fits another head than the cached probe."""
    from debias_workbench.training.data import ZarrBatches

    batches = ZarrBatches(tiny_stores["original"], "train", 8, shuffle=True, drop_last=True, name="probe")
    heads, passes = [], []
    for augment in (True, True, False):
        torch.manual_seed(0)
        method = ssl_method("moco_v2", default_config, batch_size=8, probe_epochs=3, probe_milestones=[2],
                            probe_augment=augment)
        seen = []
        features = method.features
        monkeypatch.setattr(method, "features", lambda x, seen=seen, f=features: seen.append(x.clone()) or f(x))
        stats = method.finish(batches)
        assert all(math.isfinite(v) for v in stats.values())
        heads.append(method.network.head.weight.detach().clone())
        passes.append(seen)
    augmented, cached = passes[0], passes[2]
    per_epoch = len(batches)
    assert len(augmented) == len(cached) + 3 * per_epoch           # the cached pass, then 3 epochs of views
    views = augmented[len(cached):]
    assert not torch.allclose(views[0], views[per_epoch])           # another view in the next epoch
    assert torch.equal(heads[0], heads[1]) and not torch.allclose(heads[0], heads[2])


@pytest.mark.parametrize("lr, fits", [(1e4, False), (0.5, True)])
def test_a_probe_that_fits_worse_than_the_class_shares_is_called_so(lr, fits, tiny_stores, default_config, capsys):
    """The class-prior loss is -mean(log share of each row's class); a probe whose lr overshoots ends
    above it, is named in the log, and the report says so (`papers.ssl_negatives.tables._probe_fit`)."""
    from debias_workbench.report.document import Document
    from debias_workbench.papers.ssl_negatives.tables import _probe_fit
    from debias_workbench.training.data import ZarrBatches

    method = ssl_method("moco_v2", default_config, batch_size=8, probe_epochs=5, probe_milestones=[4], probe_lr=lr)
    batches = ZarrBatches(tiny_stores["original"], "train", 8, shuffle=True, drop_last=True)
    stats = method.finish(batches)
    labels = torch.from_numpy(batches.column("labels"))
    shares = torch.bincount(labels).float() / len(labels)
    assert stats["probe_prior_loss"] == pytest.approx(float(-shares[labels].log().mean()), rel=1e-6)
    assert (stats["probe_loss"] < stats["probe_prior_loss"]) == fits
    assert ("fits its training rows no better than the class shares" in capsys.readouterr().out) != fits
    doc = Document("report")
    rows = [{"kind": "train", "experiment": "moco", "seed": 0, "metric": k, "value": v} for k, v in stats.items()]
    _probe_fit(doc, [{"experiment": "moco", "label": "MoCo-v2"}], rows, 100 / 9)
    assert ("Probe not fitted:** MoCo-v2 (seed 0)" in doc.markdown()) != fits
    # a run trained before the prior loss was recorded: flagged only at or above log(classes)
    old = Document("report")
    _probe_fit(old, [{"experiment": "moco", "label": "MoCo-v2"}],
               [r for r in rows if r["metric"] != "probe_prior_loss"], 100 / 9)
    assert ("Probe not fitted" in old.markdown()) == (stats["probe_loss"] >= math.log(9))


def test_moco_v2_trains_and_its_linear_probe_is_the_head(tiny_stores, default_config, tmp_path):
    from debias_workbench.training.evaluation import accuracy, predict_store
    from debias_workbench.training.trainer import train
    from debias_workbench.workflow.config import resolve_config
    from debias_workbench.workflow.slices import run_config

    cfg = resolve_config(default_config)
    cfg["experiments"]["moco"] = {"method": "moco_v2", "dataset": "in9", "train_variant": "original", "label": "MoCo",
                                  "method_args": {"queue_size": 12, "negative": "patch", "probe_epochs": 30,
                                                  "probe_milestones": [20], "probe_lr": 1.0, "bn_splits": 3}}
    run = run_config(cfg, "moco", 0)
    run["training"].update(batch_size=6, epochs=2)
    a = torch.load(train(run, tiny_stores["original"], tmp_path / "a"), weights_only=False)
    b = torch.load(train(run, tiny_stores["original"], tmp_path / "b"), weights_only=False)
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])  # deterministic
    rows = [__import__("json").loads(line) for line in (tmp_path / "a" / "train_metrics.jsonl").read_text().splitlines()]
    probe = {r["metric"]: r["value"] for r in rows if r["metric"].startswith("probe_")}
    assert set(probe) == {"probe_loss", "probe_train_accuracy", "probe_prior_loss"}
    assert probe["probe_train_accuracy"] > 100 / 9 and probe["probe_loss"] < probe["probe_prior_loss"]
    assert any(r["metric"] == "sim_nonsemantic" for r in rows)
    from debias_workbench.training.build import build_method

    method = build_method(run, 9, torch.device("cpu"))
    method.load_state_dict(a["state_dict"])
    method.eval()
    pred = predict_store(lambda x: method.predict(x).argmax(1), tiny_stores["original"], "train", 64,
                         method.augmenter, torch.device("cpu"))
    assert accuracy(pred) > 100 / 9  # the probe fits the (tiny) training split above chance


def _shuffle_across_two_processes(rank: int, init_file: str) -> None:
    """One of two gloo processes: the global batch of both is keyed in sub-batches of rank 0's
    permutation and every process gets its own rows back."""
    import torch.distributed as dist

    from debias_workbench.training.methods.ssl import shuffled_across_processes

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    everything = torch.arange(16.0).view(8, 2)                            # rows 0-3 on rank 0, 4-7 on rank 1
    x = everything[rank * 4:(rank + 1) * 4]
    own = torch.Generator().manual_seed(rank)                             # the ranks' own draws differ
    assert torch.equal(shuffled_across_processes(lambda t: t, x, own), x)
    centred = shuffled_across_processes(lambda t: t - t.mean(0), x, torch.Generator().manual_seed(3))
    expected = torch.empty_like(everything)
    for rows in torch.randperm(8, generator=torch.Generator().manual_seed(3)).view(2, 4):  # each process's sub-batch
        expected[rows] = everything[rows] - everything[rows].mean(0)
    assert torch.equal(centred, expected[rank * 4:(rank + 1) * 4])
    dist.destroy_process_group()


def test_shuffled_bn_across_processes_unshuffles_each_processs_rows(tmp_path):
    """MoCo's multi-GPU shuffle (its builder's _batch_shuffle_ddp): two CPU processes."""
    import torch.multiprocessing as mp

    mp.spawn(_shuffle_across_two_processes, args=(str(tmp_path / "init"),), nprocs=2)


@pytest.mark.parametrize("channels_last", [False, True])
def test_grouped_split_batch_norm_is_the_per_block_one(channels_last):
    """The GPU path (one batch-norm call over the blocks side by side) gives the CPU path's output,
    gradients and running statistics (float32 reduction order aside), in the input's memory format."""
    from debias_workbench.training.methods.split_batch_norm import grouped_batch_norm, per_block_batch_norm

    torch.manual_seed(0)
    x = torch.randn(12, 5, 6, 7) * 3 + 1
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    outs, grads, stats = [], [], []
    for normalise in (per_block_batch_norm, grouped_batch_norm):
        bn = torch.nn.BatchNorm2d(5)
        torch.manual_seed(1)
        with torch.no_grad():
            bn.weight.uniform_(0.5, 2), bn.bias.uniform_(-1, 1), bn.running_var.fill_(2.0)
        xi = x.clone().requires_grad_(True)
        out = normalise(bn, xi, 3, 0.1)
        (out * torch.arange(out.numel()).view_as(out).sin()).sum().backward()
        outs.append(out), grads.append((xi.grad, bn.weight.grad, bn.bias.grad))
        stats.append((bn.running_mean.clone(), bn.running_var.clone()))
        assert out.is_contiguous(memory_format=torch.channels_last) == channels_last
    assert torch.allclose(outs[0], outs[1], atol=1e-5)
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-4)
    for a, b in zip(*stats):
        assert torch.allclose(a, b, atol=1e-6)
    assert not torch.allclose(outs[1], torch.nn.functional.batch_norm(x, None, None, training=True), atol=1e-2)


def test_momentum_update_is_the_per_parameter_rule():
    """target <- m target + (1 - m) online for every parameter, buffers copied: the foreach kernels
    give the per-parameter loop's numbers exactly."""
    from debias_workbench.training.methods.ssl import SelfSupervised

    torch.manual_seed(1)
    online = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(5, 2))
    online(torch.randn(2, 3, 7, 7))  # moves the BN's running statistics away from the target's
    target = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Linear(5, 2))
    expected = [t.detach().clone().mul_(0.99).add_(o.detach(), alpha=1 - 0.99)  # the loop it replaced
                for t, o in zip(target.parameters(), online.parameters())]
    SelfSupervised.momentum_update(online, target, 0.99)
    for got, want in zip(target.parameters(), expected):
        assert torch.equal(got, want)
    for got, want in zip(target.buffers(), online.buffers()):
        assert torch.equal(got, want)


def test_the_similarity_rows_score_every_pair_with_negatives_made_as_in_training(tiny_stores, default_config):
    """Figs. 2-3's rows (`ssl_eval.similarity_rows`, the patch negative tiled from the anchor's view,
    the texture image in it): one per pair over the same images, each a mean cosine similarity
    below 1 (no pair is the anchor itself)."""
    from debias_workbench.training.methods.ssl_eval import PAIRS, similarity_rows

    method = ssl_method("moco_v2_texture", default_config, batch_size=8).eval()
    stores = {"original": tiny_stores["original"], "texture": tiny_stores["stylized"]}
    rows = similarity_rows(method, stores, "val", 8, torch.device("cpu"), {"experiment": "e", "seed": 0})
    assert [r["variant"] for r in rows] == list(PAIRS)
    assert all(-1 <= r["value"] < 1 and r["n"] == rows[0]["n"] > 0 for r in rows)
