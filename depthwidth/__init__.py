"""depthwidth: the depth-to-width interplay in self-attention, theory next to experiment.

Subpackages (one job each):
  theory      symbolic bounds, the depth-efficiency threshold, parameter/FLOP accounting
  models      the Flax NNX decoder LM, the data pipeline, sharded training
  experiments sweep presets, the runner, the results store
  fits        transition points, the ln-width-vs-depth law, projections
  paper_figs  figures drawn from stored results only
"""

__version__ = "0.1.0"
