"""Small GPU jobs run one after the other in one scheduler job: Snakemake's own job groups, on a cluster.

A scheduler starts a job in seconds to minutes and a site caps the jobs one user queues, so a GPU job of seconds of
work costs more in queueing and start-up than its work. Where `cluster.min_job_minutes` is set (the real-scale
configs), the one-GPU jobs of a phase estimated under it (`workflow.plan.groupable_jobs`: the prerequisite
artifacts, before the runs that read them train; the scorings and analyses, after) are packed in the plan's order into
groups of at least that much work (`pack`). Each member keeps its own rule, config file, inputs, outputs and command:
a group is only how Snakemake submits them (the `group:` directive, `snakemake_group`), and Snakemake starts a group
only once every member's inputs exist. Where it is 0 (the demo) there are no groups, and a local run (`--cores N`)
ignores them.

What Snakemake asks the scheduler for a group (`snakemake.resources.GroupResources.basic_layered`, Snakemake 9):
jobs that could run at once (no path between them) share a layer, whose resources add up and whose runtime is its
longest; layers follow one another, their runtimes summed and their other resources the largest; a constraint
(`--resources`) stacks a layer's jobs into layers of their own. Every member asks `GROUP_GPU` = 1, a resource local
to each submitted job (`resource_scopes`) of which the workflow gives 1 (`prepare`), so each member is a layer of
its own: the group asks one GPU, the sum of its members' runtimes and the largest of their memory and CPUs (threads),
and its job's own Snakemake runs them one after the other on that GPU. The runtimes are its members' shares of one
request for the group's work (`JobGroups.request_minutes`: the margin on each member's estimate, the minimum
`cost.MINIMUM_MINUTES` spread over the members, each member at least `MEMBER_MINIMUM_MINUTES`), so that a group asks
what one job of its summed estimate would, plus those floors.

Snakemake merges the jobs of one group id into one group job only where they are connected in the graph, unless
`--group-components ID=N` says how many unconnected parts one job may take; the workflow sets that for its own ids
when Snakemake asks for a job's group (after the command line's settings are in place), so no profile has to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .cost import request_minutes

#: the resource each member of a group asks 1 of; each submitted job has 1 (`prepare`)
GROUP_GPU = "group_gpu"
#: the least runtime a member asks (its process's start: Python, torch, the model and stores), so that a group that
#: runs only some of its members (a rerun) still asks enough for each
MEMBER_MINIMUM_MINUTES = 2


@dataclass(frozen=True)
class Member:
    """A job that may join a group: its rule, `key` (the wildcard value that tells the rule's jobs apart, "" for a
    rule of one job) and its estimate (minutes)."""

    rule: str
    key: str
    minutes: float


def pack(minutes: list[float], least: float) -> list[list[int]]:
    """The groups (indices into `minutes`) of consecutive jobs that each hold at least `least` minutes, a last one
    short of it joined to the group before; where all of them hold less, one group of them all. A group of one job
    is no group (left out)."""
    groups: list[list[int]] = []
    current: list[int] = []
    for index in range(len(minutes)):
        current.append(index)
        if sum(minutes[i] for i in current) >= least:
            groups.append(current)
            current = []
    if current and groups:
        groups[-1] += current
    elif current:
        groups.append(current)
    return [g for g in groups if len(g) > 1]


@dataclass
class JobGroups:
    """The groups of a config's small GPU jobs: each member's group id and its group's members in order."""

    of_member: dict[tuple[str, str], str] = field(default_factory=dict)
    members: dict[str, list[Member]] = field(default_factory=dict)

    @classmethod
    def of(cls, phases: Mapping[str, Iterable[Member]], least: float) -> JobGroups:
        """The groups of each phase's members (`pack`), named `<phase>_<k>`; none where `least` is 0."""
        out = cls()
        for phase, listed in phases.items():
            candidates = list(listed)
            if not least or not candidates:
                continue
            for k, indices in enumerate(pack([m.minutes for m in candidates], least), start=1):
                name = f"{phase}_{k}"
                out.members[name] = [candidates[i] for i in indices]
                out.of_member.update({(candidates[i].rule, candidates[i].key): name for i in indices})
        return out

    def group(self, rule: str, key: str) -> str | None:
        """The group id of the job of `rule` whose wildcard value is `key`; None where it runs as a job of its own."""
        return self.of_member.get((rule, key))

    def components(self) -> dict[str, int]:
        """{group id: its members}: the unconnected parts Snakemake may merge into one job (`--group-components`)."""
        return {name: len(listed) for name, listed in self.members.items()}

    def request_minutes(self, rule: str, key: str, max_job_hours: float, attempt: int = 1) -> int:
        """The runtime the member asks for: its share of `cost.request_minutes` of its group's summed estimate, the
        minimum spread over the members in equal parts (the request of the members up to it less the request of
        those before it), at least `MEMBER_MINIMUM_MINUTES`; the group's runtime, their sum, is then that one
        request, plus what those floors add."""
        name = self.of_member[(rule, key)]
        listed = self.members[name]
        position = next(i for i, m in enumerate(listed) if (m.rule, m.key) == (rule, key))
        before = sum(m.minutes for m in listed[:position])

        def upto(count: int, minutes: float) -> int:
            return request_minutes(minutes, max_job_hours, attempt, count / len(listed)) if count else 0

        return max(
            MEMBER_MINIMUM_MINUTES, upto(position + 1, before + listed[position].minutes) - upto(position, before)
        )

    def group_request_minutes(self, name: str, max_job_hours: float, attempt: int = 1) -> int:
        """The runtime Snakemake asks for group `name`: its members' requests summed."""
        return sum(self.request_minutes(m.rule, m.key, max_job_hours, attempt) for m in self.members[name])


