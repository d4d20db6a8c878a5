"""Dataset generation: source enumeration, segmentation, variant building, zarr stores."""
