"""Shared fixtures: a tiny dataset config, and the `../shared` development assets."""

from __future__ import annotations

import atexit
import compileall
import copy
import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CLASSES = ["00_dog", "01_bird", "02_wheeled_vehicle", "03_reptile", "04_carnivore", "05_insect",
           "06_musical_instrument", "07_primate", "08_fish"]


def checkout_view(folder: Path) -> Path:
    """`folder` (made here) as a view of the checkout to run Snakemake in: a link to each of the
    checkout's entries but `.snakemake` and the results folders. Snakemake keeps its locks, metadata
    and incomplete markers in `.snakemake` of the folder it runs in, and a run that ends deletes that
    whole lock folder (and `--unlock` every lock in it): two runs at once in one folder can break
    each other, and the suite runs in several processes (pytest-xdist, pyproject's addopts)."""
    folder.mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name != ".snakemake" and not entry.name.startswith("results"):
            (folder / entry.name).symlink_to(entry)
    return folder


@functools.cache
def workdir() -> Path:
    """The folder this test process runs Snakemake in (`checkout_view`), made once per process."""
    parent = Path(tempfile.mkdtemp(prefix="workbench-checkout-"))
    atexit.register(shutil.rmtree, parent, ignore_errors=True)
    return checkout_view(parent / "checkout")


def needs_shared(relative: str) -> Path:
    """Path of a development asset under ../shared, or skip the test saying why."""
    path = SHARED / relative
    if not path.exists():
        pytest.skip(f"{path} is absent: this test needs the shared development assets beside the checkout")
    return path


@pytest.fixture
def default_config() -> dict:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture
def tiny_ds_cfg(default_config) -> dict:
    """The default IN-9 dataset section shrunk to a few 32-px images per class."""
    cfg = copy.deepcopy(default_config["datasets"]["in9"])
    cfg.update(image_size=32, chunk_images=4, block_images=8)
    cfg["source"]["synthetic"].update(image_size=32, train_per_class=3, val_per_class=2)
    cfg["segmentation"]["iterations"] = 3
    return cfg


def tiny_stores_config() -> dict:
    """The IN-9 dataset section `tiny_stores` is built with: 2 + 2 synthetic 32-px images per class."""
    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())["datasets"]["in9"]
    cfg.update(image_size=32, chunk_images=4, block_images=8)
    cfg["source"]["synthetic"].update(image_size=32, train_per_class=2, val_per_class=2)
    cfg["stylized"].update(work_size=32, batch_images=8)
    cfg["stylized"]["styles"].update(per_class=2, size=32)
    return cfg


@pytest.fixture(scope="session")
def tiny_stores(tmp_path_factory) -> dict[str, Path]:
    """original, only_bg_t, mixed_rand and stylized stores of `tiny_stores_config()`."""
    from debias_workbench.pipeline.datasets import get_family

    cfg = tiny_stores_config()
    root = tmp_path_factory.mktemp("data")
    fam = get_family("in9")
    fam.run_step("source", cfg, 0, root / "src", [], 1, None)
    fam.run_step("segment", cfg, 0, root / "seg.zarr", [root / "src"], 1, None)
    stores = {}
    for variant in ("original", "only_bg_t", "mixed_rand", "stylized"):
        stores[variant] = root / f"{variant}.zarr"
        fam.run_step("variant", cfg, 0, stores[variant], [root / "seg.zarr", root / "segmented.manifest.json"], 1,
                     variant)
    return stores


@pytest.fixture
def tiny_store(tiny_stores) -> Path:
    return tiny_stores["original"]


def debug_batch(method, stores: dict[str, Path], batch_size: int = 6) -> dict:
    """One training batch of the tiny stores with every field `method` needs."""
    from debias_workbench.training.data import ZarrBatches

    aligned = {field: stores[variant] for field, variant in method.aligned_variants.items()}
    loader = ZarrBatches(stores["original"], "train", batch_size, shuffle=True,
                         fields=("images", "labels", "bias_labels", *method.extra_fields), aligned=aligned)
    return next(iter(loader.epoch(0)))


#: every paper config, given together on one command line as a user would
PAPER_CONFIGS = ["config/imagenet9.yaml", "config/biased_mnist_paper.yaml", "config/park_real_data.yaml",
                 "config/park_ablation.yaml", "config/imagenet100_ssl.yaml"]


@pytest.fixture(scope="session")
def paper_smoke(tmp_path_factory) -> tuple[Path, list[str]]:
    """Every paper config run end to end in smoke mode on the stand-ins of `tests/standins.py`
    (the development photos as the IN-9 folder when ../shared is present, drawn pictures
    otherwise): (the smoke results folder, the snakemake arguments that made it)."""
    from .standins import write_paper_paths
    from .test_workflow import snakemake

    root = tmp_path_factory.mktemp("paper")
    photos = SHARED / "data" / "in9-photos-dev"
    paths = write_paper_paths(root, photos if photos.exists() else None)
    args = ["--configfile", *PAPER_CONFIGS, str(paths), "--config", f"results={root / 'results'}"]
    snakemake("all", "--cores", "2", *args, timeout=1800)
    return root / "results-smoke", args


#: tests that mostly wait (on a scheduler, on Snakemake processes they start and kill): first in the
#: order, so that pytest-xdist overlaps their waiting with other tests instead of ending the run on them
WAITING_FIRST = ("tests/test_slurm.py::test_tiny_slice_through_slurm_matches_a_local_run",
                 "tests/test_slurm.py::test_a_run_longer_than_a_job_continues_over_several_jobs",
                 "tests/test_kill_anywhere.py::test_a_slice_killed_in_every_stage_ends_as_an_uninterrupted_run")
#: then the type check: a long computing test, started early so that it runs while the others wait
COMPUTING_EARLY = ("tests/test_types.py::test_the_package_type_checks_clean",)


def pytest_configure(config: pytest.Config) -> None:
    """Each test process of pytest-xdist computes with its share of the cores (OMP_NUM_THREADS, read
    by torch when it is imported, after this hook, and passed on to the processes a test starts): two
    processes of two OpenMP threads each on two cores wait at every parallel region for a thread that
    is not running, and a step then costs several times its CPU time. Snakemake sets its own jobs'
    threads; a value the user exported is kept."""
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if workers and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // int(workers)))
    if "PYTEST_XDIST_WORKER" not in os.environ:  # once, in the process that starts the others
        compile_checkout()


#: the checkout's Python folders that the suite's processes import
PACKAGES = ("debias_workbench", "benchmarks", "devtools", "tests")


def compile_checkout() -> None:
    """The checkout's bytecode, written once before any test runs. An editable install leaves the
    package uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as on the CI machines) Python then
    compiles every module again in each of the suite's hundreds of processes (Snakemake's jobs and
    starts, the tests' subprocesses), a large part of a CPU-second each for the whole package. Python reads
    bytecode that is there whatever that variable says; the files are ignored by git."""
    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the groups' marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests on `paper_smoke` change its results in turn (reruns, a regenerated store) and must see
    one another's changes in their order: one xdist group (`--dist loadgroup`, pyproject's addopts)
    runs them on one process, which builds the fixture once and, as the largest group, starts first.
    The tests on the local SLURM cluster (`cluster`: one per machine, on fixed ports) share one process
    too. Then `WAITING_FIRST`, `COMPUTING_EARLY`, then the rest in their order."""
    for item in items:
        for fixture in ("paper_smoke", "cluster"):
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(fixture))
    items.sort(key=lambda item: (item.nodeid not in WAITING_FIRST, item.nodeid not in COMPUTING_EARLY))
