/* The passes of passes.c, as module.c calls them: one declaration, which the compiler holds both files to. */
#ifndef RANKZERO_PASSES_H
#define RANKZERO_PASSES_H

#include <stdint.h>

#include "passes_constants.h"  /* written by setup.py from rankzero/data/native/constants.py */

int64_t word_hashes(const uint32_t *codes, const int64_t *offsets, int64_t units, const uint32_t *table,
                    const uint32_t *expansions, int64_t most_words, const uint32_t *astral_codes, int64_t astral_count,
                    const uint32_t *astral_folds, uint64_t *words, int64_t words_size, int64_t *counts);

void shingle_hashes(const uint64_t *words, const int64_t *per_text, int64_t texts, const uint64_t *position,
                    int64_t shingle_words, uint64_t *out, int64_t *out_per_text);

void scan(const uint32_t *codes, const int64_t *offsets, int64_t texts, const uint32_t *table,
          const uint32_t *expansions, const uint32_t *astral, int64_t astral_count, const uint32_t *astral_folds,
          int64_t n, int64_t window, int64_t step, int64_t hashing, const uint64_t *bits, int64_t bit_words,
          const uint8_t *kinds, uint64_t *word_ring, uint64_t *letter_ring, int64_t room, uint64_t *grams,
          int64_t *gram_owners, uint64_t *windows, int64_t *window_owners, uint8_t *marks, int64_t *runs,
          uint8_t *slow, int64_t *counts);

#endif
