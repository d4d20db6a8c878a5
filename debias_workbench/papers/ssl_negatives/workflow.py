"""What Ge et al.'s Table 1 declares to the workflow (collected by `workflow.paper_hooks`; the generic layers
name no paper): the rule of its patch negatives' code that its protocol names. Like every paper's workflow
module it imports only the layers below the workflow."""

from __future__ import annotations

#: {rule: value} of the code its runs execute where no setting chooses (`workflow.protocol.code_rules`)
CODE_RULES = {
    # training/negatives.py draw_tilings: where a patch negative's patches come from (Ge et al. Sec. 2.3)
    "patch_tiling": "ceil(224 / d)^2 cells of a grid at a random offset"
}
