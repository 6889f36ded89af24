"""A Megatron-like checkout run from its own tree (issue 18): the entry
script at the top of the checkout, the training loop in
megatron/training/training.py of the same tree (not installed). tranalyze
must name training.py's lines, not fold them for their folder's name."""
from megatron.training.training import pretrain

pretrain()
