"""Which source items each generation job of a staged dataset works on.

The items (in listing order: sorted by id, so each split's items are consecutive) fall into blocks of
`block_images`: the unit every choice and every batch of the stages is fixed by, and the shard size of
the intermediate store, so the stores' bytes never depend on how the blocks are spread over jobs. A job
takes whole consecutive blocks (`job_blocks`): the blocks holding an item of the splits its step builds
(a derived variant built for val only has no job over the training images), packed until the job holds
`min_images` of those items, the fewest that its cost estimate sets (`workflow.resources.min_job_images`:
`cluster.min_job_minutes`), so that a site's scheduler gets jobs of minutes, not seconds. With
`min_images` 1 each block holding such an item is a job of its own (a local run spreads them over its cores).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

#: the splits of a step that builds every one (segmentation)
ALL_SPLITS = ("train", "val")


def job_blocks(item_splits: Sequence[str], block: int, splits: Collection[str], min_images: int) -> list[range]:
    """The block ranges of the jobs of a step building `splits`, over items whose splits are `item_splits`
    in listing order: consecutive whole blocks of `block` items, from the first block holding an item of
    `splits` to the last, each job closed once it holds `min_images` of them; the remainder (fewer) joins
    the last job. No item of `splits`: one job over the first block (an empty part, which the gather reads
    as no image); no item at all: no job."""
    counts = [sum(s in splits for s in item_splits[lo : lo + block]) for lo in range(0, len(item_splits), block)]
    held = [k for k, n in enumerate(counts) if n]
    if not held:
        return [range(0, 1)] if counts else []
    jobs: list[range] = []
    first, taken = held[0], 0
    for k in range(held[0], held[-1] + 1):
        taken += counts[k]
        if taken >= min_images:
            jobs.append(range(first, k + 1))
            first, taken = k + 1, 0
    if taken:  # the last blocks hold fewer than min_images: they join the last job (or are the only one)
        jobs[-1:] = [range(jobs[-1].start if jobs else first, held[-1] + 1)]
    return jobs


def images_in(item_splits: Sequence[str], block: int, splits: Collection[str], blocks: range) -> int:
    """Items of `splits` in the blocks `blocks` (a job's work)."""
    return sum(s in splits for s in item_splits[blocks.start * block : blocks.stop * block])


def expected_splits(images: dict[str, int]) -> list[str]:
    """The splits of the items in listing order from each split's count (ids begin with their split, so
    the listing holds every train item before every val item): the synthetic source's, and the plan's."""
    return [split for split in ALL_SPLITS for _ in range(images.get(split, 0))]
