"""The plan's scheduler jobs (`Job`), and the one job of each group of small GPU jobs (`workflow.job_groups`) that
takes their place (`grouped`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .job_groups import JobGroups, Member

#: the table of a job group's job (its members may feed several)
GROUPED = "small GPU jobs of several tables, grouped (cluster.min_job_minutes, workflow/job_groups.py)"


@dataclass(frozen=True)
class Job:
    """One scheduler job: its rule, the table it feeds, its estimate (wall minutes) and its request
    (runtime, GPUs, CPUs as its rule's `threads`, memory); `note`: how its runs share its GPU
    (`resources.runs_at_once`), where several do, or the speed-up assumed of its several GPUs."""

    rule: str
    target: str
    table: str
    gpus: int  #: 0: a CPU job
    cpus: int
    estimate_minutes: float
    mem_mb: float
    request_minutes: int
    jobs_needed: int
    note: str | None = None
    runs: int = 0  #: the training runs it trains (0: not a training job)
    key: str = ""  #: the wildcard value that tells its rule's jobs apart ("" for a rule of one job)
    members: tuple[Job, ...] = ()  #: a job group's jobs, run one after the other (`workflow.job_groups`)

    @property
    def gpu_hours(self) -> float:
        """GPUs x hours: the GPU-hours the job holds (a job on two GPUs holds both for its whole time)."""
        return self.gpus * self.estimate_minutes / 60

    @property
    def cpu_hours(self) -> float:
        """Hours of a CPU job (its estimate: one core's work, `cost.cpu_minutes`); 0 for a GPU job."""
        return 0.0 if self.gpus else self.estimate_minutes / 60


def job_groups(config: dict[str, Any], phases: dict[str, list[Job]]) -> JobGroups:
    """The groups of the one-GPU jobs of `phases` estimated under `cluster.min_job_minutes` (none where it is 0), in
    the order of their rules and targets (a prerequisite's: its kind, dataset, train variant and seed), which neither
    the order of the config's keys nor the order the rules and the plan find the jobs in changes."""
    least = config["cluster"]["min_job_minutes"]
    small = {
        phase: [
            Member(j.rule, j.key, j.estimate_minutes)
            for j in sorted(jobs, key=lambda j: (j.rule, j.target, j.key))
            if j.gpus == 1 and j.estimate_minutes < least
        ]
        for phase, jobs in phases.items()
    }
    return JobGroups.of(small, least)


def grouped(config: dict[str, Any], jobs: list[Job], groups: JobGroups) -> list[Job]:
    """`jobs` with the members of each group replaced by the group's one job (`GROUPED`, where its first member
    was): one GPU, its members' estimates summed, their largest memory and CPUs, the runtime Snakemake asks."""
    by_member = {(j.rule, j.key): j for j in jobs if groups.group(j.rule, j.key)}
    out: list[Job] = []
    for job in jobs:
        name = groups.group(job.rule, job.key)
        if name is None:
            out.append(job)
            continue
        members = tuple(by_member[(m.rule, m.key)] for m in groups.members[name])
        if job is not members[0]:
            continue
        note = f"{len(members)} jobs one after the other in one job (a Snakemake job group)"
        out.append(
            Job(
                name,
                ", ".join(f"{m.rule} {m.target}" for m in members),
                GROUPED,
                1,
                max(m.cpus for m in members),
                sum(m.estimate_minutes for m in members),
                max(m.mem_mb for m in members),
                groups.group_request_minutes(name, config["cluster"]["max_job_hours"]),
                1,
                note,
                members=members,
            )
        )
    return out
