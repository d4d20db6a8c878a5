"""Each paper config's protocol (debias_workbench/workflow/protocol.py) against the config as it resolves: no setting
that differs from the paper's without a declared reason, no stale deviation, no training setting or
method argument of a covered run that the protocol does not account for."""

from __future__ import annotations

import copy

import pytest
import yaml

from debias_workbench.workflow.config import deep_merge, resolve_config
from debias_workbench.workflow.protocol import check, note_problems, report_protocols

from .conftest import PAPER_CONFIGS, ROOT


def _resolved(default_config, path: str) -> dict:
    return resolve_config(deep_merge(default_config, yaml.safe_load((ROOT / path).read_text())))


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=[f"paper_protocol[{p.split('/')[-1]}]" for p in PAPER_CONFIGS])
def test_paper_protocol(default_config, path):
    own = yaml.safe_load((ROOT / path).read_text())
    assert own.get("protocols"), f"{path} declares no protocol"
    config = _resolved(default_config, path)
    for paper in own["protocols"]:
        assert check(config, paper) == [], paper
        assert len(config["protocols"][paper]["settings"]) >= 10


@pytest.mark.parametrize("path", PAPER_CONFIGS, ids=[f"fidelity[{p.split('/')[-1]}]" for p in PAPER_CONFIGS])
def test_fidelity_no_deviation_lives_only_in_a_note(default_config, path):
    """Every difference from the paper (or from the authors' code where the paper is silent) that a
    protocol's notes describe is a settings row with its `deviation`: a note naming rows names
    existing deviation rows, and a context note is not worded as a difference."""
    config = _resolved(default_config, path)
    for paper in yaml.safe_load((ROOT / path).read_text())["protocols"]:
        assert note_problems(config["protocols"][paper], f"protocols.{paper}") == [], paper


def test_fidelity_notes_on_a_hand_made_protocol(default_config):
    """A context note may say what the paper leaves open; one worded as a difference fails, as does a
    note naming a row that does not exist or declares no deviation; a note naming a deviation row
    holds, and the report prints it with the rows' names."""
    from debias_workbench.report.build import protocol_table
    from debias_workbench.report.document import Document

    config = _hand_made(default_config)
    protocol = config["protocols"]["demo"]
    protocol["notes"] = ["The paper leaves the crop's ratio open; the one here is torchvision's."]
    assert check(config, "demo") == []
    for worded in ("Here the gate is trained, where the authors' never is.",
                   "The dictionary starts empty instead of full.",
                   "The head is optimised here; the authors' is not.",
                   "Our order differs from Algorithm 1's."):
        protocol["notes"] = [worded]
        [problem] = note_problems(protocol, "protocols.demo")
        assert "protocols.demo.notes[0]" in problem and "names no row" in problem
    protocol["notes"] = [{"text": "The rate is halved, where the paper's is not.",
                          "rows": ["learning rate", "no such row"]}]
    problems = note_problems(protocol, "protocols.demo")
    assert len(problems) == 2 and "'learning rate', which declares no deviation" in problems[0]
    assert "'no such row', which no setting of protocols.demo has" in problems[1]
    protocol["notes"][0]["rows"] = ["learning rate"]
    protocol["settings"][0].update(paper=0.5, deviation="a reason")
    assert check(config, "demo") == []
    doc = Document("t")
    protocol_table(doc, report_protocols(config)["demo"])
    assert "The rate is halved, where the paper's is not. (Rows: learning rate.)" in doc.markdown()


def _hand_made(default_config) -> dict:
    config = resolve_config(copy.deepcopy(default_config))
    config["protocols"] = {"demo": {
        "title": "a hand-made protocol", "section": "clad_table2", "runs": ["clad"],
        "settings": [{"setting": "learning rate", "key": "training.optimizer.lr", "runs": ["clad"],
                      "paper": config["training"]["optimizer"]["lr"], "source": "here"},
                     {"setting": "seeds", "key": "config:seeds", "paper": [0, 1, 2], "source": "here"}],
        "not_compared": [{"key": "training", "reason": "everything else"},
                         {"key": "method_args", "reason": "everything else"},
                         {"key": "dataset_config", "reason": "everything else"},
                         *({"key": f"code:{rule}", "reason": "its rules"} for rule in
                           ("scored_checkpoint", "positive_partner", "negative_dictionary_start"))]}}
    return config


def test_a_protocol_catches_drift_stale_deviations_and_uncovered_keys(default_config):
    """The check on a hand-made protocol: it holds as written; a changed default (the config's lr)
    without a declared deviation fails naming the key; a deviation where the values agree fails as
    stale; a covered run's key that no setting names fails; and the report's rows carry both values."""
    config = _hand_made(default_config)
    assert check(config, "demo") == []
    drift = copy.deepcopy(config)
    drift["training"]["optimizer"]["lr"] *= 2
    [problem] = check(drift, "demo")
    assert "training.optimizer.lr" in problem and "declare a `deviation`" in problem
    drift["protocols"]["demo"]["settings"][0]["deviation"] = "a reason"
    assert check(drift, "demo") == []
    rows = report_protocols(drift)["demo"]["rows"]
    assert rows[0]["paper"] * 2 == rows[0]["this_run"] and rows[0]["deviation"] == "a reason"
    stale = copy.deepcopy(config)
    stale["protocols"]["demo"]["settings"][1]["deviation"] = "no longer true"
    assert any("remove the deviation" in p for p in check(stale, "demo"))
    uncovered = copy.deepcopy(config)
    uncovered["protocols"]["demo"]["not_compared"] = [{"key": "method_args", "reason": "-"}]
    problems = check(uncovered, "demo")
    assert any("training.epochs of run 'clad'" in p for p in problems)
    assert not any("training.optimizer.lr of run" in p for p in problems)  # covered by its setting
    assert any("dataset_config.geometry of run 'clad'" in p for p in problems)
    assert any("dataset_config.source.synthetic.bg_correlation of run 'clad'" in p for p in problems)
    # not settings: how the store is written, the user's file paths, a source section the kind leaves unread
    assert not any(f"dataset_config.{key} of run" in p for p in problems
                   for key in ("chunk_images", "block_images", "source.in9_folder.root", "source.imagenet.root"))


