"""Trainer: resume after a kill ends with the same weights; every method runs an update;
evaluation maps 1000-class predictions to IN-9 correctly; the report computes BG-GAP."""

import copy
import json

import pytest
import torch

from debias_workbench.training.evaluation import IN9_SUBCLASS_COUNTS, evaluate_run, in1k_to_in9, mapping_tensor, scoring_batches
from debias_workbench.training.methods import METHODS
from debias_workbench.report.context import accuracy_table
from debias_workbench.training.trainer import train
from debias_workbench.workflow.slices import evaluation_config, imagenet_evaluation_config, run_config

from .conftest import debug_batch, needs_shared


@pytest.fixture
def train_config(default_config):
    cfg = copy.deepcopy(default_config)
    cfg["training"].update(epochs=2, batch_size=6)
    cfg["training"]["schedule"] = {"name": "step", "milestones": [1], "gamma": 0.5}
    return cfg


def test_resume_after_kill_gives_identical_weights(tmp_path, tiny_store, train_config):
    straight = train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "a")
    train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "b", stop_after_epochs=1)  # "killed" after epoch 0
    assert (tmp_path / "b" / "checkpoint.pt").exists() and not (tmp_path / "b" / "model.pt").exists()
    resumed = train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "b")
    assert (tmp_path / "b" / "checkpoint.pt").exists()  # kept until the scoring job: run_files.release_checkpoint
    a, b = torch.load(straight)["state_dict"], torch.load(resumed)["state_dict"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    rows_a = (tmp_path / "a" / "train_metrics.jsonl").read_text().splitlines()
    rows_b = (tmp_path / "b" / "train_metrics.jsonl").read_text().splitlines()
    drop_time = lambda rows: [r for r in map(json.loads, rows) if r["metric"] not in ("epoch_seconds", "images_per_second")]  # noqa: E731
    assert drop_time(rows_a) == drop_time(rows_b)
    assert {json.loads(r)["epoch"] for r in rows_b} == {0, 1}


def test_different_seeds_give_different_models(tmp_path, tiny_store, train_config):
    train_config["training"]["epochs"] = 1
    a = torch.load(train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "a"))["state_dict"]
    b = torch.load(train(run_config(train_config, "base_in9", 1), tiny_store, tmp_path / "b"))["state_dict"]
    assert not torch.equal(a["network.head.weight"], b["network.head.weight"])


def test_fidelity_learned_mixin_pretrains_g_before_all_of_fs_epochs(tmp_path, tiny_store, train_config):
    """As the ReBias authors' `pretrain()` (clovaai/rebias trainer.py:248-266, 384): G's pre-training
    comes before F's epochs, with no scheduler step; F then trains every epoch of the run on its whole
    schedule (the fixture's step at epoch 1, x0.5). `lr` is read after each epoch's scheduler step."""
    train_config["experiments"]["lm"] = {"method": "learned_mixin_h", "dataset": "in9", "train_variant": "original",
                                         "label": "LearnedMixin+H", "method_args": {"g_pretrain_epochs": 1}}
    train(run_config(train_config, "lm", 0), tiny_store, tmp_path / "lm")
    rows = [json.loads(r) for r in (tmp_path / "lm" / "train_metrics.jsonl").read_text().splitlines()]
    epochs = lambda metric: sorted(r["epoch"] for r in rows if r["metric"] == metric)  # noqa: E731
    assert epochs("ce_g") == [0] and epochs("ce_mix") == [1, 2]   # G alone, then F for both of the run's epochs
    lr = train_config["training"]["optimizer"]["lr"]
    assert [r["value"] for r in sorted((r for r in rows if r["metric"] == "lr"), key=lambda r: r["epoch"])] == \
        pytest.approx([lr, lr / 2, lr / 2])   # G's epoch: no step; F's first epoch at lr, its second at lr / 2


