# Paths and helpers shared by the rule files. Each job reads its config slice from a file
# named by the slice's hash (workbench.slices): a job reruns when, and only when, its slice,
# its input files or its code change. Beside the helpers: the names every rule file shares, the
# jobs' environment (set once: workflow_environment), the job server's start and stop, and the
# global wildcard constraints (at the end). The config itself is validated by the Snakefile.
import os
import re
import sys
from pathlib import Path

from debias_workbench.pipeline import variants
from debias_workbench.pipeline.sources.listing import folder_fingerprint
from debias_workbench.pipeline.datasets import get_family
from debias_workbench.training.methods import PREREQUISITES
from debias_workbench.training.prerequisites import jobs as prerequisites, relative_path
from debias_workbench.workflow import job_groups, job_server, paper_hooks
from debias_workbench.workflow import job_process
from debias_workbench.workflow import resources as res
from debias_workbench.workflow.config import background_challenge_runs, pack_jobs, packs, runs, scoring, scoring_packs
from debias_workbench.workflow.lookup import dataset_family, dataset_variants
from debias_workbench.workflow.plan import config_job_groups
from debias_workbench.workflow.report_slice import report_config
from debias_workbench.workflow.slices import (analysis_config, config_provenance, dataset_job_config, imagenet_evaluation_config,
                              official_evaluation_config, run_config, scoring_config, JobConfigs)

R = config["results"]
JOB_CONFIGS = JobConfigs(R)  # every job's config file, written by rule job_config when the job is to run
# the config files in the order Snakemake merged them (the Snakefile's `configfile`, then --configfile's),
# each once, relative to the working directory where inside it, and the --config overrides: the report names them
_GIVEN = [str(f) for f in workflow.config_settings.configfiles]
_FILES = [str(f) for f in workflow.configfiles if str(f) not in _GIVEN] + _GIVEN
_SHOWN = [os.path.relpath(f) if os.path.abspath(f).startswith(os.getcwd() + os.sep) else f for f in _FILES]
PROVENANCE = config_provenance(config, list(dict.fromkeys(_SHOWN)), dict(workflow.config_settings.config))
RUNS = runs(config)  # every (experiment, seed): what every declaration (experiments, sweeps, grids) expands to
PACKS = packs(config)  # the runs trained in one process (rules/runs.smk): PACKS[0] holds those trained alone
SCORING_PACKS = scoring_packs(config)  # the runs scored in one process: every seed of an experiment, or of a grid pack
THREADS = config["training"]["threads"]  # config/config.yaml sets it (the schema: 1)
RUNS_PER_GPU = config["training"]["runs_per_gpu"]  # a GPU training job's runs at once (its resources follow)
PY = job_process.PYTHON_COMMAND  # every job's interpreter, from the environment (workflow_environment)
PREREQUISITE_OUTPUT = f"{R}/{relative_path('{kind}', '{digest}')}"  # a prerequisite's file (rule prerequisite)
# the groups of small GPU jobs a cluster runs as one job each (workbench.job_groups: the prerequisites, the scorings
# and analyses); none where cluster.min_job_minutes is 0 (the demo), and a local run ignores them
JOB_GROUPS = config_job_groups(config) if config["cluster"]["min_job_minutes"] else job_groups.JobGroups()
job_groups.prepare(workflow, JOB_GROUPS)


def small_job_group(rule, key):
    """`group:` of `rule`'s jobs (`key`: wildcards -> the job's wildcard value): the job group it joins, if any."""
    return job_groups.snakemake_group(workflow, JOB_GROUPS, rule, key)


def small_job_resources(rule, key, resources):
    """`resources` of `rule`'s jobs with, for a member of a group, its share of the group's runtime and GROUP_GPU."""
    return {**resources, **job_groups.group_resources(workflow, JOB_GROUPS, rule, key, resources["runtime"],
                                                      config["cluster"]["max_job_hours"])}


def workflow_environment():
    """Every variable the workflow puts in its own environment, which its jobs inherit: set once, below.
    - WORKBENCH_PYTHON and PYTHONPATH: the interpreter that runs Snakemake, or the job's own environment's
      under --use-conda, with the checkout importable either way (conda environments do not install the
      project); no job's params or command name a path (workbench.job_process.interpreter_environment);
    - training.trackers and runs_per_gpu, the train and evaluate jobs' --trackers and --runs-per-gpu
      defaults: where curves are also shown, or how many runs share a GPU, is no part of a run's identity
      (workflow.slices.SPEED_ONLY_TRAINING_KEYS) nor of any command (workbench.job_process.training_environment);
    - malloc keeping freed memory (workbench.job_process.JOB_ENVIRONMENT), where the user has not set it."""
    python = "python" if workflow.deployment_settings.deployment_method else sys.executable
    return {**{k: v for k, v in job_process.JOB_ENVIRONMENT.items() if k not in os.environ},
            **job_process.interpreter_environment(workflow.basedir, python), **job_process.training_environment(config["training"])}


