"""The plan of a prepare, resolved once from the configs: sources, tokenizer, quality settings, fingerprint.

    plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, seed)   # every rank; cheap
    plan.fingerprint                         # names the published dir
    choice = plan.choose_engine()            # the builder only: checks fastokens against HF on a sample

Both build engines (`local.py` on this machine, `ray_engine.py` on a cluster) take a plan and run the
same per-chunk stage (`stage.py`) over its sources; the handoff (`handoff.py`) publishes the result
under `plan.fingerprint`. The fingerprint hashes the configs that change the output (sources, stage,
packing, dedup) as a canonical dict, with each source's identity and the tokenizer's content in place
of their paths — never the workers config, nor the tokenizer engine (`select_engine` only takes an
engine that gives the HF tokenizer's ids).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass

from rankzero.config import DedupConfig, PackingConfig, SourcesConfig, StageConfig, WorkersConfig
from rankzero.data.dedup.minhash import algorithm as minhash_algorithm
from rankzero.data.encode import SAMPLE_CHARS, EngineChoice, TokenizerInfo, load_tokenizer, select_engine
from rankzero.data.inputs.readers import iter_chunks
from rankzero.data.inputs.records import ChatRenderer, chunk_documents
from rankzero.data.inputs.specs import Source, resolve_source
from rankzero.data.screen.decontaminate import benchmark_identity
from rankzero.data.screen.screening import load_index
from rankzero.errors import RankzeroError

# Bump when the output of the same inputs changes (3: exact dedup without the filter; 4: SFT rows by bin packing
# of whole samples, the validation split; 5: input_ids stored as uint16 when the vocabulary fits; 6: --dedup near,
# the default in pretraining; 7: SFT samples with nothing to train on dropped, empty answers not trained; 8: --pii
# mask, the default; 9: validation rows of one source each, with document_sources, and personal numbers behind any
# Unicode dash, space or invisible character masked: a cache built before would hold them raw).
FORMAT_VERSION = 9


@dataclass(frozen=True)
class Plan:
    source_config: SourcesConfig
    stage: StageConfig
    packing: PackingConfig
    dedup: DedupConfig
    workers: WorkersConfig
    seed: int
    sources: tuple[Source, ...]  # the --eval_dataset sources first (Source.evaluation), then the --dataset ones
    tokenizer: TokenizerInfo
    quality: object | None  # rankzero.data.quality.QualityConfig, or None without the filter
    inputs: dict  # what the fingerprint hashes
    fingerprint: str
    benchmarks: dict | None = None  # what the --decontaminate index holds per benchmark, for the manifest

    @property
    def with_labels(self) -> bool:
        return self.stage.with_labels

    @property
    def has_validation(self) -> bool:
        return self.source_config.has_validation

    @property
    def max_document_bytes(self) -> int:
        """--max_document_mb in bytes: the longest line, paragraph, .txt document or CSV field read."""
        return int(self.source_config.max_document_mb * (1 << 20))

    @property
    def validation_flags(self) -> str | None:
        """The flags that asked for a validation split, as the user gave them (None: no split)."""
        if not self.has_validation:
            return None
        config = self.source_config
        given = ([f"--validation_split_percentage {config.validation_split_percentage:g}"]
                 if config.validation_split_percentage is not None else [])
        return ", ".join(given + ([f"--eval_dataset {' '.join(config.eval_dataset)}"] if config.eval_dataset else []))

    @property
    def near_dedup(self) -> bool:
        """Whether near-copies are removed (dedup/near.py); exact copies are too, first, by their hash."""
        return self.dedup.dedup == "near"

    @property
    def dedup_memory_bytes(self) -> int:
        """What near dedup's band keys may hold in memory before they spill (--dedup_memory_mb)."""
        return int(self.workers.dedup_memory_mb * (1 << 20))

    @property
    def exact_dedup(self) -> bool:
        return self.dedup.dedup in ("exact", "near")

    @property
    def needs_hashes(self) -> bool:
        """Whether the stage hashes each document's text: for dedup, and to choose the validation split."""
        return self.exact_dedup or self.has_validation

    @property
    def truncate_to(self) -> int | None:
        """SFT keeps samples whole: one longer than a row is cut at its end (and counted), never split."""
        return self.packing.max_seq_length if self.with_labels else None

    @property
    def columns(self) -> dict[str, str]:
        """The output columns and their Arrow value types. Ids take 2 bytes when every id fits (Megatron's
        and nanoGPT's habit: half the disk and page cache of int32); labels keep int32 for their -100."""
        columns = {"input_ids": token_dtype(self.tokenizer.max_token_id), "document_lengths": "int32"}
        return columns | ({"labels": "int32"} if self.with_labels else {})

    @property
    def validation_columns(self) -> dict[str, str]:
        """The validation split's: the same, and each document piece's source (its index in the manifest's
        `sources`), by which training reports the eval loss per source."""
        return self.columns | {"document_sources": "int32"}

    def choose_engine(self) -> EngineChoice:
        sample = corpus_sample(self)
        return select_engine(self.tokenizer, self.stage.tokenizer_engine, sample)


