/* The per-character passes of near dedup (dedup/kernel.py) and decontamination (screen/scan.py), in C.
 *
 * setup.py compiles this file with module.c (the Python bindings: arrays in, the GIL released for each call) into
 * the extension rankzero.data.native._passes when rankzero is installed. The constants (bases, table markers, mark
 * bits) are not written here: setup.py writes their Python definitions (native/constants.py) into
 * passes_constants.h, so the compiled passes and the numpy references read the same numbers. The references
 * (dedup/shingles.py, screen/reference.py) define what each function returns; tests/data/dedup/test_dedup_kernel.py,
 * tests/data/screen/test_reference.py and tests/data/screen/test_scan_texts.py hold the two equal.
 *
 * Why C rather than numba, which these passes were written in before: numba's start (its import, then its
 * target's registries at the first call of cached code) cost ~0.35 CPU-s and ~90 MB in every process that used
 * a pass; this module loads in under a millisecond (bench/RESULTS.md). Every integer is unsigned 64-bit where a
 * hash is formed: C's wrap-around is the mod 2**64 of the references.
 */
#include "passes.h"

static inline uint64_t fmix64(uint64_t value) {
    value ^= value >> 33;
    value *= 0xFF51AFD7ED558CCDULL;
    value ^= value >> 33;
    value *= 0xC4CEB9FE1A85EC53ULL;
    value ^= value >> 33;
    return value;
}

/* The index of `code` in the sorted `codes` (it is there: the caller took them from the same text). */
static inline int64_t find_code(const uint32_t *codes, int64_t count, uint32_t code) {
    int64_t low = 0, high = count;
    while (low < high) {
        int64_t middle = (low + high) / 2;
        if (codes[middle] < code) low = middle + 1; else high = middle;
    }
    return low;
}

/* ---- near dedup: dedup/kernel.py ------------------------------------------------------------------------ */

/* The syllable that `previous` and `code` compose into under NFKC (Unicode's Hangul composition), or 0. */
static inline uint32_t hangul(uint32_t previous, uint32_t code) {
    if (previous >= 0x1100 && previous <= 0x1112 && code >= 0x1161 && code <= 0x1175)  /* initial + vowel */
        return 0xAC00 + ((previous - 0x1100) * 21 + (code - 0x1161)) * 28;
    if (previous >= 0xAC00 && previous <= 0xD7A3 && (previous - 0xAC00) % 28 == 0 && code >= 0x11A8 && code <= 0x11C2)
        return previous + code - 0x11A7;  /* syllable without a final + final */
    return 0;
}

/* Writes the word hashes of each unit codes[offsets[u]:offsets[u + 1]] to `words` and their number to counts[u];
 * a unit with a SLOW code point gets -1 and no words. Returns the number of words written, or -1 when fewer than
 * `most_words` (the most one code point makes) are left free in `words` (the caller doubles it and calls again).
 * table: fold of each BMP code point, SLOW, or EXPANDED + i (expansions[i] folds at expansions[i + 1:]). */
int64_t word_hashes(const uint32_t *codes, const int64_t *offsets, int64_t units, const uint32_t *table,
                    const uint32_t *expansions, int64_t most_words, const uint32_t *astral_codes, int64_t astral_count,
                    const uint32_t *astral_folds, uint64_t *words, int64_t words_size, int64_t *counts) {
    int64_t written = 0;
    for (int64_t unit = 0; unit < units; unit++) {
        int64_t first = written, index = offsets[unit], stop = offsets[unit + 1], part = 0, parts_left = 0;
        uint64_t hash = 0, power = 1, last_power = 0;
        int in_word = 0, slow = 0;
        uint32_t previous = 0;  /* the previous code point's fold: Hangul composes only with its neighbour */
        for (;;) {
            uint32_t value;
            if (parts_left) {  /* the folds of an expanded code point, one at a time */
                value = expansions[part++];
                parts_left--;
            } else {
                if (index == stop) break;
                if (written + most_words > words_size) return -1;
                uint32_t code = codes[index++];
                value = code < 0x10000 ? table[code] : astral_folds[find_code(astral_codes, astral_count, code)];
                if (value >= EXPANDED && value != DELETE) {
                    if (value == SLOW) {
                        slow = 1;
                        break;
                    }
                    part = (int64_t)(value - EXPANDED) + 1;
                    parts_left = expansions[part - 1];
                    continue;
                }
            }
            if (value == 0 || value == DELETE) {
                if (value == 0 && in_word) {
                    words[written++] = fmix64(hash);
                    in_word = 0;
                }
                previous = value;
                continue;
            }
            if (in_word && (uint32_t)(value - 0x1161) <= 0x11C2 - 0x1161) {  /* a vowel or a final */
                uint32_t composed = hangul(previous, value);
                if (composed) {  /* replaces the word's last code point: its term is redone at its power */
                    hash += ((uint64_t)composed - (uint64_t)previous) * last_power;
                    previous = composed;
                    continue;
                }
            }
            if (!in_word) {
                hash = 0;
                power = 1;
                in_word = 1;
            }
            hash += (uint64_t)value * power;  /* sum c_i * B**i over the word (shingles.py) */
            last_power = power;
            power *= WORD_BASE;
            previous = value;
        }
        if (slow) {
            written = first;
            counts[unit] = -1;
            continue;
        }
        if (in_word) words[written++] = fmix64(hash);
        counts[unit] = written - first;
    }
    return written;
}

