"""How hard the non-semantic negatives are (Ge et al. 2021, Figs. 2-3): the mean cosine similarity
of each val image's embedding (one aug-plus view) to that of its positive (a second view), a
standard negative (a view of another val image), its patch negative and its IN-9-Texture image,
in the contrastive space the loss compares (MoCo: the head's output; BYOL: the prediction).
The non-semantic negatives are made as in training: the patch negative tiled from the anchor's
view (`negatives.patch_negatives`), the texture image in the anchor's view; the standard
negative of an image is a view of another image of the split drawn at random (the split is
stored by class, so a neighbour would share the class). The paper's Fig. 2 measures on the
training images; this runs on the evaluation split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from debias_workbench.core.seeding import name_seed

from ..data import ZarrBatches, first_rows
from ..negatives import patch_negatives

PAIRS = ("positive", "standard_negative", "patch_negative", "texture_negative")


@torch.no_grad()
def similarity_rows(
    method,
    stores: dict[str, Path],
    split: str,
    batch_size: int,
    device: torch.device,
    tags: dict[str, Any],
    limit: int | None = None,
) -> list[dict]:
    """One row per pair kind: metric "similarity", variant = the pair, value = mean cosine similarity
    over the `split` images of stores["original"] (the first `limit`, if given: smoke mode's
    `evaluation.max_images`; the texture pair only when stores has "texture")."""
    aligned = {"textures": stores["texture"]} if "texture" in stores else {}
    batches = ZarrBatches(
        stores["original"], split, shuffle=False, fields=("images",), aligned=aligned, **first_rows(batch_size, limit)
    )
    g = torch.Generator().manual_seed(name_seed("similarity", tags["experiment"], tags["seed"]))
    sums = {pair: 0.0 for pair in PAIRS}
    n = 0
    for batch in batches.epoch(0):
        images = batch["images"].to(device)  # (B, H, W, 3) uint8
        view = method.views.sample(len(images), images.shape[1], g)
        query = method.views.apply(images, view)  # (B, 3, H, W) normalised
        anchor = method.embed(query)
        other = (batch["index"] + torch.randint(1, batches.n, (len(images),), generator=g)) % batches.n
        others = {
            "positive": method.embed(method.views(images, g)),
            "standard_negative": method.embed(method.views(batches.rows(other.numpy())["images"].to(device), g)),
            "patch_negative": method.embed(patch_negatives(query, g)),
        }
        if "textures" in batch:
            others["texture_negative"] = method.embed(method.views.apply(batch["textures"].to(device), view))
        for pair, z in others.items():
            sums[pair] += float(F.cosine_similarity(anchor, z, dim=1).sum())
        n += len(images)
    return [
        {
            "kind": "eval",
            **tags,
            "variant": pair,
            "split": split,
            "metric": "similarity",
            "value": sums[pair] / n,
            "n": n,
        }
        for pair in PAIRS
        if pair != "texture_negative" or aligned
    ]