def token_dtype(max_token_id: int) -> str:
    return "uint16" if max_token_id < 1 << 16 else "int32"


def make_plan(source_config: SourcesConfig, stage: StageConfig, packing: PackingConfig, dedup: DedupConfig,
              workers: WorkersConfig, seed: int, tokenizer: TokenizerInfo | None = None) -> Plan:
    # Evaluation sources come first: exact dedup keeps the first copy of a text, so a training document that
    # repeats an evaluation document is the one dropped (split.py).
    sources = tuple([resolve_source(spec, evaluation=True) for spec in source_config.eval_dataset]
                    + [resolve_source(spec) for spec in source_config.dataset])
    tokenizer = tokenizer or load_tokenizer(stage.tokenizer_path)
    quality = quality_config(stage)
    # A malformed benchmark file stops here, naming its line.
    benchmarks = load_index(tuple(stage.decontaminate)).describe() if stage.decontaminate else None
    inputs = fingerprint_inputs(source_config, stage, packing, dedup, seed, sources, tokenizer, quality)
    return Plan(source_config, stage, packing, dedup, workers, seed, sources, tokenizer, quality, inputs,
                compute_fingerprint(inputs), benchmarks)


def quality_config(stage: StageConfig):
    if stage.quality_filter == "none":
        return None
    from rankzero.data.quality import QualityConfig

    return QualityConfig.from_yaml(stage.quality_config) if stage.quality_config else QualityConfig()


def fingerprint_inputs(source_config: SourcesConfig, stage: StageConfig, packing: PackingConfig, dedup: DedupConfig,
                       seed: int, sources, tokenizer: TokenizerInfo, quality=None) -> dict:
    """Everything that changes the prepared output, and nothing that does not."""
    stage_settings = {k: v for k, v in dataclasses.asdict(stage).items()
                      if k not in ("tokenizer_path", "tokenizer_engine", "quality_config", "decontaminate")}  # by content
    def identities(evaluation: bool) -> list[dict]:
        return [{"identity": s.identity(source_config.fingerprint_content), "weight": s.weight}
                for s in sources if s.evaluation == evaluation]

    return {
        "format_version": FORMAT_VERSION,
        "sources": identities(False),
        "eval_sources": identities(True),
        "validation_split_percentage": source_config.validation_split_percentage,
        "txt_sample_by": source_config.txt_sample_by,
        "tokenizer_sha256": tokenizer.content_hash,
        "stage": stage_settings,
        "quality_settings": quality.to_dict() if quality else None,
        "benchmarks": benchmark_identity(stage.decontaminate) if stage.decontaminate else None,
        "packing": dataclasses.asdict(packing),
        "dedup": dataclasses.asdict(dedup) | ({"minhash": minhash_algorithm(dedup.dedup_threshold)} if dedup.dedup == "near" else {}),
        "seed": seed,
    }


def compute_fingerprint(inputs: dict) -> str:
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:20]


def corpus_sample(plan: Plan) -> list[str]:
    """Texts from the start of every source (~SAMPLE_CHARS in all), as the stage would encode them,
    for the tokenizer-engine check. Bad records are skipped here: the build itself reports them."""
    renderer = ChatRenderer(plan.tokenizer.chat_template, plan.tokenizer.special_tokens)
    budget = max(SAMPLE_CHARS // max(len(plan.sources), 1), 16 << 10)
    sample = []
    for index, source in enumerate(plan.sources):
        chunks = iter_chunks(source, index, 64, plan.source_config.txt_sample_by, plan.max_document_bytes)
        try:
            parsed = chunk_documents(next(chunks), plan.stage.text_column, renderer, with_masks=plan.with_labels,
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