def test_a_code_rule_is_a_setting_that_must_be_declared(default_config):
    """A `code:` key reads the workbench's fixed rule (`code_rules()`): a paper value that differs needs a deviation,
    one that agrees must not declare one, and an unknown rule is reported by name."""
    from debias_workbench.workflow.protocol import code_rules

    config = _hand_made(default_config)
    settings = config["protocols"]["demo"]["settings"]
    settings.append({"setting": "probe checkpoint", "key": "code:probe_checkpoint", "paper": "best val epoch",
                     "source": "here"})
    [problem] = check(config, "demo")
    assert "code:probe_checkpoint" in problem and "declare a `deviation`" in problem
    settings[-1]["deviation"] = "a reason"
    assert check(config, "demo") == []
    settings[-1] = {**settings[-1], "paper": code_rules()["probe_checkpoint"]}
    assert any("remove the deviation" in p for p in check(config, "demo"))
    settings[-1] = {"setting": "no such rule", "key": "code:no_such_rule", "paper": 1, "source": "here"}
    assert any("has no key code:no_such_rule" in p for p in check(config, "demo"))


def test_the_report_prints_the_protocol_table(default_config):
    """The report's table: one row per setting with the paper's value, this run's and the source, and the
    reason where they differ."""
    from debias_workbench.report.build import protocol_table
    from debias_workbench.report.document import Document

    config = _hand_made(default_config)
    config["protocols"]["demo"]["settings"][0]["paper"] = 0.5
    config["protocols"]["demo"]["settings"][0]["deviation"] = "a reason"
    doc = Document("t")
    protocol_table(doc, report_protocols(config)["demo"])
    text = doc.markdown()
    lr = config["training"]["optimizer"]["lr"]
    assert "Protocol: a hand-made protocol" in text
    assert f"| learning rate | `0.5` | `{lr}` | here; **differs**: a reason |" in text
    assert "| seeds | `[0, 1, 2]` | `[0, 1, 2]` | here |" in text


@pytest.mark.parametrize("path", [*PAPER_CONFIGS, "config/matrix_paper.yaml", "config/config.yaml"],
                         ids=lambda p: f"fidelity[{p.split('/')[-1]}]")
def test_fidelity_no_committee_votes_on_a_bias_free_val_split(default_config, path):
    """BiasEnsemble's best-validation vote needs a val split that holds the training's bias (its valid folders,
    DisEnt issue 1): no run of a shipped config votes `best_valid` on a family whose val split is bias-free
    (`DatasetFamily.bias_free_val`: Colored MNIST, Waterbirds), where a bias-only member scores chance."""
    from debias_workbench.pipeline.datasets import FAMILIES, family_name
    from debias_workbench.workflow.slices import run_config

    config = _resolved(default_config, path)
    voting = []
    for name, exp in config["experiments"].items():
        args = run_config(config, name, config["seeds"][0])["method_args"]
        if args.get("committee_vote") == "best_valid":
            voting.append(exp["dataset"])
            assert not FAMILIES[family_name(config["datasets"][exp["dataset"]])].bias_free_val, name
    assert path != "config/park_real_data.yaml" or {"bffhq", "bar"} <= set(voting)


def test_fidelity_the_config_check_refuses_a_committee_vote_on_a_bias_free_val_split(default_config):
    """The config check holds the same rule for any config (`committee_vote: best_valid` needs `val_holds_bias`, which
    Colored MNIST does not offer): the key, the capability and the family are named; BFFHQ's vote passes."""
    from debias_workbench.workflow.config import ConfigError

    own = yaml.safe_load((ROOT / "config/park_real_data.yaml").read_text())
    own["grids"]["park_cmnist"]["methods"]["lff_be"]["method_args"] = {"committee_vote": "best_valid"}
    with pytest.raises(ConfigError) as error:
        resolve_config(deep_merge(default_config, own))
    assert "grids.park_cmnist.methods.lff_be.method: method 'lff_be' needs val_holds_bias" in str(error.value)
    assert "dataset family 'colored_mnist'" in str(error.value) and "bffhq" not in str(error.value)


def test_fidelity_a_code_rule_of_a_run_needs_its_row(default_config):
    """Every `code:` rule that holds for a listed run (`run_code_rules`: every run's, its method's, its family's) is
    a row of the protocol: removing one (here Park et al.'s x^BN batch-norm pass, or the checkpoint scored) fails."""
    config = _resolved(default_config, "config/park_real_data.yaml")
    assert check(config, "park") == []
    for rule in ("code:partner_batch_norm", "code:scored_checkpoint", "code:rebias_update_order"):
        cut = copy.deepcopy(config)
        cut["protocols"]["park"]["settings"] = [s for s in cut["protocols"]["park"]["settings"] if s["key"] != rule]
        problems = check(cut, "park")
        assert problems and all(rule in p and "no setting names it" in p for p in problems)