def on_cluster(workflow: Any) -> bool:
    """Whether this Snakemake submits jobs (`--executor slurm`), runs a submitted one, or plans a dry run; not a
    local run, where Snakemake ignores groups and `GROUP_GPU` must not put its small jobs in a queue of one."""
    return bool(not workflow.local_exec or workflow.remote_exec or workflow.dryrun)


def prepare(workflow: Any, groups: JobGroups) -> None:
    """Give each submitted job one `GROUP_GPU`, a resource local to it (not counted over the jobs at once), where
    the config has groups."""
    if groups.members:
        workflow.resourcescope(**{GROUP_GPU: "local"})
        workflow.global_resources[GROUP_GPU] = 1


def snakemake_group(
    workflow: Any, groups: JobGroups, rule: str, key: Callable[[Any], str]
) -> Callable[[Any], str | None] | None:
    """The `group:` of `rule` (`key`: wildcards -> the member's key): its group id, None for a job of its own (None
    where the config has no groups). The first call sets `--group-components` of the groups (module docstring)."""
    if not groups.members:
        return None

    def group(wildcards: Any) -> str | None:
        name = groups.group(rule, key(wildcards))
        settings = workflow.group_settings
        if name is not None and name not in settings.group_components:
            settings.group_components = {**settings.group_components, **groups.components()}
        return name

    return group


def group_resources(
    workflow: Any,
    groups: JobGroups,
    rule: str,
    key: Callable[[Any], str],
    runtime: Callable[[Any, int], int],
    hours: float,
) -> dict[str, Any]:
    """The `resources:` a member of a group asks beside its rule's (`runtime`: the rule's, for a job of its own):
    its share of the group's request, and `GROUP_GPU` where Snakemake submits groups (`on_cluster`); none where the
    config has no groups."""
    if not groups.members:
        return {}

    def member_runtime(wildcards: Any, attempt: int) -> int:
        if groups.group(rule, key(wildcards)) is None:
            return runtime(wildcards, attempt)
        return groups.request_minutes(rule, key(wildcards), hours, attempt)

    def slot(wildcards: Any) -> int:
        return int(groups.group(rule, key(wildcards)) is not None and on_cluster(workflow))

    return {"runtime": member_runtime, GROUP_GPU: slot}
