"""What a kind of prerequisite artifact is: something a method needs before its run trains, built by
a job of its own and shared by every run that needs the same one (the kinds:
`training.methods.PREREQUISITES`). Torch-free: the workflow reads it while it parses.

A method names the kinds it needs in its declaration (`MethodSpec.prerequisites`); the kinds are
registered beside the methods (`training.methods.PREREQUISITES`). Everything that handles one
(`training.prerequisites`: its job config and file; the workflow's `prerequisite` rule; the cost
model; `workbench prerequisite`; the trainer, which hands each run its files by kind) reads only
this declaration, so a new kind is one module and one registry line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PrerequisiteCost:
    """How a prerequisite's job is costed (`workflow.cost.prerequisite_seconds`): `networks` networks
    of the run's architecture (an argument naming how many, or None: one), `steps` steps each (the
    argument naming how many), each a step of the cost model's reference row at the run's batch size
    and image side."""

    steps: str
    networks: str | None = None


@dataclass(frozen=True)
class PrerequisiteKind:
    #: its name: the key of its settings in its job config, its folder under the results' prerequisites,
    #: what a method's `prerequisites` and `workbench prerequisite --kind` name
    name: str
    #: the `method_args` that identify one (two runs whose values agree share one); the others are the runs' own
    args: tuple[str, ...]
    #: "module:function" under debias_workbench that builds one: function(job config, train store, out file)
    builder: str
    #: how its job is costed
    cost: PrerequisiteCost
    #: the revision of its code: raised with a fix that moves what it holds, so that every one (and, through
    #: its file, every run reading it) is made again; 0 enters no identity
    revision: int = 0
    #: one line for the plan and the docs
    description: str = ""

    def settings(self, method_args: dict[str, Any]) -> dict[str, Any]:
        """What one is of its runs' `method_args` (`args`) and of its code (`revision`, where not 0): part of its
        job config (`prerequisites.job_config`) and of whatever seeds it from its identity."""
        return {
            self.name: {k: method_args[k] for k in self.args},
            **({"revision": self.revision} if self.revision else {}),
        }