# LearnedMixin+H trains G alone first (tested in test_rebias_methods); here F must move at once.
FIRST_UPDATE_TRAINS_F = {"learned_mixin_h": {"g_pretrain_epochs": 0}, "moco_v2": {"queue_size": 16, "bn_splits": 2},
                         "moco_v2_texture": {"queue_size": 16, "bn_splits": 2}, "lff_be": {"committee_steps": 2},
                         # at t = T2, lambda_main = 0: only the guidance trains, so every sample needs a partner
                         "intrinsic_feature_enhancement": {"committee_steps": 2, "t1": 0, "t2": 0, "partner_source": "D"}}


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_runs_one_update_that_changes_weights(name, tiny_stores, train_config):
    """One step moves the trained network's first layer (the self-supervised methods leave the
    head, their linear probe, to `finish`)."""
    from debias_workbench.training.data import ZarrBatches

    method = METHODS[name](9, train_config["training"], FIRST_UPDATE_TRAINS_F.get(name, {}))
    method.setup(ZarrBatches(tiny_stores["original"], "train", 6, shuffle=True))  # as the trainer does
    batch = debug_batch(method, {**tiny_stores, "texture": tiny_stores["stylized"]})  # a stand-in IN-9-Texture
    first = next(method.network.parameters())
    before = copy.deepcopy(first.detach())
    stats = method.update(batch)
    assert all(torch.isfinite(torch.as_tensor(v)) for v in stats.values())
    assert not torch.equal(before, first)


def test_evaluation_rows(tmp_path, tiny_store, train_config):
    """The accuracy row is recomputed here from the trained model's own predictions on the val
    images and labels read straight from the store: catches a wrong denominator, labels of other
    rows (shuffled or misaligned) and images left out or counted twice."""
    import zarr

    from debias_workbench.training.evaluation import load_trained

    model = train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "run")
    rows = evaluate_run(model, evaluation_config(train_config), {"original": tiny_store})
    assert len(rows) == 1 and rows[0]["metric"] == "accuracy" and rows[0]["n"] == 18
    assert rows[0]["experiment"] == "base_in9" and "label" not in rows[0] and 0 <= rows[0]["value"] <= 100
    val = zarr.open_group(str(tiny_store), mode="r")["val"]
    images, labels = torch.from_numpy(val["images"][:]), torch.from_numpy(val["labels"][:])
    method, _ = load_trained(model, torch.device("cpu"))
    with torch.no_grad():
        pred = method.predict(method.augmenter.normalize(images)).argmax(1)
    assert rows[0]["value"] == pytest.approx(100.0 * (pred == labels).sum().item() / len(labels), abs=1e-9)


def _oracle(store, wrong_rows: set[int]):
    """A hand-made model of known accuracy: it recognises each val image of `store` by its pixels
    and answers its true label, except for the rows in `wrong_rows` (the next class)."""
    import zarr

    val = zarr.open_group(str(store), mode="r")["val"]
    answer = {image.tobytes(): (int(label) + (row in wrong_rows)) % 9
              for row, (image, label) in enumerate(zip(val["images"][:], val["labels"][:]))}
    assert len(answer) == val["labels"].shape[0] == 18  # the images are distinct

    def predict(x: torch.Tensor) -> torch.Tensor:  # x: Augmenter([0] * 3, [1] * 3).normalize(uint8 images)
        pixels = (x * 255).round().to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()
        return torch.tensor([answer[image.tobytes()] for image in pixels])

    return predict


def test_accuracy_rows_of_a_model_of_known_accuracy(tiny_store):
    """A model right on exactly the val rows 1, 2, 4, 5, 7, ... (12 of the 18) scores 66.67 %; on
    the first 5 rows (smoke mode's `max_images`, in one batch) 3 of 5: catches a wrong denominator, labels
    compared in another order than the images, a row skipped or scored twice, and a `limit` that
    reads other rows than the first ones."""
    from debias_workbench.training.augment import Augmenter
    from debias_workbench.training.evaluation import accuracy_rows

    wrong = set(range(0, 18, 3))
    identity = Augmenter([0.0] * 3, [1.0] * 3)
    for batch_size in (4, 18):  # a short last batch, and one batch
        rows = accuracy_rows(_oracle(tiny_store, wrong), {"original": tiny_store}, "val", batch_size, identity,
                             torch.device("cpu"), {"experiment": "oracle", "seed": 0})
        assert [(r["metric"], r["variant"], r["n"]) for r in rows] == [("accuracy", "original", 18)]
        assert rows[0]["value"] == pytest.approx(100.0 * 12 / 18)
    for batch_size, n, right in ((18, 5, 3), (4, 8, 5)):  # `limit` reads whole batches (data.first_rows)
        rows = accuracy_rows(_oracle(tiny_store, wrong), {"original": tiny_store}, "val", batch_size, identity,
                             torch.device("cpu"), {"experiment": "oracle", "seed": 0}, limit=5)
        assert rows[0]["n"] == n and rows[0]["value"] == pytest.approx(100.0 * right / n)
    rows = accuracy_rows(_oracle(tiny_store, set()), {"original": tiny_store}, "val", 4, identity,
                         torch.device("cpu"), {"experiment": "oracle", "seed": 0})
    assert rows[0]["value"] == 100.0


