"""`pip install .` as a user runs it: one import package and one command, nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .conftest import ROOT


def test_pip_install_into_an_empty_target_gives_one_package_and_the_workbench_command(tmp_path):
    """The tracked files copied to a fresh folder (the build writes beside its sources), installed
    with pip into an empty target: exactly `debias_workbench`, its dist-info and `bin/workbench`,
    and the installed command runs from there (`workbench --help` lists the commands)."""
    source, target = tmp_path / "source", tmp_path / "target"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, tracked.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target",
                    str(target), str(source)], check=True, capture_output=True, timeout=300)
    top = {p.name for p in target.iterdir()}
    assert {p for p in top if not p.endswith(".dist-info")} == {"debias_workbench", "bin"}, top
    assert len([p for p in top if p.endswith(".dist-info")]) == 1 and [p.name for p in (target / "bin").iterdir()] == ["workbench"]
    assert (target / "debias_workbench" / "workflow").is_dir() and not (target / "devtools").exists()
    papers = ROOT / "debias_workbench" / "papers"  # the numbers each paper's tables quote (package-data)
    numbers = list(papers.glob("*/numbers.yaml"))
    assert numbers and all((target / p.relative_to(ROOT)).is_file() for p in numbers), "numbers.yaml"
    env = {**os.environ, "PYTHONPATH": str(target)}
    shown = subprocess.run([sys.executable, str(target / "bin" / "workbench"), "--help"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    for command in ("verify", "report", "generate", "train", "evaluate"):
        assert command in shown.stdout
