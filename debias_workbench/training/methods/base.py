"""The one base class of all methods (DomainBed-style: `update()` one step, `predict()`)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.nn as nn

from debias_workbench.core.names import NETWORK_WIDTH_KEYS

from ..augment import Augmenter
from ..distributed import averaged_gradients
from ..models import build_network
from ..network import Network
from ..settings import AugmentSettings, OptimizerSettings
from .spec import module_specs

#: true while a trained method is rebuilt to be scored (`for_scoring()`): its weights come from the
#: run's checkpoint, so no optimiser is made and no pretrained file is read. Making the first
#: optimiser imports torch._dynamo (seconds of CPU: docs/measurements.md#the-demo-on-the-avx2-machine), once per
#: evaluation job.
_FOR_SCORING = contextvars.ContextVar("for_scoring", default=False)


@contextlib.contextmanager
def for_scoring() -> Iterator[None]:
    """Methods constructed inside are for scoring only: `make_optimizer` returns None and the
    backbone starts from random weights (the caller loads the trained ones)."""
    token = _FOR_SCORING.set(True)
    try:
        yield
    finally:
        _FOR_SCORING.reset(token)


def _forget_host_counts(module: Method, incompatible_keys) -> None:
    """After a state is loaded, `host_count` reads the counters anew."""
    module._host_counts.clear()


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `values` (B,) over `mask` (B,) bool, 0 where the mask is empty: a statistic of some
    rows without reading the mask back to the host (`values[mask].mean()` needs its size)."""
    return (values * mask).sum().detach() / mask.sum().clamp_min(1)


