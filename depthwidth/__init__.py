"""depthwidth: the depth-to-width interplay in self-attention, theory next to experiment.

Layers, imports pointing down the data flow config -> run -> record -> table -> fit ->
figures/answers (ARCHITECTURE.md):

  errors, units, console, hostcpu   small shared pieces
  config, records                   run configs and the result record (the bottom everyone reads)
  theory      symbolic bounds, the depth-efficiency threshold, parameter/FLOP accounting
  data        corpora, tokenizers, token files
  models      the Flax NNX decoder LM, sharded training, GPT-2 interop
  experiments sweep presets, the runner, claims
  fits        results table, transition points, the ln-width-vs-depth law, projections
  paper_figs  figures drawn from stored results only
  pipeline    reproduce: sweep -> fit -> figures -> summary
  cli         the console script
"""

__version__ = "0.1.0"
