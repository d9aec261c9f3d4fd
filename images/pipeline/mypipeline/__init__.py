"""An example pipeline package, built into an image by ``images/pipeline/Containerfile``."""
