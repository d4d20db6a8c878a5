"""Dataset generation: source enumeration, segmentation, variant building, zarr stores."""

__version__ = "0.1.0"
