"""Names shared by layers that cannot import each other (the report and the workflow's checks)."""

#: the label of the ImageNet-trained model's row (`evaluation.imagenet_model`): reserved, it is no experiment
IMAGENET_LABEL = "Base (IN)"
#: the experiment name of that model's eval rows (`training.evaluation`), which no experiment may take
IMAGENET_EXPERIMENT = "base_in"

#: the prefix of a `training.arch` that names a timm model (`timm/resnet50`: `training.timm_backbone`)
TIMM_PREFIX = "timm/"

#: the environment variable through which the workflow hands `training.trackers` to its train and score jobs
TRACKERS_VARIABLE = "WORKBENCH_TRACKERS"

#: the environment variable through which the workflow hands `training.runs_per_gpu` to its train jobs
RUNS_PER_GPU_VARIABLE = "WORKBENCH_RUNS_PER_GPU"

#: the training keys that set the small networks' widths (`training.models.build_network`): small_cnn's, the others'
SMALL_CNN_WIDTHS, SIMPLE_CNN_WIDTHS = "small_cnn_channels", "simple_cnn_channels"
NETWORK_WIDTH_KEYS = (SMALL_CNN_WIDTHS, SIMPLE_CNN_WIDTHS)

#: a grid trains its own architecture on its own dataset: it never inherits the top-level
#: `training.pretrained` (an ImageNet ResNet-50 in config/imagenet9.yaml) unless it names weights itself
#: (`workflow.config.expand_grids`; the matrix's baselines resolve a grid run's training the same way)
GRID_WEIGHTS = {"pretrained": None, "pretrained_sha256": None}