os.environ.update(workflow_environment())
# a cluster job's own Snakemake ignores SLURM's warning signal, which the train command takes (workbench.resources)
res.ignore_warning_signal(workflow.is_main_process)
# a job's shell outlives the scheduler's SIGTERM until its command ends (workbench.job_process.SHELL_PREFIX)
shell.prefix(job_process.SHELL_PREFIX)

# A local run forks its training, scoring and analysis jobs from one warm interpreter (workbench.job_server):
# torch is imported once, not once per job. Not on a cluster, under --use-conda or with WORKBENCH_WARM_JOBS=0.
_JOB_SERVER = []


onstart:  # where Snakemake runs its jobs is known from here on (not while it reads the Snakefile)
    res.apply_continuation_retries(workflow, training_minutes, config["cluster"]["max_job_hours"])
    for note in (res.allocation_note(workflow.local_exec), res.cluster_gpu_cap_note(workflow.local_exec, NODE_GPU_CAP)):
        if note:  # inside an sbatch / salloc allocation: what a stop means; submitting: the node's GPU cap
            print(note, file=sys.stderr, flush=True)
    if job_server.wanted(workflow.local_exec, bool(workflow.deployment_settings.deployment_method), workflow.touch,
                         [job.rule.name for job in workflow.dag.needrun_jobs()]):
        _JOB_SERVER.append(job_server.start(Path(R) / "logs" / "job_server.log"))


onsuccess:
    job_server.stop(_JOB_SERVER.pop() if _JOB_SERVER else None)


onerror:
    job_server.stop(_JOB_SERVER.pop() if _JOB_SERVER else None)


def datasets_of(family):
    return [d for d in config["datasets"] if dataset_family(config, d) == family]


def dataset_config_file(dataset):
    """The job config of every generation step of `dataset` (its section and the seed)."""
    return JOB_CONFIGS.path("datasets", dataset_job_config(config, dataset))


def variant_store(dataset, variant):
    return f"{R}/datasets/{dataset}/{variant}.zarr"


def run_files(name, experiments=None):
    """`name` (e.g. eval.jsonl) of every run, or of the runs of `experiments`."""
    return [f"{R}/runs/{e}/seed{s}/{name}" for e, s in RUNS if experiments is None or e in experiments]


EVAL_DATASET = config["evaluation"]["dataset"]


def test_stores(experiment):
    """{test set: store} a run of `experiment` is scored on (its dataset family's declaration)."""
    dataset, sets, _groups = scoring(config, experiment)
    return {name: variant_store(dataset, variant) for name, variant in sets.items()}


# the Background Challenge runs: scored on every variant of the main evaluation dataset; the analyses,
# the official test images and the main tables read them
MAIN_EXPERIMENTS = background_challenge_runs(config)
OFFICIAL = config["evaluation"].get("official_dataset")  # a bg_challenge dataset: the official test images
# the analyses of trained models the papers run (workflow.paper_hooks.analysis_jobs; their rules are in the papers'
# own files), whose rows the report reads, and what else a paper's analyses hand the report beside them, as
# {input of the report's job: (its option of `workbench report`, the file)}
ANALYSIS_JOBS = paper_hooks.analysis_jobs(config, MAIN_EXPERIMENTS)
ANALYSIS_FILES = [f"{R}/analysis/{job.name}.jsonl" for job in ANALYSIS_JOBS]
REPORT_ARRAYS = {}


def external_folder(wildcards):
    """The user's folder of an `external` test set (ImageNet-Sketch, ImageNet-R) of a dataset."""
    return os.path.expanduser(config["datasets"][wildcards.dataset]["external"][wildcards.variant])


def eval_stores(dataset):
    """{variant: store path} for every variant of `dataset`."""
    return {v: variant_store(dataset, v) for v in dataset_variants(config, dataset)}


def store_args(stores):
    """VARIANT=STORE pairs for the CLIs' --stores option."""
    return " ".join(f"{v}={p}" for v, p in stores.items())


OFFICIAL_STORES = eval_stores(OFFICIAL) if OFFICIAL else {}


