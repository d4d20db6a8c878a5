"""Non-semantic negatives (Ge et al. 2021): the MoCo and BYOL losses against per-sample
computations, the patch negatives' geometry, negatives without gradient and never enqueued,
and a MoCo-v2 run with its linear probe through the trainer."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from .conftest import debug_batch


def test_moco_nce_matches_a_per_sample_computation():
    from training.losses import moco_nce

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
    from training.losses import byol_loss

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
def test_patch_negative_tiles_non_overlapping_patches_from_inside_the_image(size, d):
    from training.negatives import patch_negative

    g = torch.Generator().manual_seed(size * 100 + d)
    image = torch.randint(0, 256, (size, size, 3), dtype=torch.uint8, generator=g)
    negative, sources = patch_negative(image, d, g)
    tiles = math.ceil(size / d)
    assert negative.shape == image.shape and len(sources) == tiles ** 2
    assert (sources >= 0).all() and (sources + d <= size).all()          # every patch lies inside the image
    cells = size // d
    first_pass = [tuple(s) for s in sources[:cells ** 2].tolist()]
    assert len(set(first_pass)) == len(first_pass)                        # no cell twice before all are used
    for (y1, x1) in set(first_pass):                                      # distinct patches never overlap
        for (y2, x2) in set(first_pass) - {(y1, x1)}:
            assert abs(y1 - y2) >= d or abs(x1 - x2) >= d
    # the tiling covers the crop: every output pixel is the pixel of its tile's source patch
    for t, (y, x) in enumerate(sources.tolist()):
        ty, tx = divmod(t, tiles)
        block = negative[ty * d:(ty + 1) * d, tx * d:(tx + 1) * d]
        assert torch.equal(block, image[y:y + block.shape[0], x:x + block.shape[1]])


def test_patch_negative_of_a_dividing_size_is_a_permutation_of_the_cells():
    from training.negatives import patch_negative

    image = torch.arange(32 * 32 * 3, dtype=torch.int32).reshape(32, 32, 3)
    negative, sources = patch_negative(image, 8, torch.Generator().manual_seed(3))
    assert sorted(map(tuple, sources.tolist())) == [(y, x) for y in range(0, 32, 8) for x in range(0, 32, 8)]
    assert sorted(negative.flatten().tolist()) == sorted(image.flatten().tolist())
    assert not torch.equal(negative, image)


def test_patch_sizes_scale_the_papers_range_and_are_drawn_per_image():
    from training.negatives import patch_negatives, patch_size_range

    assert patch_size_range(224) == (16, 72) and patch_size_range(32) == (2, 10) and patch_size_range(112) == (8, 36)
    images = torch.randint(0, 256, (6, 32, 32, 3), dtype=torch.uint8)
    a = patch_negatives(images, torch.Generator().manual_seed(0))
    b = patch_negatives(images, torch.Generator().manual_seed(0))
    assert a.shape == images.shape and a.dtype == torch.uint8 and torch.equal(a, b)
    assert not torch.equal(a, patch_negatives(images, torch.Generator().manual_seed(1)))


def ssl_method(name: str, default_config, **method_args):
    from training.build import build_method
    from workbench.config import resolve_config
    from workbench.slices import run_config

    cfg = resolve_config(default_config)
    cfg["experiments"]["probe"] = {"method": name, "dataset": "in9", "train_variant": "original", "label": name,
                                   "method_args": {**({"queue_size": 16} if name.startswith("moco") else {}),
                                                   **method_args}}
    run = run_config(cfg, "probe", 0)
    run["training"].update(batch_size=6)
    return build_method(run, 9, torch.device("cpu"))


@pytest.mark.parametrize("name,args", [("moco_v2", {"negative": "patch", "alpha": 2.0}),
                                       ("moco_v2_texture", {"alpha": 2.0}),
                                       ("byol", {"negative": "patch", "alpha": 0.05})])
def test_negatives_get_no_gradient_and_are_never_enqueued(name, args, tiny_stores, default_config, monkeypatch):
    from training.methods import ssl

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
    assert np.isfinite(stats["loss"])
    assert seen["ns"] is not None and not seen["ns"].requires_grad and seen["ns"].grad_fn is None
    assert all(p.grad is None for p in method.parameters() if not p.requires_grad)
    if loss_fn == "moco_nce":  # exactly the B keys were enqueued, and no negative
        k = F.normalize(seen["k"].float(), dim=1)
        assert int(method.queue_ptr) == len(k)
        assert torch.allclose(method.queue[:len(k)], k, atol=1e-6)
        ns = F.normalize(seen["ns"].float(), dim=1)
        assert not any(torch.allclose(row, n, atol=1e-4) for row in method.queue for n in ns)


def test_the_texture_negative_is_the_aligned_in9_texture_image(tiny_stores, default_config):
    method = ssl_method("moco_v2_texture", default_config)
    assert method.aligned_variants == {"textures": "texture"}
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]})
    assert torch.allclose(method.negative_inputs(batch), method.views.plain(batch["textures"]))
    with pytest.raises(ValueError, match="moco_v2_texture"):
        ssl_method("moco_v2", default_config, negative="texture")


def test_moco_v2_trains_and_its_linear_probe_is_the_head(tiny_stores, default_config, tmp_path):
    from training.evaluation import accuracy, predict_store
    from training.trainer import train
    from workbench.config import resolve_config
    from workbench.slices import run_config

    cfg = resolve_config(default_config)
    cfg["experiments"]["moco"] = {"method": "moco_v2", "dataset": "in9", "train_variant": "original", "label": "MoCo",
                                  "method_args": {"queue_size": 12, "negative": "patch", "probe_epochs": 30,
                                                  "probe_milestones": [20], "probe_lr": 1.0}}
    run = run_config(cfg, "moco", 0)
    run["training"].update(batch_size=6, epochs=2)
    a = torch.load(train(run, tiny_stores["original"], tmp_path / "a"), weights_only=False)
    b = torch.load(train(run, tiny_stores["original"], tmp_path / "b"), weights_only=False)
    assert all(torch.equal(a["state_dict"][k], b["state_dict"][k]) for k in a["state_dict"])  # deterministic
    rows = [__import__("json").loads(line) for line in (tmp_path / "a" / "train_metrics.jsonl").read_text().splitlines()]
    probe = {r["metric"]: r["value"] for r in rows if r["metric"].startswith("probe_")}
    assert set(probe) == {"probe_loss", "probe_train_accuracy"} and probe["probe_train_accuracy"] > 100 / 9
    assert any(r["metric"] == "sim_nonsemantic" for r in rows)
    from training.build import build_method

    method = build_method(run, 9, torch.device("cpu"))
    method.load_state_dict(a["state_dict"])
    method.eval()
    pred = predict_store(lambda x: method.predict(x).argmax(1), tiny_stores["original"], "train", 64,
                         method.augmenter, torch.device("cpu"))
    assert accuracy(pred) > 100 / 9  # the probe fits the (tiny) training split above chance