/* The hash of every `shingle_words` consecutive words of each text (shingles.py), written to `out`; per text how
 * many. `position`: one odd multiplier per place in the shingle. */
void shingle_hashes(const uint64_t *words, const int64_t *per_text, int64_t texts, const uint64_t *position,
                    int64_t shingle_words, uint64_t *out, int64_t *out_per_text) {
    int64_t at_word = 0, at_out = 0;
    for (int64_t text = 0; text < texts; text++) {
        int64_t count = per_text[text] - shingle_words + 1;
        if (count < 0) count = 0;
        for (int64_t start = at_word; start < at_word + count; start++) {
            uint64_t mixed = 0;
            for (int64_t place = 0; place < shingle_words; place++) mixed += words[start + place] * position[place];
            out[at_out++] = fmix64(mixed);
        }
        out_per_text[text] = count;
        at_word += per_text[text];
    }
}

/* ---- decontamination: screen/scan.py ---------------------------------------------------------------------- */

/* Whether `value`'s bit is set in the bitmap of `words` 64-bit words (a power of two). */
static inline int passes(const uint64_t *bits, int64_t words, uint64_t value) {
    uint64_t slot = value & (uint64_t)(words * 64 - 1);
    return (int)((bits[slot >> 6] >> (slot & 63)) & 1);
}

/* Whether `value` (a fold) composes with `last` (the fold before it) under NFKC: a Hangul initial consonant and a
 * vowel, or a syllable without a final and a final. Hangul composes by Unicode's algorithm, not by a table. */
static inline int composes(uint32_t last, uint32_t value) {
    if (value >= 0x1161 && value <= 0x1175) return last >= 0x1100 && last <= 0x1112;
    if (value >= 0x11A8 && value <= 0x11C2) return last >= 0xAC00 && last <= 0xD7A3 && (last - 0xAC00) % 28 == 0;
    return 0;
}

/* A text's marks so far (scan's comment says what each is). */
typedef struct {
    int64_t run, digit, first, end;  /* run: digits and separators in a row, digit: it holds one; [first, end):
                                      * of the runs that set NUMBERS (first -1: none yet) */
    int64_t colons, ipv6, at_sign, passport;  /* colons in the run of ASCII hex digits and colons; ipv6: one held
                                               * "::" or 7 colons (what pii.py's IPv6 candidates need) */
} Marks;

/* codes[at], of `kind` (kinds[], bits: 1 a separator, 2 a digit, 4 an at sign or one of ":t권", 8 an ASCII hex digit
 * or ':', 16 an at sign: '@' or its full-width or small form, hashing.AT_SIGNS), in
 * codes[start:]. No branch that the text decides but bit 4 (rare in Korean text) and long number runs: a branch on a
 * space or a digit, mispredicted at most words' ends, cost the marks ~2 ns a code point (bench/RESULTS.md, "The
 * screen's marks and masker, cheaper"). */
