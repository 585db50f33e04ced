"""Baseline: Presidio's Korean and generic pattern recognizers over JSON documents. Runs in its own venv
(never a rankzero dependency), started by bench/pii_bench.py `--presidio_python`:

    python3 -m venv /work/peers/presidio
    /work/peers/presidio/bin/pip install --only-binary :all: presidio-analyzer phonenumbers
    /work/peers/presidio/bin/python bench/baselines/presidio_recognizers.py DOCS.json OUT.json [REAL.json]

The recognizers: KrRrn, KrFrn, KrPassport, KrDriverLicense, KrBrn (presidio_analyzer's country_specific/korea)
and the generic Email, Phone (phonenumbers, region KR), CreditCard and Ip. No spaCy model (Korean's is not
on PyPI): each recognizer is built directly and called with `nlp_artifacts=None`, which pattern recognizers
accept; only the context-word score boost, which needs lemmas, is lost, and a result counts when its score is
above 0 (AnalyzerEngine's default threshold), so the boost would change nothing here. Writes, per document, the
[entity, start, end] Presidio reports; with REAL.json also the process-time MB/s (best of 3) over those
documents and the entities found in them.
"""

import json
import logging
import sys
import time

from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IpRecognizer,
    KrBrnRecognizer,
    KrDriverLicenseRecognizer,
    KrFrnRecognizer,
    KrPassportRecognizer,
    KrRrnRecognizer,
    PhoneRecognizer,
)

# EmailRecognizer's validation asks tldextract for the public-suffix list over the network first; offline it
# logs a traceback and falls back to the snapshot it ships, which is what it then uses either way.
logging.getLogger("tldextract").setLevel(logging.CRITICAL)

RECOGNIZERS = [KrRrnRecognizer(), KrFrnRecognizer(), KrPassportRecognizer(), KrDriverLicenseRecognizer(),
               KrBrnRecognizer(), EmailRecognizer(), PhoneRecognizer(supported_regions=("KR",)),
               CreditCardRecognizer(), IpRecognizer()]


def analyze(text: str) -> list:
    return [[r.entity_type, r.start, r.end] for recognizer in RECOGNIZERS
            for r in recognizer.analyze(text, entities=recognizer.supported_entities, nlp_artifacts=None)
            if r.score > 0]


def main() -> None:
    documents = json.load(open(sys.argv[1], encoding="utf-8"))
    result = {"spans": [analyze(text) for text in documents]}
    if len(sys.argv) > 3:
        real = json.load(open(sys.argv[3], encoding="utf-8"))
        seconds = []
        for _ in range(3):
            started = time.process_time()
            found = [analyze(text) for text in real]
            seconds.append(time.process_time() - started)
        result["mb_s_per_core"] = round(sum(len(t.encode()) for t in real) / 1e6 / min(seconds), 2)
        counts = {}
        for spans in found:
            for entity, _, _ in spans:
                counts[entity] = counts.get(entity, 0) + 1
        result["entities_in_real_documents"] = counts
    json.dump(result, open(sys.argv[2], "w", encoding="utf-8"))


if __name__ == "__main__":
    main()