def test_in1k_to_in9_mapping_of_hand_made_logits():
    table = torch.full((1000,), -1)
    table[151], table[10], table[999] = 0, 1, 8
    logits = torch.zeros(4, 1000)
    logits[0, 151] = logits[1, 10] = logits[2, 999] = logits[3, 5] = 1.0  # last: unmapped class
    assert in1k_to_in9(logits, table).tolist() == [0, 1, 8, -1]
    labels = torch.tensor([0, 1, 7, 0])
    assert (in1k_to_in9(logits, table) == labels).tolist() == [True, True, False, False]  # -1 is never right


def test_real_mapping_is_verified(tmp_path):
    table = mapping_tensor(needs_shared("data/in_to_in9.json"))
    assert tuple(int((table == k).sum()) for k in range(9)) == IN9_SUBCLASS_COUNTS
    assert int((table >= 0).sum()) == 370
    bad = {str(i): (0 if i < 500 else -1) for i in range(1000)}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="expected"):
        mapping_tensor(tmp_path / "bad.json")


def test_bg_gap_is_mixed_same_minus_mixed_rand_per_seed():
    rows = [{"kind": "eval", "metric": "accuracy", "experiment": "m", "seed": s, "variant": v, "value": val}
            for s, same, rand in ((0, 90.0, 70.0), (1, 80.0, 70.0))
            for v, val in (("mixed_same", same), ("mixed_rand", rand))]
    table = accuracy_table(rows, {"m": "M"})
    assert table["M"]["bg_gap"] == [20.0, 10.0]
    assert table["M"]["mixed_same"] == [90.0, 80.0]


def test_base_in_scores_a_1000_class_model_through_the_mapping(tmp_path, tiny_store, train_config):
    import torchvision

    from debias_workbench.training.evaluation import evaluate_imagenet_model

    mapping = needs_shared("data/in_to_in9.json")
    torch.save(torchvision.models.resnet18(weights=None).state_dict(), tmp_path / "r18.pth")
    train_config["evaluation"]["imagenet_model"] = {"arch": "resnet18", "weights": str(tmp_path / "r18.pth"),
                                                    "mapping": str(mapping)}
    rows = evaluate_imagenet_model(imagenet_evaluation_config(train_config), {"original": tiny_store})
    assert rows[0]["experiment"] == "base_in" and rows[0]["n"] == 18 and 0 <= rows[0]["value"] <= 100


def test_missing_or_altered_weights_are_clear_errors(tmp_path):
    from debias_workbench.training.models import Classifier
    from debias_workbench.training.weights import WeightsError

    with pytest.raises(WeightsError, match="not found at .*nope.pth.*nothing is downloaded"):
        Classifier("resnet18", 9, str(tmp_path / "nope.pth"))
    torch.save({"x": torch.zeros(1)}, tmp_path / "w.pth")
    with pytest.raises(WeightsError, match="sha256"):
        Classifier("resnet18", 9, str(tmp_path / "w.pth"), "0" * 64)
    with pytest.raises(WeightsError, match="does not fit"):
        Classifier("resnet18", 9, str(tmp_path / "w.pth"))


def test_the_learning_curve_monitor_reads_each_val_split_once(tmp_path, tiny_store, train_config, monkeypatch):
    """Every curve point scores the val split; it is read from the store at the first point only."""
    import debias_workbench.training.monitor as monitor_module

    made = []
    counted = lambda *a, **k: made.append(a[0]) or scoring_batches(*a, **k)  # noqa: E731
    monkeypatch.setattr(monitor_module, "scoring_batches", counted)
    monitor = monitor_module.Monitor({"original": tiny_store}, every_steps=1, batch_size=4)
    train(run_config(train_config, "base_in9", 0), tiny_store, tmp_path / "run", monitor=monitor)
    points = [json.loads(r) for r in (tmp_path / "run" / "train_metrics.jsonl").read_text().splitlines()]
    assert len({r["step"] for r in points if r["kind"] == "curve"}) >= 4 and made == [tiny_store]
