"""scaleright: one GPU or many, which GPU, which layout, rent or buy — answered with numbers.

Data flows one way: catalog -> workload -> estimate -> plan -> report; measurements (bench) feed calibration.
"""

from scaleright.errors import ScalerightError

__version__ = "0.1.0"
__all__ = ["ScalerightError", "__version__"]