def one_of(names):
    """A wildcard regex matching exactly one of `names` (which may hold dots); nothing when
    there are none (an empty constraint would match everything)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def source_paths(dataset):
    """What the listing reads: the synthetic folder the workflow makes, or the folders (and
    mapping file) the user supplies, as declared inputs (checked before the DAG: workbench.user_paths)."""
    source = config["datasets"][dataset]["source"]
    if source["kind"] == "synthetic":
        return [f"{R}/sources/{dataset}_synthetic"]
    spec_ = source[source["kind"]]
    return [os.path.expanduser(spec_[k]) for k in ("root", "annotations", "masks", "mapping") if spec_.get(k)]


def user_folders_fingerprint(wildcards):
    """Changes when images are added, removed or renamed in the user's folders (their folders'
    modification times), so the listing and everything after it rerun."""
    if config["datasets"][wildcards.dataset]["source"]["kind"] == "synthetic":
        return ""
    return folder_fingerprint(source_paths(wildcards.dataset))


def pack_runs(pack, wildcards):
    """The run configs of one training job of `pack` (wildcards: the experiment or the variant, and the seed)."""
    wildcards = dict(wildcards)
    return [run_config(config, e, int(wildcards["seed"])) for e in pack.experiments(wildcards)]


ALONE = PACKS[0]  # every run declared alone (or by a sweep): a pack of one run, `{experiment}`, rule `train`


def alone(function):
    """`function(ALONE, wildcards)` as a function of a `train` job's wildcards (experiment, seed)."""
    return lambda wildcards: function(ALONE, wildcards)


def train_launcher(pack, wildcards):
    """How a training job of `pack` starts Python: with `training.gpus` N > 1, torchrun with N processes
    of THREADS threads each (workbench.resources.launcher)."""
    return res.launcher(PY, res.gpus(pack_runs(pack, wildcards)), THREADS)


def train_threads(pack, wildcards):
    return THREADS * res.gpus(pack_runs(pack, wildcards))


def train_resources(pack):
    """`resources:` of `pack`'s training rule: each job's memory, runtime and GPUs from its own runs, the
    runtime for the work their checkpoints leave (a retried or continued job: workbench.resources.training_left),
    and SLURM's warning signal (workbench.resources.slurm_warning)."""
    out = res.rule_resources(config, True, lambda wc: res.training(pack_runs(pack, wc), RUNS_PER_GPU, THREADS),
                             lambda wc: res.gpus(pack_runs(pack, wc)),
                             lambda wc: res.training_left(pack_runs(pack, wc), RUNS_PER_GPU, THREADS, f"{R}/runs"))
    return {**out, **res.slurm_warning(out["runtime"])}  # SLURM's warning: the trainer checkpoints at its next step


def scoring_resources(pack):
    """`resources:` of `pack`'s scoring rule: each job's from its test sets (and the official ones) and runs."""
    return res.rule_resources(config, True, lambda wc: res.evaluation(
        config, len(test_stores(pack_scored(pack, wc))) + len(OFFICIAL_STORES) * pack.official,
        len(pack.members) * len(pack.seeds), scoring(config, pack_scored(pack, wc))[0]))


def training_minutes():
    """{training rule: its jobs' estimates}: on a cluster, a training job whose runs outlast cluster.max_job_hours
    continues over several jobs, its rule's retries (set at the start: workbench.resources.apply_continuation_retries)."""
    return {f"train{pack.name}": [res.training(pack_runs(pack, wc), RUNS_PER_GPU, THREADS)[0]
                                  for wc in pack_jobs(config, pack)] for pack in PACKS}


def pack_scored(pack, wildcards):
    """The experiment whose scoring a job of `pack` stands for (a pack's runs share dataset and train
    variant, so their test sets and scoring config)."""
    return pack.experiments(dict(wildcards))[0]


def scoring_inputs(pack, wildcards):
    """A scoring job's config and test stores, and where its runs are scored on the official images
    too, that scoring's config and stores."""
    official = {"official_config": JOB_CONFIGS.path("evaluate", official_evaluation_config(config)),
                "official_stores": list(OFFICIAL_STORES.values())} if pack.official else {}
    return {"config": JOB_CONFIGS.path("evaluate", scoring_config(config, pack_scored(pack, wildcards))),
            "stores": list(test_stores(pack_scored(pack, wildcards)).values()), **official}


def train_inputs(pack, wildcards):
    """A training job's config, the runs' training store, the stores of the variants their methods
    read alongside it, their test stores where a run scores them during training (curves, model
    selection), their pretrained weights (checked before the DAG: workbench.user_paths), and the files of the
    prerequisites they need (the train job finds each under its --prerequisites folder by its kind and digest)."""
    runs_ = pack_runs(pack, wildcards)
    first = runs_[0]  # a pack's runs share their dataset and train variant
    aligned = {field: variant for run in runs_ for field, variant in run["aligned_variants"].items()}
    monitored = any("curves" in run or "model_selection" in run for run in runs_)
    weights = [os.path.expanduser(run["training"]["pretrained"]) for run in runs_ if run["training"].get("pretrained")]
    return {"config": JOB_CONFIGS.path("train", {"runs": runs_}),  # the job: its runs, trained one after the other
            "store": variant_store(first["dataset"], first["train_variant"]),
            **{field: variant_store(first["dataset"], variant) for field, variant in aligned.items()},
            **({f"test_{name}": path for name, path in test_stores(first["experiment"]).items()} if monitored else {}),
            **({"pretrained": sorted(set(weights))} if weights else {}),
            **({"prerequisites": files} if (files := run_prerequisites(runs_)) else {})}