class Method(nn.Module):
    """A debiasing method: owns its networks and optimiser and takes one step per `update`.

    `batch` holds the loader's uint8 `images` (B, H, W, 3), `labels`, `bias_labels` and row
    `index`, already on the training device; methods augment themselves (CLAD composites
    before augmenting), with `self.augment(images)` drawing from the trainer's generator.
    """

    #: the optimiser of the method's networks (`make_optimizer`), made by each method's __init__
    optimizer: torch.optim.Optimizer
    #: dataset fields the method needs besides images/labels/bias_labels (e.g. "masks")
    extra_fields: tuple[str, ...] = ()
    #: {batch field: variant}: images of another variant of the training dataset, read row by
    #: row alongside the training images (CLAD's ONLY_BG_T backgrounds); from the declaration
    aligned_variants: dict[str, str] = {}
    #: the method's `method_args` and their defaults, from its declaration in `<module>.yaml`
    default_args: dict[str, Any] = {}
    #: whether scoring also measures the similarity of its embedding (`embed`) to a positive and to
    #: non-semantic negatives (Ge et al. Figs. 2-3, `methods.ssl_eval`)
    scores_similarity: bool = False
    #: whether it cuts its training views from whole photos (a split of `train_views: photo`); from the declaration
    cuts_photo_views: bool = False
    #: {kind: file} of its prerequisites (`training.prerequisites`), each made by a job of its own: the trainer sets it;
    #: a kind it needs and is given no file of, `setup` makes itself (the same numbers)
    prerequisite_files: Mapping[str, Path] = {}

    def __init_subclass__(cls, **kwargs):
        """Read the class's declaration (`<module>.yaml` beside it); a class without an entry
        (an abstract helper base) keeps its parent's."""
        super().__init_subclass__(**kwargs)
        if cls.__name__ in module_specs(cls.__module__):
            declared = module_specs(cls.__module__)[cls.__name__]
            cls.default_args, cls.aligned_variants = declared.defaults, declared.aligned_variants
            cls.cuts_photo_views = declared.photo_views

    def __init__(self, num_classes: int, train_cfg: dict[str, Any], method_args: dict[str, Any]):
        super().__init__()
        if unknown := set(method_args) - set(self.default_args):
            raise ValueError(
                f"{type(self).__name__} has no method_args {sorted(unknown)}; it takes {sorted(self.default_args)}"
            )
        self.num_classes, self.cfg, self.args = num_classes, train_cfg, {**self.default_args, **method_args}
        aug = AugmentSettings.of(train_cfg.get("augment"))
        self.augmenter = Augmenter(
            train_cfg["normalize"]["mean"],
            train_cfg["normalize"]["std"],
            aug.crop_scale,
            aug.hflip,
            padding=aug.crop_padding,
        )
        pretrained = {"pretrained": None} if _FOR_SCORING.get() else {}  # the checkpoint replaces them
        self.network = build_network(train_cfg["arch"], num_classes, {**train_cfg, **pretrained})
        self.generator = torch.Generator()
        self.pre_steps = (
            0  # steps before the run's own (`x-before-run` args: `training.run_length`), set by the trainer
        )
        self.total_steps = 1  # the optimiser steps of the run's own epochs (`training.run_length`), set by the trainer
        self.autocast_dtype: torch.dtype | None = None
        self._host_counts: dict[str, int] = {}  # `host_count`'s copies, dropped when a state is loaded
        self.register_load_state_dict_post_hook(_forget_host_counts)

    def host_count(self, name: str) -> int:
        """The step-counter buffer `name` (checkpointed with the weights, on the device) as a Python
        int: read from the device once after construction or a load, then kept by `count_step`, so a
        step that branches on it does not wait for the device."""
        if name not in self._host_counts:
            self._host_counts[name] = int(getattr(self, name))
        return self._host_counts[name]

    def count_step(self, name: str, by: int = 1, modulo: int | None = None) -> None:
        """Advance the counter `name` by `by` (modulo `modulo`), in the buffer and in its host copy."""
        value = self.host_count(name) + by
        self._host_counts[name] = value if modulo is None else value % modulo
        getattr(self, name).fill_(self._host_counts[name])

    def build_biased_network(self, arch: str) -> Network:
        """A randomly initialised network of `arch` (e.g. ReBias's biased-by-design G)."""
        return build_network(arch, self.num_classes, {k: self.cfg[k] for k in NETWORK_WIDTH_KEYS if k in self.cfg})

    def augment(self, images: torch.Tensor) -> torch.Tensor:
        return self.augmenter(images, self.generator)

    def make_optimizer(self, params, lr: float | None = None) -> torch.optim.Optimizer:
        """The configured optimiser over `params` (at learning rate `lr` where given, else the configured
        one); None for a method built `for_scoring()`. `params` may be parameter groups, each with its own "lr"."""
        if _FOR_SCORING.get():
            # typed as always an optimiser: a method built for scoring is never stepped, so no method's
            # update checks for None
            return None  # type: ignore[return-value]
        opt = OptimizerSettings.of(self.cfg["optimizer"])
        rate = opt.lr if lr is None else lr
        if opt.name == "adam":
            return torch.optim.Adam(params, lr=rate, weight_decay=opt.weight_decay)
        if opt.name == "adamp":  # ReBias appendix: AdamP helps on Biased MNIST and ImageNet
            from adamp import AdamP

            return AdamP(params, lr=rate, weight_decay=opt.weight_decay)
        return torch.optim.SGD(params, lr=rate, momentum=opt.momentum, weight_decay=opt.weight_decay)

    def optimizers(self) -> list[torch.optim.Optimizer]:
        """Every optimiser of the method (the trainer schedules and checkpoints them all);
        by default the one in `self.optimizer`."""
        return [self.optimizer]

    @staticmethod
    def step(optimizer: torch.optim.Optimizer, loss: torch.Tensor, across_processes: bool = True) -> None:
        """One gradient step of `optimizer` on `loss`. Under several processes (`training.gpus`)
        the gradients are first averaged across them (DistributedDataParallel's all-reduce), so
        the step is the one-device step on the global batch; `across_processes=False` for a
        loss every process computes on the same rows (the self-supervised linear probe)."""
        optimizer.zero_grad(set_to_none=True)
        with (
            averaged_gradients(p for group in optimizer.param_groups for p in group["params"])
            if across_processes
            else contextlib.nullcontext()
        ):
            loss.backward()
        optimizer.step()

    def autocast(self):
        device = next(self.parameters()).device
        return torch.autocast(
            device.type, dtype=self.autocast_dtype or torch.bfloat16, enabled=self.autocast_dtype is not None
        )

    def update(self, batch: dict[str, torch.Tensor]) -> Mapping[str, torch.Tensor | float]:
        """One optimisation step on `batch`; returns scalar statistics to log, as 0-d tensors on the
        device (the trainer reads them back once an epoch: a `.item()` per step would make the CPU
        wait for the GPU every step) or Python numbers known on the host."""
        raise NotImplementedError

    def setup(self, batches) -> dict[str, float]:
        """Work before the first step, on the training batches (`ZarrBatches`): per-sample state
        sized to the training set, a prerequisite given no file (`prerequisite_files`). Runs on every start, a
        resume too (then the checkpoint's state replaces what it made), so it must be seeded. Returns
        statistics to log; by default nothing."""
        return {}

    def finish(self, batches) -> dict[str, float]:
        """Work after the last epoch, on the training batches (`ZarrBatches`): the self-supervised
        methods fit their linear probe here. Returns statistics to log; by default nothing."""
        return {}

    @torch.no_grad()
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Pooled backbone features (B, D) of normalised images x (the space CLAD contrasts in)."""
        with self.autocast():
            return self.network.features(x).float()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for normalised images x (B, 3, H, W)."""
        with self.autocast():
            return self.network(x).float()