static inline void mark(Marks *m, const uint32_t *codes, int64_t start, int64_t at, int64_t kind) {
    int64_t in_run = (kind & 3) != 0;
    m->run = (m->run + 1) & -in_run;
    m->digit = (m->digit | (kind >> 1)) & in_run & 1;
    m->colons &= -((kind >> 3) & 1);
    if (__builtin_expect((m->run >= NUMBER_RUN) & m->digit, 0)) {
        if (m->first < 0) m->first = at - start - m->run + 1;
        m->end = at - start + 1;
    }
    if (__builtin_expect(kind & 4, 0)) {
        uint32_t raw = codes[at], previous = at > start ? codes[at - 1] : 0;
        if (kind & 16) {
            m->at_sign = 1;
        } else if (raw == ':') {
            m->ipv6 |= (++m->colons >= 7) | (previous == ':');
        } else if (raw == 't') {
            m->passport |= at - start >= 6 && codes[at - 6] == 'a' && codes[at - 5] == 's' &&
                           codes[at - 4] == 's' && codes[at - 3] == 'p' && codes[at - 2] == 'o' && previous == 'r';
        } else if (raw == 0xAD8C) {  /* 권 */
            m->passport |= previous == 0xC5EC;  /* after 여 */
        }
    }
}

/* The marks' bits (hashing.py), with runs[0:2] = [first, end) where NUMBERS is set. */
static inline uint8_t marks_done(const Marks *m, int64_t *runs) {
    uint8_t bits = (m->first >= 0 ? NUMBERS : 0) | (m->at_sign ? AT_SIGN : 0) |
                   (m->ipv6 ? COLONS : 0) | (m->passport ? PASSPORT : 0);
    if (bits & NUMBERS) {
        runs[0] = m->first;
        runs[1] = m->end;
    }
    return bits;
}

/* Where a batch's hashes go, and the hashes' shape. */
typedef struct {
    int64_t n, window, step, bit_words, room, grams_written, windows_written, full;
    uint64_t gram_power, window_power;  /* GRAM_BASE**n, WINDOW_BASE**window */
    const uint64_t *bits;
    uint64_t *word_ring, *letter_ring, *grams, *windows;  /* rings: a text's last n word hashes, `window` letters */
    int64_t *gram_owners, *window_owners;
} Sink;

/* A text's hashes so far. */
typedef struct {
    uint64_t hash, gram, rolling;
    int64_t length, words, word_slot, letter_slot, until_window;
} Rolling;

static inline void emit(Sink *s, uint64_t value, uint64_t *values, int64_t *owners, int64_t *written, int64_t text) {
    if (!passes(s->bits, s->bit_words, value)) return;
    if (*written == s->room) {
        s->full = 1;
        return;
    }
    values[*written] = value;
    owners[(*written)++] = text;
}

/* One fold of `text`: a letter, or 0 (a break, or the end of the text). */
static inline void feed(Sink *s, Rolling *r, uint64_t code, int64_t text) {
    if (code) {
        r->hash = r->hash * WORD_BASE + code;
        r->length++;
        r->rolling = r->rolling * WINDOW_BASE + code - s->letter_ring[r->letter_slot] * s->window_power;
        s->letter_ring[r->letter_slot] = code;
        if (++r->letter_slot == s->window) r->letter_slot = 0;
        if (--r->until_window == 0) {
            r->until_window = s->step;
            emit(s, fmix64(r->rolling), s->windows, s->window_owners, &s->windows_written, text);
        }
    } else if (r->length) {
        uint64_t word_hash = fmix64(r->hash ^ (uint64_t)r->length);
        r->gram = r->gram * GRAM_BASE + word_hash - s->word_ring[r->word_slot] * s->gram_power;
        s->word_ring[r->word_slot] = word_hash;
        if (++r->word_slot == s->n) r->word_slot = 0;
        r->hash = 0;
        r->length = 0;
        if (++r->words >= s->n) emit(s, fmix64(r->gram), s->grams, s->gram_owners, &s->grams_written, text);
    }
}

/* See scan.scan and scan.scan_texts. One pass over each text's code points. The n-gram and window hashes
 * roll (Rabin-Karp: times the base, plus the newest, minus the oldest times base**length), so each costs the same
 * whatever n and window are; the oldest word and letter come from rings of the last n and `window` (`word_ring`,
 * `letter_ring`: scratch the caller gives). `hashing`: 0, no hash is formed (the marks alone: scan.marks_of);
 * 1, the code points are NFKC already (scan.scan); 2, they are as read (scan.scan_texts).
 *
 * `table` gives each BMP code point's fold (its lower-cased letter, or 0: a break), or EXPANDED + i: several folds,
 * expansions[i] of them at expansions[i + 1:] (NFKC's "㈜" is "(주)"), or SLOW: a code point NFKC treats in context.
 * With `hashing` 2, a text with a SLOW code point, or two folds that Hangul composes, gets slow[text] = 1 and no
 * hashes (the caller normalises it in Python and scans it again). Hashes whose bit is set go to grams/windows with
 * the text they come from; counts[0] and counts[1] get how many, counts[2] 1 when `room` (of each) ran out (the
 * caller calls again with more). marks[text] gets, from the code points as given, NUMBERS where the text has a run
 * of NUMBER_RUN code points of `kinds` bits 1 or 2 (the separators of pii_checks.py's number clusters and digits)
 * holding a digit, astral code points counting as digits; AT_SIGN for an at sign; COLONS for a run of ASCII hex digits
 * and colons holding "::" or 7 colons; PASSPORT for "여권" or "assport" (`kinds` bit 4 marks the code points these
 * look at, bit 8 the hex digits and ':', bit 16 the at signs: scan.py's _marking_kinds). runs[2 * text],
 * runs[2 * text + 1]: [start of the first run that set NUMBERS, end of the last). */