def run_prerequisites(runs_):
    """The files of the prerequisites `runs_` need, each once (rule `prerequisite`, rules/prerequisites.smk)."""
    return sorted(f"{R}/{job.path}" for job in prerequisites(runs_))


_PREREQUISITE_JOBS = {}  # prerequisite_jobs()'s, made when first asked for


def prerequisite_jobs():
    """{(kind, digest): job} of every prerequisite the config's runs need: the jobs of rule `prerequisite`."""
    if not _PREREQUISITE_JOBS:
        _PREREQUISITE_JOBS.update({(job.kind.name, job.digest): job for job in
                                   prerequisites(run_config(config, e, s) for e, s in RUNS)})
    return _PREREQUISITE_JOBS


def prerequisite_inputs(wildcards):
    """A prerequisite job's config (its file's digest names the prerequisite), its training store and the
    pretrained weights its networks start from, where its runs' do."""
    named = dict(wildcards)
    job = prerequisite_jobs()[named["kind"], named["digest"]]
    cfg, weights = job.config, job.config["training"].get("pretrained")
    return {"config": JOB_CONFIGS.path(job.kind.name, cfg),
            "store": variant_store(cfg["dataset"], cfg["train_variant"]),
            **({"pretrained": os.path.expanduser(weights)} if weights else {})}


def prerequisite_resources():
    """Each prerequisite job's `resources` from its kind's cost (workbench.resources.prerequisite)."""
    def job(wc):
        return prerequisite_jobs()[wc.kind, wc.digest]

    return res.rule_resources(config, True, lambda wc: res.prerequisite(job(wc).kind, job(wc).config),
                              lambda wc: res.gpus([job(wc).config]))


def named_inputs_args(input, prefix=""):
    """NAME=PATH pairs of the named inputs `<prefix>NAME` (the aligned fields: those that are not
    config, store, pretrained, prerequisites or test stores, when `prefix` is empty)."""
    if prefix:
        return " ".join(f"{k[len(prefix):]}={v}" for k, v in input.items() if k.startswith(prefix))
    return " ".join(f"{k}={v}" for k, v in input.items()
                    if k not in ("config", "store", "pretrained", "prerequisites") and not k.startswith("test_"))


def analysis_config_file(analysis):
    return JOB_CONFIGS.path("analyses", {"analysis": analysis, **analysis_config(config, analysis)})


def analysis_estimate(analysis):
    """The estimate of `analysis`'s job from its paper's declaration (`AnalysisJob`: the stores it reads per model,
    its models and its own networks), as `workbench plan` makes it."""
    job = next(job for job in ANALYSIS_JOBS if job.name == analysis)
    return res.evaluation(config, job.stores, job.extra_models + len(run_files("model.pt", job.experiments)))


def register_job_configs():
    """Name (in memory, writing nothing) the config file of every job the config asks for. A job's
    input functions name its file where its DAG is built; a `job_config` job run by a process that
    parsed the workflow afresh (a cluster job, a local `run:` job) names them all here first."""
    for dataset in config["datasets"]:
        dataset_config_file(dataset)
        for variant in dataset_variants(config, dataset):
            if variant in config["datasets"][dataset]:  # a derived variant: its section is its jobs' slice
                JOB_CONFIGS.path("datasets", dataset_job_config(config, dataset, variant))
    for pack in PACKS:
        for wildcards in pack_jobs(config, pack):
            train_inputs(pack, wildcards)
    for pack in SCORING_PACKS:
        for value in next(iter(pack.constraints.values())):
            scoring_inputs(pack, {next(iter(pack.constraints)): value})
    for kind, digest in prerequisite_jobs():
        prerequisite_inputs({"kind": kind, "digest": digest})
    for job in ANALYSIS_JOBS:
        analysis_config_file(job.name)


wildcard_constraints:
    dataset=one_of(config["datasets"]),
    variant=one_of(sorted({v for d in config["datasets"] for v in dataset_variants(config, d)})),
    experiment=one_of(list(config["experiments"])),
    seed=r"\d+",
    shard=r"\d+",
