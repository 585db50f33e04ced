"""The plan of a prepare, resolved once: sources, tokenizer, quality settings, fingerprint.

    plan = make_plan(data_args, seed)        # every rank: cheap (stat of the sources, tokenizer hash)
    plan.fingerprint                         # names the published dir
    choice = plan.choose_engine()            # the builder only: checks fastokens against HF on a sample

Both build engines (`local.py` on this machine, `ray_engine.py` on a cluster) take a plan and run the
same per-chunk stage (`stage.py`) over its sources; the handoff (`handoff.py`) publishes the result
under `plan.fingerprint`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from rankzero.data.records import ChatRenderer, chunk_documents
from rankzero.data.readers import iter_chunks
from rankzero.data.specs import Source, resolve_source
from rankzero.data.encode import SAMPLE_CHARS, EngineChoice, TokenizerInfo, load_tokenizer, select_engine
from rankzero.errors import RankzeroError

FORMAT_VERSION = 2  # bump when the output of the same inputs changes


@dataclass
class Plan:
    data_args: object  # rankzero.args.DataArguments
    seed: int
    sources: list[Source]
    tokenizer: TokenizerInfo
    quality: object | None  # rankzero.data.quality.QualityConfig, or None without the filter
    inputs: dict  # what the fingerprint hashes
    fingerprint: str

    @property
    def with_labels(self) -> bool:
        return self.data_args.mode == "sft"

    @property
    def columns(self) -> list[str]:
        return ["input_ids", "document_lengths"] + (["labels"] if self.with_labels else [])

    def choose_engine(self) -> EngineChoice:
        return select_engine(self.tokenizer, self.data_args.tokenizer_engine, corpus_sample(self))


def make_plan(data_args, seed: int, sources: list[Source] | None = None, tokenizer: TokenizerInfo | None = None) -> Plan:
    sources = sources or [resolve_source(spec) for spec in data_args.dataset]
    tokenizer = tokenizer or load_tokenizer(data_args.tokenizer_path)
    quality = quality_config(data_args)
    inputs = fingerprint_inputs(data_args, seed, sources, tokenizer, quality)
    return Plan(data_args, seed, sources, tokenizer, quality, inputs, compute_fingerprint(inputs))


def quality_config(data_args):
    if data_args.quality_filter == "none":
        return None
    from rankzero.data.quality import QualityConfig

    return QualityConfig.from_yaml(data_args.quality_config) if data_args.quality_config else QualityConfig()


def fingerprint_inputs(data_args, seed: int, sources, tokenizer, quality=None) -> dict:
    """Everything that changes the prepared output — and nothing that doesn't (workers, batch sizes, the
    tokenizer engine: `select_engine` only takes an engine that gives the HF tokenizer's ids)."""
    quality = quality if quality is not None else quality_config(data_args)
    return {
        "format_version": FORMAT_VERSION,
        "sources": [{"identity": s.identity(data_args.fingerprint_content), "weight": s.weight} for s in sources],
        "tokenizer_sha256": tokenizer.content_hash,
        "max_seq_length": data_args.max_seq_length,
        "packing": data_args.packing,
        "mode": data_args.mode,
        "text_column": data_args.text_column,
        "txt_sample_by": data_args.txt_sample_by,
        "quality_filter": data_args.quality_filter,
        "quality_settings": quality.to_dict() if quality else None,
        "skip_bad_records": data_args.skip_bad_records,
        "on_decode_error": data_args.on_decode_error,
        "seed": seed,
    }


def compute_fingerprint(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


def corpus_sample(plan: Plan) -> list[str]:
    """Texts from the start of every source (~SAMPLE_CHARS in all), as the stage would encode them,
    for the tokenizer-engine check. Bad records are skipped here: the build itself reports them."""
    data_args = plan.data_args
    renderer = ChatRenderer(plan.tokenizer.chat_template, plan.tokenizer.special_tokens)
    budget = max(SAMPLE_CHARS // max(len(plan.sources), 1), 16 << 10)
    sample = []
    for index, source in enumerate(plan.sources):
        chunks = iter_chunks(source, index, 64, data_args.txt_sample_by)
        try:
            parsed = chunk_documents(next(chunks), data_args.text_column, renderer, with_masks=plan.with_labels,
                                     skip_bad_records=True, on_decode_error="replace")
        except (StopIteration, RankzeroError):
            continue
        finally:
            chunks.close()
        taken = 0
        for segments in parsed.documents:
            for text, _ in segments:
                sample.append(text[:budget - taken])
                taken += len(sample[-1])
            if taken >= budget:
                break
    return sample
