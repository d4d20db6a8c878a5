"""Training throughput of every method through the workbench's own path, beside a plain torchvision loop.

    python -m benchmarks.gpu_throughput [--device auto|cuda|cpu] [--size 224] [--batch B] [--steps 30]
                                        [--warmup 5] [--methods erm,clad,...,plain] [--workers 8] [--stream]
                                        [--committee-steps K] [--photos DIR] [--json FILE]
                                        [--nondeterministic] [--profile K] [--one-process]
                                        [--concurrent K] [--split-bn grouped|per_block]

Each method runs at its paper's setting, taken from the paper configs themselves
(`config/imagenet9.yaml`, `config/park_real_data.yaml` merged over `config/config.yaml`, resolved and
sliced by `workflow.slices.run_config` as the workflow does): ResNet-50 at batch 64 for ERM, CLAD and
S-CLAD (Wang et al.); ResNet-50 from scratch at batch 128 for MoCo-v2 (k = 16384, with and without
patch negatives) and BYOL (Ge et al.'s command line); ResNet-18 + BagNet-18 at batch 128 for ReBias
(Bahng et al.); ResNet-18 at batch 64 for LfF + BiasEnsemble and Park et al. (`park_bffhq`).
Pretrained weights are left out (the user's file; the step costs the same).

The workbench side is the trainer's path: a zarr store in the workflow's format (the dataset's chunk
size and image codec, the aligned ONLY_BG_T / Stylized variant stores a method reads row by row),
`training.data.ZarrBatches` with the run's loader settings, background prefetching and pinned memory
on CUDA, the process's CUDA settings as the trainer makes them (`training.build.configure_device`:
deterministic kernels, TF32; "erm_benchmark" is ERM with `training.deterministic: false`, cuDNN's
benchmarked kernels, to show what determinism costs), the method built by
`training.build.build_method` (bf16 autocast on cards from the A100 on; channels-last weights and
batches) and stepped by its own `update` after its `setup` (BiasEnsemble's
committee, timed apart: `--committee-steps` per member instead of the papers' 1,000, scored once).
Park et al. runs from its guided phase on (T1 = T2 = 0: from T2 on, 80 % of the paper's iterations,
every step also draws and forwards the bias-negative partners).

The plain side is what a researcher would write after pytorch/examples' ImageNet script: the same
images as JPEG files in an ImageFolder tree, `torchvision.datasets.ImageFolder` with RandomResizedCrop,
horizontal flip, ToTensor and Normalize, a `DataLoader` with worker processes and pinned memory,
`torchvision.models.<ERM's arch>` at ERM's batch, SGD (our ERM keeps the CLAD paper's Adam, a little
dearer), `cudnn.benchmark = True` (the trainer leaves it off); "plain" in fp32 (that script),
"plain_amp" with the usual bf16 autocast (CUDA only by default).

Every row runs in a fresh process (peak memory is its own; one row's cuDNN or allocator state cannot
help another), or all in this one with `--one-process` (the device check's way, peak memory counted
from each row's start): images per second over the timed steps, the share of that time spent waiting for the
next batch, the GPU-busy share (kernel time over step time, `gpu_busy_per_step`: under 1 the card
waits for the CPU to launch kernels; issue 50's goal: >= 85 % for every method), and peak memory (CUDA max_memory_allocated; on CPU the process's peak RSS, which includes
the loader's in-memory copy of the benchmark store, not the DataLoader workers). A step is timed up to
a device synchronisation. Goals (issue 39): our ERM >= 1.3x the faster plain loop's images/s; no
method waits for data more than 5 % of its step time; CLAD's step time <= 1.15x ERM's (both at batch
64; CLAD forwards the positives too); MoCo-v2 + patch negatives' step time <= 1.1x MoCo-v2's. Each
method's cost relative to ERM (ERM's images/s / the method's) is printed besides. On CPU the
defaults shrink to 64 px, batch 8, 2 steps: a check that every path runs, not GPU figures.
`--json FILE` writes the rows, the networks and the goal lines for `benchmarks.device_check`.
`--nondeterministic` runs every workbench row with `training.deterministic: false`, to see which
methods pay for determinism; `--profile K` steps each row K more times under `torch.profiler` and
prints its costliest operations (self time on the device, or on the CPU without one). A `--batch`
under twice MoCo's `bn_splits` lowers `bn_splits` to the largest divisor of the batch up to batch // 2
(a batch norm over one image has no variance), and says so. `--concurrent K` adds, for each workbench
row, the row run as K processes at once on the device (images/s summed): whether several small runs
per GPU would use a card that one run leaves idle. `--split-bn` picks MoCo's split batch-norm path on
the device (one call per layer, or one per sub-batch), to keep whichever is faster there.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import io
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import cv2
import numpy as np
import torch
import yaml
import zarr
from PIL import Image

from debias_workbench.core.seeding import name_rng, name_seed
from debias_workbench.pipeline.imageio import load_rgb
from debias_workbench.pipeline.sources.synthetic import render_sample
from debias_workbench.pipeline.store import atomic_store, create_array
from debias_workbench.training.settings import TrainingSettings
from debias_workbench.workflow.config import deep_merge, resolve_config
from debias_workbench.workflow.slices import run_config

from .loader import ROOT

NUM_CLASSES = 9  # IN-9's; the heads' size does not change a step's cost
PHOTOS = ROOT.parent / "shared" / "data" / "in9-photos-dev"


@dataclass(frozen=True)
class Case:
    """One method at its paper's setting: an experiment of a paper config, with the overrides that
    config does not carry itself."""

    config: str
    experiment: str
    training: dict[str, Any] = field(default_factory=dict)
    method_args: dict[str, Any] = field(default_factory=dict)


#: Ge et al.'s MoCo-v2 command line (authors' README): --batch-size 128 --moco-k 16384; IN-9's
#: experiments keep batch 64 and k = 704 for the dataset's size
SSL_PAPER = {"batch_size": 128}
CASES: dict[str, Case] = {
    "erm": Case("imagenet9.yaml", "base_in9"),
    "erm_benchmark": Case("imagenet9.yaml", "base_in9", {"deterministic": False}),
    "clad": Case("imagenet9.yaml", "clad"),
    "s_clad": Case("imagenet9.yaml", "s_clad"),
    "moco_v2": Case("imagenet9.yaml", "moco", SSL_PAPER, {"queue_size": 16384}),
    "moco_v2_patch": Case("imagenet9.yaml", "moco_patch2", SSL_PAPER, {"queue_size": 16384}),
    "byol": Case("imagenet9.yaml", "byol", SSL_PAPER),
    "rebias": Case("imagenet9.yaml", "r18_rebias"),
    "lff_be": Case("park_real_data.yaml", "park_bffhq_lff_be_conflict_1"),
    "park": Case("park_real_data.yaml", "park_bffhq_ours_conflict_1", method_args={"t1": 0, "t2": 0}),
}
#: the plain torchvision loop: name -> bf16 autocast
PLAIN = {"plain": False, "plain_amp": True}
#: variant stores a method may read row-aligned with the training images
ALIGNED_VARIANTS = ("only_bg_t", "stylized")
#: goals of issue 39: images/s over the plain loop, data-wait share, step-time ratios
ERM_OVER_PLAIN, MAX_WAIT, CLAD_OVER_ERM, PATCH_OVER_MOCO = 1.3, 0.05, 1.15, 1.1
#: issue 50's goal: the GPU runs kernels for at least this share of every method's step
MIN_GPU_BUSY = 0.85
#: steps profiled for the GPU-busy share
BUSY_STEPS = 3


def paper_run_configs(names: list[str], batch: int | None, committee_steps: int,
                      deterministic: bool | None = None) -> dict[str, dict[str, Any]]:
    """{method: its run's resolved config} for the workbench rows of `names`; `batch` replaces every
    batch size; BiasEnsemble's committee trains `committee_steps` steps per member (the papers':
    1,000), scored once at the end; `deterministic` (when given) replaces `training.deterministic`."""
    out, resolved = {}, {}
    for name in names:
        case = CASES[name]
        if case.config not in resolved:
            merged = deep_merge(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()),
                                yaml.safe_load((ROOT / "config" / case.config).read_text()))
            resolved[case.config] = resolve_config(merged)
        cfg = run_config(resolved[case.config], case.experiment, 0)
        training = {**case.training, "pretrained": None, "pretrained_sha256": None}
        if batch is not None:
            training["batch_size"] = batch
        if deterministic is not None:
            training["deterministic"] = deterministic
        cfg["training"] = deep_merge(cfg["training"], training)
        args = dict(case.method_args)
        if "committee_steps" in cfg["method_args"]:
            args.update(committee_steps=committee_steps, committee_vote="last")
        splits = cfg["method_args"].get("bn_splits")
        if splits and batch is not None and batch < 2 * splits:  # the largest split count that divides the batch
            args["bn_splits"] = next(s for s in range(max(1, batch // 2), 0, -1) if batch % s == 0)
            print(f"{name}: bn_splits {splits} -> {args['bn_splits']} for batch {batch} (at least 2 images per split)")
        cfg["method_args"] = {**cfg["method_args"], **args}
        out[name] = cfg
    return out


def image_pool(n: int, size: int, photos: Path = PHOTOS) -> tuple[np.ndarray, str]:
    """Up to `n` distinct (size, size, 3) uint8 images: the development photographs of `photos`
    resized (what JPEG decoding meets in practice), else the synthetic IN-9-like renders."""
    paths = sorted(photos.rglob("*.JPEG"))[:n] if photos.is_dir() else []
    if paths:
        return (np.stack([cv2.resize(load_rgb(p, 1), (size, size), interpolation=cv2.INTER_AREA) for p in paths]),
                f"{len(paths)} real photos of {photos}")
    rng = name_rng("gpu_throughput", "images")
    return np.stack([render_sample(i % NUM_CLASSES, size, 0.9, rng)[0] for i in range(n)]), f"{n} synthetic renders"


def write_stores(root: Path, images: np.ndarray, n_train: int, n_val: int, chunk: int, codec: str) -> dict[str, Path]:
    """Variant stores in the workflow's format (`debias_workbench/pipeline/variant_stage.py`): ORIGINAL with
    foreground masks, and ONLY_BG_T and Stylized with the same ids row for row; images cycle
    through `images`, labels are random, 5 % of the bias labels conflict."""
    rng = name_rng("gpu_throughput", "stores")
    stores = {}
    for k, variant in enumerate(("original", *ALIGNED_VARIANTS)):
        with atomic_store(root / f"{variant}.zarr") as tmp:  # fingerprinted, as the loader requires
            _write_store(tmp, variant, k, images, n_train, n_val, chunk, codec, rng)
        stores[variant] = root / f"{variant}.zarr"
    return stores


def _write_store(path: Path, variant: str, k: int, images: np.ndarray, n_train: int, n_val: int, chunk: int,
                 codec: str, rng: np.random.Generator) -> None:
    """One store of `write_stores` at `path`; `k` offsets its images in the cycle."""
    size = images.shape[1]
    group = zarr.open_group(str(path), mode="w")
    group.attrs.update({"classes": [f"{c:02d}" for c in range(NUM_CLASSES)],
                        "bias_classes": [f"{c:02d}" for c in range(NUM_CLASSES)],
                        "variant": variant, "family": "in9", "image_size": size})
    for split, n in (("train", n_train), ("val", n_val)):
        split_rng = name_rng("gpu_throughput", split)
        labels = split_rng.integers(0, NUM_CLASSES, n)
        conflicting = split_rng.random(n) < 0.05
        bias = np.where(conflicting, (labels + 1) % NUM_CLASSES, labels)
        if variant == "stylized":  # the style's class: any class
            bias = split_rng.integers(0, NUM_CLASSES, n)
        sub = group.create_group(split)
        array = create_array(sub, "images", (n, size, size, 3), np.uint8, chunk, codec=codec)
        for start in range(0, n, chunk):
            array[start:start + chunk] = images[(np.arange(start, min(n, start + chunk)) + k) % len(images)]
        if variant == "original":
            masks = create_array(sub, "masks", (n, size, size), np.uint8, chunk)
            corners = rng.integers(0, size // 2, (n, 2))
            for start in range(0, n, chunk):
                block = np.zeros((min(n, start + chunk) - start, size, size), np.uint8)
                for i, (y0, x0) in enumerate(corners[start:start + chunk]):
                    block[i, y0:y0 + size // 2, x0:x0 + size // 2] = 1
                masks[start:start + chunk] = block
        create_array(sub, "labels", (n,), np.int64, n, n)[:] = labels
        create_array(sub, "bias_labels", (n,), np.int64, n, n)[:] = bias
        create_array(sub, "ids", (n,), str, n, n)[:] = np.array([f"{split}_{i:07d}" for i in range(n)])


def write_image_folder(root: Path, images: np.ndarray, n: int, quality: int = 92) -> Path:
    """An ImageFolder tree root/<class>/<i>.JPEG of `n` (>= 9) files cycling through `images`."""
    encoded = []
    for image in images:
        buf = io.BytesIO()
        Image.fromarray(image).save(buf, format="JPEG", quality=quality)
        encoded.append(buf.getvalue())
    labels = name_rng("gpu_throughput", "jpeg").permutation(np.arange(n) % NUM_CLASSES)  # every class has files
    for c in range(NUM_CLASSES):
        (root / f"{c:02d}").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"{labels[i]:02d}" / f"{i:07d}.JPEG").write_bytes(encoded[i % len(encoded)])
    return root


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_steps(batches: Iterable, step: Callable[[Any], Any], warmup: int, steps: int,
                device: torch.device, start_together: Any = None) -> tuple[list[float], list[float]]:
    """(seconds waiting for each batch, seconds of each step up to a device synchronisation) of
    the `steps` steps after `warmup` untimed ones; `start_together` (a barrier) is waited on between
    them, so that copies of a row in several processes time the same window."""
    iterator = iter(batches)
    waits, computes = [], []
    for i in range(warmup + steps):
        if i == warmup and start_together is not None:
            _sync(device)
            start_together.wait()
        t0 = time.perf_counter()
        batch = next(iterator)
        t1 = time.perf_counter()
        step(batch)
        _sync(device)
        if i >= warmup:
            waits.append(t1 - t0)
            computes.append(time.perf_counter() - t1)
    return waits, computes


def _peak_memory_mib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _result(batch: int, waits: list[float], computes: list[float], device: torch.device, **extra) -> dict[str, Any]:
    total = sum(waits) + sum(computes)
    return {"batch": batch, "images_per_s": batch * len(computes) / total, "wait_share": sum(waits) / total,
            "step_ms": 1000 * statistics.median(w + c for w, c in zip(waits, computes)),
            "peak_mib": _peak_memory_mib(device), **extra}


def profiled(step: Callable[[Any], Any], batches: Iterable, steps: int, device: torch.device, rows: int = 15) -> str:
    """The costliest operations of `steps` more steps under `torch.profiler`: the top `rows` by self
    time on the device, then on the CPU (a step whose CPU time exceeds its device time is bound by
    launching kernels, not by running them)."""
    from torch.profiler import ProfilerActivity, profile

    gpu = device.type == "cuda"
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])]
    with profile(activities=activities) as prof:
        for batch, _ in zip(batches, range(steps)):  # at most the epoch's batches
            step(batch)
        _sync(device)
    keys = ["self_device_time_total", "self_cpu_time_total"] if gpu else ["self_cpu_time_total"]
    averages = prof.key_averages()
    return "\n".join(averages.table(sort_by=key, row_limit=rows, max_name_column_width=60) for key in keys)


def busy_seconds(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: time in which at least one ran."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


def gpu_busy_per_step(step: Callable[[Any], Any], batches: Iterable, steps: int, device: torch.device) -> float | None:
    """Seconds per step in which the GPU runs at least one kernel (the union of the kernels'
    intervals under `torch.profiler` over `steps` more steps), or None without a GPU. Divided by the
    unprofiled step time it is the GPU-busy share: under 1 the card waits for the CPU to launch work
    (the profiler slows the CPU, not the kernels, so only the kernel time is taken from it)."""
    if device.type != "cuda":
        return None
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    _sync(device)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        done = 0
        for batch, _ in zip(batches, range(steps)):  # at most the epoch's batches
            step(batch)
            done += 1
        _sync(device)
    # kernels only: not memcpy / memset, nor the GPU-side ranges that mirror record_function (optimizer.step)
    kernels = [(e.time_range.start, e.time_range.end) for e in prof.events()
               if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)
               and not e.name.startswith(("Memcpy", "Memset"))]
    return busy_seconds(kernels) / 1e6 / max(1, done)  # the profiler's times are microseconds


def measure_workbench(run_cfg: dict[str, Any], stores: dict[str, Path], device_name: str, warmup: int, steps: int,
                      stream: bool, profile_steps: int = 0, start_together: Any = None) -> dict[str, Any]:
    """One method through the trainer's path, in this process: `training.trainer.train`'s
    ZarrBatches arguments, `build_method`, `setup`, the epoch's augmentation seed and `update` on
    the batch moved with non_blocking copies, as that loop does."""
    from debias_workbench.training.build import build_method
    from debias_workbench.training.data import ZarrBatches
    from debias_workbench.training.methods import get_method

    from debias_workbench.training.build import configure_device

    device = torch.device(device_name)
    cfg, experiment, seed = run_cfg["training"], run_cfg["experiment"], run_cfg["seed"]
    settings = TrainingSettings.of(cfg)
    configure_device(device, settings.deterministic, tf32=settings.amp)  # as the trainer's pick_device
    method_cls = get_method(run_cfg["method"])
    # as train(): the same ZarrBatches arguments
    batches = ZarrBatches(stores["original"], "train", cfg["batch_size"], shuffle=True, seed=seed, name=experiment,
                          drop_last=True, **{**settings.loader.batches_args(),
                                             **({"in_memory_max_gb": 0.0} if stream else {})},
                          fields=("images", "labels", "bias_labels", *method_cls.extra_fields),
                          pin_memory=device.type == "cuda",
                          aligned={f: stores[v] for f, v in method_cls.aligned_variants.items()})
    method = build_method(run_cfg, len(batches.classes), device)
    t0 = time.perf_counter()
    method.setup(batches)
    _sync(device)
    setup_s = time.perf_counter() - t0
    method.train()
    method.generator.manual_seed(name_seed("augment", experiment, seed, 0))
    def step(batch: dict[str, torch.Tensor]) -> Any:
        return method.update({k: v.to(device, non_blocking=True) for k, v in batch.items()})

    waits, computes = timed_steps(batches.epoch(0), step, warmup, steps, device, start_together)
    extra = {"profile": profiled(step, batches.epoch(1), profile_steps, device)} if profile_steps else {}
    busy = gpu_busy_per_step(step, batches.epoch(2), BUSY_STEPS, device) if start_together is None else None
    if busy is not None:
        extra["gpu_busy"] = busy / statistics.median(computes)
    # whether the split was read into memory (it fit in_memory_max_gb) or streamed: ZarrBatches' cache
    return _result(cfg["batch_size"], waits, computes, device, setup_s=setup_s,
                   loader="in memory" if batches._cache is not None else "streaming", **extra)


def measure_plain(folder: Path, arch: str, batch: int, device_name: str, warmup: int, steps: int, workers: int,
                  amp: bool, normalize: dict[str, list[float]]) -> dict[str, Any]:
    """The plain torchvision loop (pytorch/examples' ImageNet script; `amp`: bf16 autocast), in
    this process."""
    import torchvision
    from torchvision import transforms

    device = torch.device(device_name)
    torch.manual_seed(0)
    if device.type == "cuda":  # a fresh process's settings (a workbench row before it in the process set its own)
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.deterministic = torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        torch.cuda.reset_peak_memory_stats(device)
    torch.backends.cudnn.benchmark = True
    size = Image.open(next(folder.rglob("*.JPEG"))).size[0]
    data = torchvision.datasets.ImageFolder(str(folder), transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize(normalize["mean"], normalize["std"])]))
    loader = torch.utils.data.DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers,
                                         pin_memory=device.type == "cuda", drop_last=True)
    model = getattr(torchvision.models, arch)(num_classes=NUM_CLASSES).to(device)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    model.train()

    def step(pair):
        images, target = pair[0].to(device, non_blocking=True), pair[1].to(device, non_blocking=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = criterion(model(images), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()

    waits, computes = timed_steps(loader, step, warmup, steps, device)
    return _result(batch, waits, computes, device, loader=f"DataLoader, {workers} workers")


def in_fresh_process(fn: Callable, *args) -> dict[str, Any]:
    """fn(*args) in a new process (spawned: no CUDA state is inherited; DataLoader workers may fork)."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def side_by_side(k: int, *args) -> dict[str, Any]:
    """`measure_workbench(*args)` in `k` processes at once on one device (`--concurrent`: several
    small runs sharing a GPU that one leaves idle), timed over the same window: images/s and peak
    memory summed over the copies, the median step and the largest wait share of any copy."""
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, concurrent.futures.ProcessPoolExecutor(k, mp_context=context) as pool:
        barrier = manager.Barrier(k, timeout=600)  # a copy that fails before it breaks it, not hangs the others
        rows = [f.result() for f in [pool.submit(measure_workbench, *args, 0, barrier) for _ in range(k)]]
    return {**rows[0], "images_per_s": sum(r["images_per_s"] for r in rows),
            "step_ms": statistics.median(r["step_ms"] for r in rows),
            "wait_share": max(r["wait_share"] for r in rows), "peak_mib": sum(r["peak_mib"] for r in rows),
            "loader": f"{rows[0]['loader']}, {k} runs at once"}


def in_this_process(fn: Callable, *args) -> dict[str, Any]:
    """fn(*args) here (`--one-process`): no process start, CUDA context or import per row (about 40 s
    of each row's minute on the H200), peak memory counted from the row's start."""
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    return fn(*args)


def _arch(run_cfg: dict[str, Any]) -> str:
    arch = run_cfg["training"]["arch"]
    biased = run_cfg["method_args"].get("biased_arch")
    return f"{arch} + {biased}" if biased else arch


def goal_lines(results: dict[str, dict[str, Any]]) -> list[str]:
    """The issue's goals as ratios, each with its verdict."""
    lines = []
    plain = {n: r for n, r in results.items() if n in PLAIN}
    if "erm" in results and plain:
        best = max(plain, key=lambda n: plain[n]["images_per_s"])
        ratio = results["erm"]["images_per_s"] / plain[best]["images_per_s"]
        others = ", ".join(f"{results['erm']['images_per_s'] / r['images_per_s']:.2f}x {n}"
                           for n, r in plain.items() if n != best)
        lines.append(f"our ERM / plain loop images/s: {ratio:.2f}x against {best} (the faster plain row"
                     f"{'; ' + others if others else ''}); goal >= {ERM_OVER_PLAIN}x: "
                     f"{'met' if ratio >= ERM_OVER_PLAIN else 'NOT met'}")
    else:
        lines.append("our ERM / plain loop images/s: n/a (needs erm and plain in --methods)")
    ours = {n: r for n, r in results.items() if n not in PLAIN}
    if ours:
        worst = max(ours, key=lambda n: ours[n]["wait_share"])
        over = [n for n, r in ours.items() if r["wait_share"] > MAX_WAIT]
        lines.append(f"data wait share: max {100 * ours[worst]['wait_share']:.1f} % ({worst}); goal <= "
                     f"{100 * MAX_WAIT:.0f} % for every method: "
                     + ("met" if not over else f"NOT met ({', '.join(over)})"))
    if "erm" in results:
        costs = {n: results["erm"]["images_per_s"] / r["images_per_s"] for n, r in ours.items() if n != "erm"}
        lines.append("cost relative to ERM (ERM's images/s / the method's): "
                     + (", ".join(f"{n} {c:.2f}x" for n, c in costs.items()) or "no other method"))
    busy = {n: r["gpu_busy"] for n, r in ours.items() if r.get("gpu_busy") is not None}
    if busy:
        low = [n for n, share in busy.items() if share < MIN_GPU_BUSY]
        lines.append("GPU-busy share of the step: " + ", ".join(f"{n} {100 * v:.0f} %" for n, v in busy.items())
                     + f"; goal >= {100 * MIN_GPU_BUSY:.0f} % for every method: "
                     + ("met" if not low else f"NOT met ({', '.join(low)})"))
    for name, base, goal in (("clad", "erm", CLAD_OVER_ERM), ("moco_v2_patch", "moco_v2", PATCH_OVER_MOCO)):
        if name in results and base in results:
            ratio = results[name]["step_ms"] / results[base]["step_ms"]
            lines.append(f"{name} / {base} step time: {ratio:.2f}x; goal <= {goal}x: "
                         + ("met" if ratio <= goal else f"NOT met, by {100 * (ratio / goal - 1):.0f} %"))
    return lines


def busy_text(row: dict[str, Any]) -> str:
    """A row's GPU-busy share as a percentage, or n/a (the CPU, the plain loops)."""
    return f"{100 * row['gpu_busy']:.0f} %" if row.get("gpu_busy") is not None else "n/a"


def table(results: dict[str, dict[str, Any]], archs: dict[str, str]) -> list[str]:
    erm = results.get("erm", {}).get("images_per_s")
    head = (f"{'method':<15} {'network':<20} {'batch':>5} {'images/s':>9} {'step ms':>8} {'data wait':>9} "
            f"{'GPU busy':>8} {'peak MiB':>9} {'cost vs ERM':>11}  loader")
    rows = [head, "-" * len(head)]
    for name, r in results.items():
        cost = f"{erm / r['images_per_s']:.2f}x" if erm else "n/a"
        rows.append(f"{name:<15} {archs[name]:<20} {r['batch']:>5} {r['images_per_s']:>9.1f} {r['step_ms']:>8.0f} "
                    f"{100 * r['wait_share']:>8.1f}% {busy_text(r):>8} {r['peak_mib']:>9.0f} {cost:>11}  {r['loader']}")
    return rows


def write_json(path: Path, device: torch.device, args: argparse.Namespace, results: dict[str, dict[str, Any]],
               archs: dict[str, str], failures: dict[str, str]) -> None:
    """The rows measured so far, their networks and the goal lines, for `benchmarks.device_check`."""
    path.write_text(json.dumps({"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU",
                                "size": args.size, "stream": args.stream, "results": results, "networks": archs,
                                "goals": goal_lines(results), "failures": failures}, indent=1))


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="auto", help="auto (cuda if available), cuda or cpu")
    ap.add_argument("--size", type=int, help="image side (default: 224 on CUDA, 64 on CPU)")
    ap.add_argument("--batch", type=int, help="one batch size for every row (default: the papers' on CUDA, 8 on CPU)")
    ap.add_argument("--steps", type=int, help="timed steps per row (default: 30 on CUDA, 2 on CPU)")
    ap.add_argument("--warmup", type=int, help="untimed steps first (default: 5 on CUDA, 1 on CPU)")
    ap.add_argument("--methods", help=f"comma-separated, from {', '.join([*CASES, *PLAIN])} "
                                      "(default: all; plain_amp on CUDA only)")
    ap.add_argument("--workers", type=int, help="the plain loop's DataLoader workers (default: min(8, cores) on "
                                                "CUDA, min(2, cores) on CPU)")
    ap.add_argument("--committee-steps", type=int, help="BiasEnsemble committee steps per member (default: --steps)")
    ap.add_argument("--photos", type=Path, default=PHOTOS,
                    help="JPEG photographs for the images (default: the development photos; synthetic renders "
                         "when absent)")
    ap.add_argument("--stream", action="store_true",
                    help="the zarr loader streams shard by shard (in_memory_max_gb = 0), as runs whose data exceed "
                         "training.loader.in_memory_max_gb do (IN-9 CLAD at 224 px: 16 GB)")
    ap.add_argument("--json", type=Path, help="also write the rows, networks and goal lines to this file")
    ap.add_argument("--nondeterministic", action="store_true",
                    help="every workbench row with training.deterministic: false (cuDNN's benchmarked kernels)")
    ap.add_argument("--one-process", action="store_true",
                    help="every row in this process (the device check's way: a row's minute of process start "
                         "saved; cuDNN's and the allocator's caches are then shared between rows)")
    ap.add_argument("--split-bn", choices=["grouped", "per_block"],
                    help="MoCo's split batch norm on this device in one call per layer (grouped) or one per "
                         "sub-batch (per_block); default: the workbench's choice for the device. Needs --one-process")
    ap.add_argument("--concurrent", type=int, default=1, metavar="K",
                    help="also run each workbench row as K processes at once on the device (row 'NAME xK': images/s "
                         "summed): what several small runs per GPU would gain")
    ap.add_argument("--profile", type=int, default=0, metavar="K",
                    help="K more steps of each workbench row under torch.profiler; prints the costliest operations")
    args = ap.parse_args(argv)
    args.device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto"
                               else args.device)
    gpu = args.device.type == "cuda"  # CPU: small scale unless told otherwise
    args.size = args.size or (224 if gpu else 64)
    args.batch = args.batch or (None if gpu else 8)
    args.steps = args.steps or (30 if gpu else 2)
    args.warmup = args.warmup if args.warmup is not None else (5 if gpu else 1)
    args.workers = args.workers if args.workers is not None else min(8 if gpu else 2, os.cpu_count() or 1)
    # the plain loop right after ERM: the first goal is judged even when a budget stops the run early
    everything = ["erm", "plain", *(["plain_amp"] if gpu else []), *[n for n in CASES if n != "erm"]]
    args.methods = args.methods.split(",") if args.methods else everything
    if args.split_bn and (not args.one_process or args.concurrent > 1):
        raise SystemExit("--split-bn sets this process's path: give --one-process, without --concurrent")
    if unknown := [n for n in args.methods if n not in CASES and n not in PLAIN]:
        raise SystemExit(f"--methods: unknown {unknown}; choose from {', '.join([*CASES, *PLAIN])}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = _arguments(argv)
    device, names, gpu = args.device, args.methods, args.device.type == "cuda"
    run_cfgs = paper_run_configs([n for n in names if n in CASES], args.batch, args.committee_steps or args.steps,
                                 False if args.nondeterministic else None)
    erm_cfg = run_cfgs.get("erm") or paper_run_configs(["erm"], args.batch, 1)["erm"]
    batches = {n: c["training"]["batch_size"] for n, c in run_cfgs.items()} | {n: erm_cfg["training"]["batch_size"]
                                                                              for n in names if n in PLAIN}
    archs = {n: _arch(c) for n, c in run_cfgs.items()} | {n: erm_cfg["training"]["arch"] for n in names if n in PLAIN}
    dataset = erm_cfg["dataset_config"]  # IN-9 at the papers' scale: its chunk size and image codec

    t_start = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    tmp = Path(tempfile.mkdtemp(prefix="gpu_throughput_"))
    try:
        n_train = (args.warmup + args.steps + 1) * max(batches.values())  # every row's steps within one epoch
        pool, source = image_pool(min(256, n_train), args.size, args.photos)
        stores = write_stores(tmp / "stores", pool, n_train, max(batches.values()), int(dataset["chunk_images"]),
                              dataset["image_codec"])
        folder = write_image_folder(tmp / "jpeg", pool, n_train) if set(names) & set(PLAIN) else None
        print(f"device: {torch.cuda.get_device_name(device) if gpu else 'CPU'}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} CPU threads; {args.size} px; {args.warmup} warm-up + {args.steps} timed "
              "steps per row")
        if not gpu:
            print(f"CPU small-scale run (size {args.size} px, batch {args.batch or 'the papers'}, timed steps "
                  f"{args.steps}): a check that every path runs, NOT GPU figures")
        print(f"images: {source}, cycled; {n_train} training rows per store, the zarr image codec "
              f"{dataset['image_codec']!r}, JPEG quality 92; plain loader: {args.workers} workers", flush=True)
        run = in_this_process if args.one_process else in_fresh_process
        if args.split_bn:
            from debias_workbench.training.methods import split_batch_norm as sbn

            sbn.PATH_BY_DEVICE[device.type] = getattr(sbn, f"{args.split_bn}_batch_norm")
        if args.one_process:  # the plain rows last: their cudnn.benchmark and worker processes cannot touch ours
            names = [n for n in names if n not in PLAIN] + [n for n in names if n in PLAIN]
        for name in names:
            try:
                if name in PLAIN:
                    results[name] = run(measure_plain, folder, erm_cfg["training"]["arch"], batches[name],
                                                     str(device), args.warmup, args.steps, args.workers, PLAIN[name],
                                                     erm_cfg["training"]["normalize"])
                else:
                    results[name] = run(measure_workbench, run_cfgs[name], stores, str(device),
                                                     args.warmup, args.steps, args.stream, args.profile)
                print(f"  measured {name}: {results[name]['images_per_s']:.1f} images/s", flush=True)
                if "profile" in results[name]:
                    print(results[name]["profile"], flush=True)
                if args.concurrent > 1 and name not in PLAIN:
                    label = f"{name} x{args.concurrent}"
                    results[label] = side_by_side(args.concurrent, run_cfgs[name], stores, str(device), args.warmup,
                                                  args.steps, args.stream)
                    archs[label] = archs[name]
                    print(f"  measured {label}: {results[label]['images_per_s']:.1f} images/s", flush=True)
            except Exception as exc:  # one row's failure (out of memory) must not lose the others' figures
                failures[name] = f"{type(exc).__name__}: {exc}"
                print(f"  {name} FAILED: {failures[name]}", flush=True)
            if args.json:  # after every row: a run stopped for time still leaves the rows it measured
                write_json(args.json, device, args, results, archs, failures)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print()
    print("\n".join(table(results, archs)))
    for name, r in results.items():
        method_args = run_cfgs.get(name, {}).get("method_args", {})
        if "committee_size" in method_args:
            member_steps = method_args["committee_size"] * method_args["committee_steps"]
            print(f"{name} setup (BiasEnsemble committee: {member_steps} member steps, then scoring every training "
                  f"row): {r['setup_s']:.1f} s, ~{1000 * r['setup_s'] / member_steps:.0f} ms per member step")
    rss = "peak RSS of the training process (with the loader's in-memory store copy; DataLoader workers not counted)"
    print(f"peak memory: {'CUDA max_memory_allocated' if gpu else rss}")
    print("goals (issue 39):")
    print("\n".join(f"  {line}" for line in goal_lines(results)))
    print(f"total time: {time.perf_counter() - t_start:.0f} s")
    if args.json:
        write_json(args.json, device, args, results, archs, failures)
    if failures:
        raise SystemExit(f"failed rows: {', '.join(failures)}")


if __name__ == "__main__":
    main()
