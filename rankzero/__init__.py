"""rankzero: prepare Korean-first pretraining data once per job and train on the Hugging Face stack.

The package is split by concern: `rankzero.data` turns sources into a packed, fingerprinted Arrow
dataset (and hands it to every rank), `rankzero.train` builds the model and the Trainer.
"""

__version__ = "0.1.0"
