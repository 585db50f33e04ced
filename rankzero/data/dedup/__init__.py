"""Dedup: documents trained on once (`--dedup exact|near`), the same decision on every build engine.

    from rankzero.data.dedup.exact import ExactDuplicates  # exact copies, by 64-bit text hash
    from rankzero.data.dedup.minhash import minhash_signatures  # a document's MinHash signature (in the stage)
    from rankzero.data.dedup.near import NearDuplicates  # near-copies: MinHash LSH over the whole corpus

  exact.py    first one wins among equal text hashes: sorted numpy runs (split.py's Holdout calls it)
  minhash.py  text → normalised word 5-grams → 120 MinHash values; the LSH bands of a threshold
  shingles.py what a word and a 5-gram hash are, in numpy: the reference, and what runs without the extension
  kernel.py   the same hashes in one compiled pass (passes.c, GIL released); NFKC + lower-case by table where they can
  near.py     the near-copy rule and its bounded-memory bookkeeping (band keys spilled in sorted runs)

Both engines feed these in source order (the local builder as chunks are consumed, the Ray driver task by
task); the engines' near_ledger.py records where each signed document went and applies the decision.
"""
