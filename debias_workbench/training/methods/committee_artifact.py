"""BiasEnsemble's committee (Lee et al., AAAI 2023) as a prerequisite artifact (`prerequisite_kind`):
K early-stopped GCE models' votes on every training row, built by a job of its own
(`committee_job.build_committee`) and read by every run of LfF+BE and Park et al. on the same
training store, seed, training settings and committee arguments, as the authors' code draws the
same committee for both from its global seed. Torch-free: the workflow reads it while it parses.
"""

from __future__ import annotations

from ..prerequisite_kind import PrerequisiteCost, PrerequisiteKind

COMMITTEE = PrerequisiteKind(
    name="committee",
    # the method_args a committee depends on (the others, `confidence` among them, are its runs' own)
    args=("committee_size", "committee_steps", "committee_valid_every", "committee_vote", "q"),
    builder="debias_workbench.training.methods.committee_job:build_committee",
    # each of committee_size members trains committee_steps GCE steps of the run's network
    cost=PrerequisiteCost(steps="committee_steps", networks="committee_size"),
    description="BiasEnsemble's committee: the early-stopped GCE members' votes on every training row",
)
