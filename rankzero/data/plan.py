"""The plan of a prepare, resolved once from the configs: sources, tokenizer, quality settings, fingerprint.

    plan = make_plan(args.sources, args.stage, args.packing, args.dedup, args.workers, seed)   # every rank; cheap
    plan.fingerprint                         # names the published dir
    start = plan.start(build_dir / "evaluation.jsonl")   # the builder only, once, whichever engine builds
    start.reading, start.output, start.corpus, start.spec  # what the build's parts take; start.engine: the
                                                           # tokenizer engine, checked against HF on a sample

Both build engines (`local.py` on this machine, `ray_engine.py` on a cluster) take a plan and run the
same per-chunk stage (`stage.py`) over its sources; the handoff (`handoff.py`) publishes the result
under `plan.fingerprint`. What an engine hands on is never the Plan but the few settings each part
uses, made here: how the sources are read (`Reading`), how documents become rows and shards (`Output`),
what is counted and decided over the whole corpus (`Corpus`, for engines/tally.py, with `ManifestSettings`
for its manifest) and the stage (`StageSpec`). The start-up both engines share (the tokenizer-engine check, the
held-out documents' file, the stage) is one call, `Plan.start`, so it is written and read once.
The fingerprint hashes the configs that change the output (sources, stage, packing, dedup) as a canonical dict,
with each source's identity and the tokenizer's content in place of their paths — never the workers config, nor
the tokenizer engine (`select_engine` only takes an engine that gives the HF tokenizer's ids).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from rankzero.config import DedupConfig, PackingConfig, SourcesConfig, StageConfig, WorkersConfig
from rankzero.data.dedup.minhash import algorithm as minhash_algorithm
from rankzero.data.encode import SAMPLE_CHARS, EngineChoice, TokenizerInfo, load_tokenizer, select_engine
from rankzero.data.inputs.readers import lenient_documents
from rankzero.data.inputs.records import ChatRenderer, chat_rendering
from rankzero.data.inputs.specs import Source, resolve_source
from rankzero.data.screen.decontaminate import benchmark_identity
from rankzero.data.screen.eval_overlap import write_evaluation
from rankzero.data.screen.screening import load_index
from rankzero.data.split import threshold
from rankzero.data.stage import StageSpec
from rankzero.errors import RankzeroError

# Bump when the output of the same inputs changes (3: exact dedup without the filter; 4: SFT rows by bin packing
# of whole samples, the validation split; 5: input_ids stored as uint16 when the vocabulary fits; 6: --dedup near,
# the default in pretraining; 7: SFT samples with nothing to train on dropped, empty answers not trained; 8: --pii
# mask, the default; 9: validation rows of one source each, with document_sources, and personal numbers behind any
# Unicode dash, space or invisible character masked: a cache built before would hold them raw).
FORMAT_VERSION = 9


@dataclass(frozen=True)
class Reading:
    """How the build reads its sources into documents: the engines' chunks, the held-out file (eval_overlap.py)
    and the tokenizer-engine check's sample."""

    batch_size: int  # --dataset_batch_size: lines or records per chunk
    txt_sample_by: str
    max_document_bytes: int  # --max_document_mb in bytes
    text_column: str | None
    with_masks: bool  # SFT: each segment says whether it is trained on
    chat_template: str | None
    special_tokens: dict[str, str]

    def renderer(self) -> ChatRenderer:
        return ChatRenderer(self.chat_template, self.special_tokens)


@dataclass(frozen=True)
class Output:
    """How documents become rows and shards, on either engine."""

    packing: PackingConfig
    whole_samples: bool  # SFT: a sample is never split over rows
    columns: dict[str, str]  # output column → Arrow value type
    validation_columns: dict[str, str]
    validation: bool  # a validation split is written
    writer_batch_size: int
    seed: int
    fingerprint: str


@dataclass(frozen=True)
class ManifestSettings:
    """What the manifest says of the settings that made the output (engines/tally.build_manifest)."""

    fingerprint: str
    max_seq_length: int
    packing: bool
    mode: str
    chat_rendering: str | None  # SFT: how chats were rendered
    columns: dict[str, str]
    seed: int
    tokenizer: dict  # path, content hash, vocabulary size, EOS and BOS ids
    quality_filter: str
    quality_settings: dict | None  # None without the filter
    dedup: str
    settings: dict  # the reading and worker settings, which never change the output


@dataclass(frozen=True)
class Corpus:
    """What a build counts and decides over the whole corpus (engines/tally.Tally), and reports."""

    sources: tuple[Source, ...]
    validation_split_percentage: float | None
    validation_flags: str | None  # the flags that asked for a split, as given (None: no split)
    exact_dedup: bool
    near_threshold: float | None  # --dedup near's Jaccard threshold (None: no near dedup)
    dedup_memory_bytes: int
    mask_pii: bool
    benchmarks: dict | None  # what the --decontaminate index holds
    tokenizer: TokenizerInfo  # near dedup's samples show the start of each copy as text
    manifest: ManifestSettings