void scan(const uint32_t *codes, const int64_t *offsets, int64_t texts, const uint32_t *table,
          const uint32_t *expansions, const uint32_t *astral, int64_t astral_count, const uint32_t *astral_folds,
          int64_t n, int64_t window, int64_t step, int64_t hashing, const uint64_t *bits, int64_t bit_words,
          const uint8_t *kinds, uint64_t *word_ring, uint64_t *letter_ring, int64_t room, uint64_t *grams,
          int64_t *gram_owners, uint64_t *windows, int64_t *window_owners, uint8_t *marks, int64_t *runs,
          uint8_t *slow, int64_t *counts) {
    Sink sink = {n, window, step, bit_words, room, 0, 0, 0, 1, 1, bits, word_ring, letter_ring, grams, windows,
                 gram_owners, window_owners};
    for (int64_t i = 0; i < n; i++) sink.gram_power *= GRAM_BASE;
    for (int64_t i = 0; i < window; i++) sink.window_power *= WINDOW_BASE;
    counts[2] = 0;
    for (int64_t text = 0; text < texts; text++) {
        for (int64_t i = 0; i < n; i++) word_ring[i] = 0;
        for (int64_t i = 0; i < window; i++) letter_ring[i] = 0;
        Marks m = {0, 0, -1, 0, 0, 0, 0, 0};
        Rolling r = {0, 0, 0, 0, 0, 0, 0, window};
        int64_t start = offsets[text], end = offsets[text + 1];
        if (!hashing) {  /* the marks alone: a loop of its own, which nothing else slows */
            for (int64_t at = start; at < end; at++)
                mark(&m, codes, start, at, codes[at] < 0x10000 ? kinds[codes[at]] : 2);
            marks[text] |= marks_done(&m, runs + 2 * text);
            continue;
        }
        int64_t first_gram = sink.grams_written, first_window = sink.windows_written;
        int hashing_text = 1;
        uint32_t last = 0;  /* the fold before: Hangul composes only with its neighbour */
        for (int64_t at = start; at < end; at++) {
            uint32_t raw = codes[at], value;
            int64_t kind;
            if (raw < 0x10000) {
                value = table[raw];
                kind = kinds[raw];
            } else {
                value = astral_folds[find_code(astral, astral_count, raw)];
                kind = 2;
            }
            mark(&m, codes, start, at, kind);
            if (!hashing_text) continue;
            if (value < EXPANDED) {  /* one fold: almost every code point (none that composes with `last`) */
                last = value;
                feed(&sink, &r, value, text);
            } else if (value == SLOW || value == DELETE) {  /* DELETE: only near dedup's tables hold it */
                hashing_text = 0;
            } else {
                const uint32_t *part = expansions + (value - EXPANDED);
                for (const uint32_t *stop = part + *part + 1; ++part < stop;) {
                    if (hashing == 2 && composes(last, *part)) {
                        hashing_text = 0;
                        break;
                    }
                    last = *part;
                    feed(&sink, &r, *part, text);
                }
            }
        }
        if (hashing_text) feed(&sink, &r, 0, text);  /* the last word ends with the text */
        if (sink.full) {
            counts[2] = 1;
            return;
        }
        marks[text] |= marks_done(&m, runs + 2 * text);
        slow[text] = hashing && !hashing_text;
        if (slow[text]) {  /* its hashes are the Python path's */
            sink.grams_written = first_gram;
            sink.windows_written = first_window;
        }
    }
    counts[0] = sink.grams_written;
    counts[1] = sink.windows_written;
}