@dataclass(frozen=True)
class Start:
    """What either engine starts from (Plan.start): the settings it hands on, the tokenizer engine the check chose,
    and the per-chunk stage."""

    reading: Reading
    output: Output
    corpus: Corpus
    engine: EngineChoice
    spec: StageSpec


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
    def near_threshold(self) -> float | None:
        """--dedup near's Jaccard threshold (None: near-copies are kept)."""
        return self.dedup.dedup_threshold if self.near_dedup else None

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

    @property
    def held_out_below(self) -> int | None:
        """The text hash below which a document is held out (split.py; None: no --validation_split_percentage)."""
        return threshold(self.source_config.validation_split_percentage)

    def start(self, held_out_file: Path) -> Start:
        """The start-up both engines share: the tokenizer engine checked on a sample of the corpus (it encodes, so
        after the builder set its threads), the held-out documents' texts written to `held_out_file` for the stage
        (screen/eval_overlap.py; nothing is written without a validation split), and the stage built from both."""
        reading = self.reading()
        sample = corpus_sample(self.sources, reading)
        engine = select_engine(self.tokenizer, self.stage.tokenizer_engine, sample)
        overlap = write_evaluation(held_out_file, self.sources, reading, self.held_out_below)
        return Start(reading, self.output(), self.corpus(), engine, self.stage_spec(engine.engine.name, overlap))

    def stage_spec(self, engine: str, eval_overlap: dict | None = None) -> StageSpec:
        """The per-chunk stage as one value (stage.py), with the tokenizer `engine` the builder checked and the
        held-out documents' file (eval_overlap.write_evaluation; None: no split)."""
        # A repeat of an earlier text is dropped whatever else happens to it, and counted as the engine's exact
        # dedup would (`exact_duplicate`), so the stage drops it before the costly part. Not with --eval_dataset
        # (a repeat of an evaluation text is `in_eval_dataset`, which the engine decides) nor in SFT (a sample
        # with nothing to train is `no_trainable_tokens`, which is decided after tokenizing).
        drop_repeats = self.exact_dedup and not self.source_config.eval_dataset and not self.with_labels
        # A line byte for byte like a kept document's gives the same record, text and verdicts, so it can be dropped
        # before it is parsed, where nothing on its way would have been counted: not where its bytes may be replaced
        # (--on_decode_error replace counts replaced lines), nor for a document whose mojibake the filter repaired or
        # in which the screen counted something (the stage leaves those out: `line_stands_in`).
        skip_kept_lines = drop_repeats and self.stage.on_decode_error == "error"
        return StageSpec(self.stage, engine, self.quality, self.needs_hashes, self.near_dedup, self.truncate_to,
                         drop_repeats, skip_kept_lines, eval_overlap)

    def reading(self) -> Reading:
        config, tokenizer = self.source_config, self.tokenizer
        return Reading(self.workers.dataset_batch_size, config.txt_sample_by, self.max_document_bytes,
                       self.stage.text_column, self.with_labels, tokenizer.chat_template, tokenizer.special_tokens)

    def output(self) -> Output:
        return Output(self.packing, self.with_labels, self.columns, self.validation_columns, self.has_validation,
                      self.workers.dataset_writer_batch_size, self.seed, self.fingerprint)

    def manifest_settings(self) -> ManifestSettings:
        stage, workers, tokenizer = self.stage, self.workers, self.tokenizer
        return ManifestSettings(
            self.fingerprint, self.packing.max_seq_length, self.packing.packing, stage.mode,
            chat_rendering(tokenizer.chat_template) if self.with_labels else None, self.columns, self.seed,
            {"path": os.path.abspath(tokenizer.path), "sha256": tokenizer.content_hash,
             "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id, "bos_ids": list(tokenizer.bos_ids)},
            stage.quality_filter, self.quality.to_dict() if self.quality else None, self.dedup.dedup,
            {"text_column": stage.text_column, "txt_sample_by": self.source_config.txt_sample_by,
             "skip_bad_records": stage.skip_bad_records, "on_decode_error": stage.on_decode_error,
             "num_proc": workers.dataset_num_proc, "batch_size": workers.dataset_batch_size,
             "writer_batch_size": workers.dataset_writer_batch_size, "dedup_memory_mb": workers.dedup_memory_mb})

    def corpus(self) -> Corpus:
        return Corpus(self.sources, self.source_config.validation_split_percentage, self.validation_flags,
                      self.exact_dedup, self.near_threshold,
                      self.dedup_memory_bytes, self.stage.pii == "mask", self.benchmarks, self.tokenizer,
                      self.manifest_settings())


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


def corpus_sample(sources: tuple[Source, ...], reading: Reading) -> list[str]:
    """Texts from the start of every source (~SAMPLE_CHARS in all), as the stage would encode them,
    for the tokenizer-engine check."""
    renderer = reading.renderer()
    budget = max(SAMPLE_CHARS // max(len(sources), 1), 16 << 10)
    sample = []
    for index, source in enumerate(sources):
        chunks = lenient_documents(source, index, reading, renderer, 64)
        try:
            documents = next(chunks)  # the first chunk's
        except (StopIteration, RankzeroError):
            continue
        finally:
            chunks.close()
        taken = 0
        for segments in documents:
            for text, _ in segments:
                sample.append(text[:budget - taken])
                taken += len(sample[-1])
            if taken >= budget:
                break
    return sample
