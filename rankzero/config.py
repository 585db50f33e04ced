"""Typed configuration: one small frozen dataclass per concern, validated when it is made.

    stage = StageConfig(tokenizer_path="tok/", mode="sft")     # ConfigError (a ValueError) naming each bad flag
    args = parse_args(argv)                                      # rankzero/args.py fills an `Args` of them

Each field is a command-line flag of the same name (`--max_seq_length`); its metadata holds the one
line `--help` shows, the allowed choices, and the environment variable it falls back to. A config
checks only itself (`problems()`); what involves two configs or the model is checked in args.py.
Nothing here imports from rankzero.data or rankzero.train: every layer may use these.

Which configs change the prepared data (and so enter its fingerprint, rankzero/data/plan.py):
sources, stage, packing, dedup. Workers and cache say how and where, never what.
"""

from __future__ import annotations

import importlib.util
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rankzero.errors import ConfigError
from rankzero.runtime import env_number, usable_cpu_count

DEFAULT_CACHE_DIR = os.path.join(os.path.expanduser("~"), ".cache", "rankzero")
DEFAULT_DEDUP_THRESHOLD = 0.55  # 40 bands of 3: catches re-edited copies 0.8 keeps (docs/data.md, bench/RESULTS.md)
DEFAULT_SEED = 42  # TrainingArguments' default; tests keep the two in step


def flag(default: Any = None, help: str = "", **metadata) -> Any:
    """A dataclass field that is also a command-line flag; `choices`, `env` and `aliases` go in metadata."""
    return field(default=default, metadata={"help": help, **metadata})


class _Config:
    """Validation shared by the configs: choices from the field metadata, then the class's own rules."""

    def __post_init__(self) -> None:
        problems = [f"--{f.name} {getattr(self, f.name)}: choose one of {', '.join(f.metadata['choices'])}"
                    for f in fields(self) if "choices" in f.metadata
                    and getattr(self, f.name) not in f.metadata["choices"]]
        problems += self.problems()
        if problems:
            raise ConfigError(problems)

    def problems(self) -> list[str]:
        return []

    def _set(self, name: str, value: Any) -> None:  # normalising a frozen field in __post_init__
        object.__setattr__(self, name, value)

    def _from_env(self, defaults: dict[str, int | float]) -> None:
        """Flag > environment variable (the field's `env`) > default, for the fields named; resolved once, here.
        An unparseable variable is a ConfigError naming it."""
        problems = []
        for f in fields(self):
            if f.name in defaults and getattr(self, f.name) is None:
                try:
                    self._set(f.name, env_number(f.metadata["env"], defaults[f.name]))
                except ValueError as error:
                    problems.append(str(error))
        if problems:
            raise ConfigError(problems)


def split_weight(spec: str) -> tuple[str, float | None]:
    """`SPEC@WEIGHT` → (SPEC, WEIGHT); ValueError for a weight that is not a finite number above 0.
    An '@' followed by a path (`/data/user@host/a.jsonl`), or in a path that exists, is part of the path."""
    head, at, tail = spec.rpartition("@")
    if not at or "/" in tail or os.path.exists(os.path.expanduser(spec)):
        return spec, None
    try:
        weight = float(tail)
    except ValueError:
        raise ValueError(f"--dataset {spec}: the weight after '@' must be a number (SPEC@0.3), got '{tail}'") from None
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"--dataset {spec}: the weight after '@' must be a finite number above 0, got '{tail}'")
    return head, weight


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


@dataclass(frozen=True)
class SourcesConfig(_Config):
    """sources: what to read, and what is held out for evaluation"""

    dataset: tuple[str, ...] = flag((), "files, dirs, globs, save_to_disk dirs, hub names; SPEC@WEIGHT mixes by tokens")
    txt_sample_by: str = flag("line", ".txt files: one document per line, paragraph or file",
                              choices=("line", "paragraph", "document"))
    fingerprint_content: str = flag("stat", "input files by path+size+mtime, + first/last MiB, + all bytes",
                                    choices=("stat", "sample", "full"))
    validation_split_percentage: float | None = flag(
        None, "hold out this % of the documents (by a hash of their text) as the validation split")
    eval_dataset: tuple[str, ...] = flag((), "sources held out whole as the validation split (no @WEIGHT); "
                                             "training documents repeating one are dropped")
    max_document_mb: float = flag(64, "a longer line, paragraph, .txt document or CSV field is an error at "
                                      "file:line (a compression bomb?); never changes the output")

    def __post_init__(self) -> None:
        self._set("dataset", tuple(self.dataset))
        self._set("eval_dataset", tuple(self.eval_dataset))
        super().__post_init__()

    def problems(self) -> list[str]:
        if not self.dataset:
            return ["--dataset: give at least one source (a file, directory, glob or hub name)"]
        problems = []
        for spec in self.dataset:
            try:
                split_weight(spec)
            except ValueError as error:
                problems.append(str(error))
        if not (math.isfinite(self.max_document_mb) and self.max_document_mb > 0):
            problems.append(f"--max_document_mb {self.max_document_mb:g}: must be a number of MiB above 0")
        percentage = self.validation_split_percentage
        if percentage is not None and not (math.isfinite(percentage) and 0 < percentage < 100):
            problems.append(f"--validation_split_percentage {percentage:g}: must be above 0 and below 100")
        for spec in self.eval_dataset:
            try:
                weighted = split_weight(spec)[1] is not None
            except ValueError:
                weighted = True
            if weighted:
                problems.append(f"--eval_dataset {spec}: no @WEIGHT here; every document of an evaluation source is "
                                "held out once")
            elif spec in self.dataset:
                problems.append(f"--eval_dataset {spec}: also given to --dataset; a source is for training or for "
                                "evaluation (--validation_split_percentage holds out part of a training source)")
        return problems

    @property
    def has_validation(self) -> bool:
        """Whether the prepare makes a validation split."""
        return self.validation_split_percentage is not None or bool(self.eval_dataset)


@dataclass(frozen=True)
class StageConfig(_Config):
    """stage: records → text → quality → tokens"""

    tokenizer_path: str | None = flag(None, "directory of an HF fast tokenizer (tokenizer.json)")
    tokenizer_engine: str = flag("auto", "fastokens when its ids equal HF's (auto); never changes the output",
                                 choices=("auto", "fastokens", "hf"))
    text_column: str | None = flag(None, "column holding the text (default: text/content/document; a.b: a field)")
    mode: str = flag("pretrain", "sft: prompt tokens get label -100",
                     choices=("pretrain", "sft"))
    quality_filter: str = flag("none", "ko: the Korean quality filter (docs/quality.md)", choices=("none", "ko"))
    quality_config: str | None = flag(None, "YAML overriding thresholds (configs/quality_ko.yaml)")
    skip_bad_records: bool = flag(False, "count and skip malformed records, not stop at file:line")
    on_decode_error: str = flag("error", "bad UTF-8: stop at file:offset, or replace and count",
                                choices=("error", "replace"))
    pii: str = flag("mask", "mask: personal information (phones, e-mails, resident numbers, cards, ...) becomes "
                            "placeholders such as |||PHONE_NUMBER||| (docs/data.md)", choices=("mask", "off"))
    decontaminate: tuple[str, ...] = flag((), "benchmark files or directories (KMMLU CSV, KoBEST/LogicKor JSONL, "
                                              "CLIcK JSON): drop documents holding one of their items")

    def __post_init__(self) -> None:
        self._set("decontaminate", tuple(self.decontaminate))
        super().__post_init__()

    def problems(self) -> list[str]:
        problems = []
        for path in self.decontaminate:
            found = os.path.expanduser(path)
            if not os.path.exists(found):
                problems.append(f"--decontaminate {path}: no such file or directory")
            elif not (os.path.isfile(found) or os.path.isdir(found)):  # a FIFO would be read forever
                problems.append(f"--decontaminate {path}: not a regular file or directory (a FIFO, socket or "
                                "device); give benchmark files or a directory of them")
        if not self.tokenizer_path:
            problems.append("--tokenizer_path: give the directory of an HF fast tokenizer")
        elif not Path(self.tokenizer_path).is_dir():
            problems.append(f"--tokenizer_path {self.tokenizer_path}: no such directory")
        if self.tokenizer_engine == "fastokens" and not _installed("fastokens"):
            problems.append("--tokenizer_engine fastokens: the fastokens package is not installed (pip install fastokens)")
        if self.quality_config and not Path(self.quality_config).is_file():
            problems.append(f"--quality_config {self.quality_config}: no such file")
        if self.quality_config and self.quality_filter == "none":
            problems.append(f"--quality_config {self.quality_config}: only read with --quality_filter ko")
        return problems

    @property
    def with_labels(self) -> bool:
        return self.mode == "sft"


@dataclass(frozen=True)
class PackingConfig(_Config):
    """packing: documents → rows"""

    max_seq_length: int = flag(2048, "tokens per training row")
    packing: bool = flag(True, "rows of exactly max_seq_length (--no_packing: a row per document)")

    def problems(self) -> list[str]:
        return [f"--max_seq_length {self.max_seq_length}: must be at least 2"] if self.max_seq_length < 2 else []


@dataclass(frozen=True)
class DedupConfig(_Config):
    """dedup: documents trained on once"""

    dedup: str = flag("near", "exact: drop repeats of an earlier document's text; near: also near-copies (MinHash, "
                              "word 5-grams); first one wins; with --mode sft exact unless given",
                      choices=("none", "exact", "near"))
    dedup_threshold: float = flag(DEFAULT_DEDUP_THRESHOLD, "--dedup near: drop a document whose estimated Jaccard "
                                                           "similarity to an earlier one is at least this")

    def problems(self) -> list[str]:
        threshold = self.dedup_threshold
        if not (math.isfinite(threshold) and 0 < threshold <= 1):
            return [f"--dedup_threshold {threshold:g}: must be above 0 and at most 1"]
        if self.dedup != "near" and threshold != DEFAULT_DEDUP_THRESHOLD:
            return [f"--dedup_threshold {threshold:g}: only used with --dedup near (got --dedup {self.dedup})"]
        return []


@dataclass(frozen=True)
class WorkersConfig(_Config):
    """workers: how the builder prepares (never changes the output)"""

    dataset_num_proc: int | None = flag(None, "worker threads/processes (default: every usable core)",
                                        env="DATASET_NUM_PROC")
    dataset_batch_size: int | None = flag(None, "documents per chunk of work (default 1000)", env="DATASET_BATCH_SIZE")
    dataset_writer_batch_size: int | None = flag(None, "rows per Arrow record batch (default 1000)",
                                                 env="DATASET_WRITER_BATCH_SIZE")
    prep_engine: str = flag("local", "this machine, or every CPU of a Ray cluster (docs/cluster.md)",
                            choices=("local", "ray"))
    ray_address: str | None = flag(None, "the cluster for --prep_engine ray (default RAY_ADDRESS, else start one)")
    dedup_memory_mb: float | None = flag(None, "--dedup near: MiB of band keys held in memory before sorted runs "
                                               "spill to disk (default 1024)", env="RANKZERO_DEDUP_MEMORY_MB")
    ray_task_mb: float | None = flag(None, "--prep_engine ray: MiB of input per task (default 64)",
                                     env="RANKZERO_RAY_TASK_MB")

    def __post_init__(self) -> None:
        self._from_env({"dataset_num_proc": usable_cpu_count(), "dataset_batch_size": 1000,
                        "dataset_writer_batch_size": 1000, "dedup_memory_mb": 1024.0, "ray_task_mb": 64.0})
        super().__post_init__()

    def problems(self) -> list[str]:
        # `not >= 1`: NaN too. A budget below 1 MiB spills a run every few documents and the decision then
        # re-reads every run per key range, quadratic in the runs: a hang, not a saving.
        at_least_one = ("dataset_num_proc", "dataset_batch_size", "dataset_writer_batch_size", "dedup_memory_mb")
        problems = [f"--{f.name} {getattr(self, f.name)}: must be at least 1 (env {f.metadata['env']})"
                    for f in fields(self) if f.name in at_least_one and not getattr(self, f.name) >= 1]
        if self.dedup_memory_mb == math.inf:
            problems.append("--dedup_memory_mb inf: must be a finite number of MiB (env RANKZERO_DEDUP_MEMORY_MB)")
        if not 0 < self.ray_task_mb < math.inf:  # NaN too; below 1 MiB is fine (the tests cut tiny tasks)
            problems.append(f"--ray_task_mb {self.ray_task_mb}: must be a finite number of MiB above 0 "
                            "(env RANKZERO_RAY_TASK_MB)")
        if os.environ.get("RANKZERO_RAY_TASK_BYTES"):  # the variable this replaced: never silently ignored
            problems.append("environment variable RANKZERO_RAY_TASK_BYTES is no longer read: set RANKZERO_RAY_TASK_MB "
                            "(MiB) or --ray_task_mb")
        if self.prep_engine == "ray" and not _installed("ray"):
            problems.append("--prep_engine ray: Ray is not installed (pip install 'rankzero[ray]')")
        if self.prep_engine != "ray" and self.ray_address:
            problems.append(f"--ray_address {self.ray_address}: only used with --prep_engine ray")
        return problems


@dataclass(frozen=True)
class CacheConfig(_Config):
    """cache: where prepared data is published, who builds it, how the others wait"""

    cache_dir: str | None = flag(None, "one dir per prepared dataset (default ~/.cache/rankzero)", env="RANKZERO_CACHE")
    prep_scope: str = flag("auto", "one builder per job or per node; auto: is the cache dir shared?",
                           choices=("auto", "global", "node"))
    prep_timeout_s: float = flag(6 * 3600.0, "waiting ranks give up after this many seconds")
    prep_probe_s: float | None = flag(None, "--prep_scope auto on several nodes: seconds a rank looks for rank 0's "
                                            "probe file in the cache dir before it calls the dir unshared (default 10)",
                                      env="RANKZERO_PROBE_S")
    prep_startup_grace_s: float | None = flag(None, "seconds waiting ranks give the builder to show its first sign "
                                                    "of life (default 60; more for a slow shared filesystem)",
                                              env="RANKZERO_STARTUP_GRACE_S")
    verify_data: bool = flag(False, "checksum every byte of a prepared dataset before use, not only sizes")

    def __post_init__(self) -> None:
        if self.cache_dir is None:  # flag > environment variable > default
            self._set("cache_dir", os.environ.get("RANKZERO_CACHE") or DEFAULT_CACHE_DIR)
        self._from_env({"prep_probe_s": 10.0, "prep_startup_grace_s": 60.0})
        super().__post_init__()

    def problems(self) -> list[str]:
        # `not > 0`: NaN too. Only the give-up timeout may be infinite (wait as long as the builder lives).
        problems = [f"--prep_timeout_s {self.prep_timeout_s}: must be positive"] if not self.prep_timeout_s > 0 else []
        return problems + [f"--{f.name} {getattr(self, f.name)}: must be a finite number of seconds above 0 "
                           f"(env {f.metadata['env']})" for f in fields(self)
                           if f.name in ("prep_probe_s", "prep_startup_grace_s")
                           and not (getattr(self, f.name) > 0 and math.isfinite(getattr(self, f.name)))]


@dataclass(frozen=True)
class ModelConfig(_Config):
    """model: what to train"""

    model_config: str | None = flag(None, "HF config JSON: a new model (configs/model_config_*.json)")
    pretrained_model: str | None = flag(None, "HF checkpoint dir to continue from",
                                        aliases=("--model_name_or_path",))
    attn_implementation: str = flag("sdpa", "attention kernel", choices=("sdpa", "eager", "flash_attention_2",
                                                                          "flex_attention"))
    mask_across_documents: bool = flag(False, "stop attention at document edges in packed rows")
    pad_to_multiple_of: int = flag(8, "unpacked rows: pad batches to a multiple of this")
    allow_data_change: bool = flag(False, "resume although the checkpoint was trained on other data")
    train_new_embeddings_steps: int = flag(0, "with --pretrained_model and a tokenizer it lacks tokens of: train only "
                                              "the new embedding rows for this many steps, then everything")
    lm_loss: str = flag("auto", "the training loss: full (HF's, over the full logits), chunked (the head applied a "
                                "chunk of tokens at a time), liger (fused kernel, CUDA), auto (liger, else chunked where "
                                "exact, else full; docs/training.md)", choices=("auto", "full", "chunked", "liger"))
    activation_checkpointing: str = flag("none", "recompute in the backward: each decoder layer whole (full; "
                                                 "--gradient_checkpointing), only its cheap ops (selective), or nothing",
                                         choices=("none", "full", "selective"))
    float8: bool = flag(False, "float8 matmuls and all-gathers (torchao; Hopper GPUs only)")

    def problems(self) -> list[str]:
        problems = []
        if self.train_new_embeddings_steps < 0:
            problems.append(f"--train_new_embeddings_steps {self.train_new_embeddings_steps}: must be at least 0")
        elif self.train_new_embeddings_steps and not self.pretrained_model:
            problems.append(f"--train_new_embeddings_steps {self.train_new_embeddings_steps}: needs --pretrained_model "
                            "(the rows it trains first are those a checkpoint lacks for the tokenizer)")
        # A missing --model_config or --pretrained_model is checked with the resume (checks.py): a resume takes the
        # checkpoint's model.
        if self.model_config and self.pretrained_model:
            problems.append("--model_config and --pretrained_model: give only one")
        if self.pad_to_multiple_of < 1:
            problems.append(f"--pad_to_multiple_of {self.pad_to_multiple_of}: must be at least 1")
        return problems


DEFAULT_BENCHMARK_ITEMS = 50  # a benchmark's items scored by default: 2-4% of the demo run (bench/RESULTS.md)


@dataclass(frozen=True)
class BenchmarkConfig(_Config):
    """benchmarks: multiple-choice scores in the loop, as lm-evaluation-harness computes them"""

    benchmarks: tuple[str, ...] = flag((), "KMMLU CSV / JSONL files or dirs, scored at each evaluation, at the end "
                                           "and, with --pretrained_model, before the first step")
    benchmark_shots: int = flag(0, "solved examples before each question (seeded, from the dev split if any)")
    benchmark_max_items: int = flag(DEFAULT_BENCHMARK_ITEMS, "items scored per benchmark: a fixed seeded subset "
                                                             "(0: all)")
    decontaminate_benchmarks: bool = flag(True, "also --decontaminate against the --benchmarks files")

    def __post_init__(self) -> None:
        self._set("benchmarks", tuple(self.benchmarks))
        super().__post_init__()

    def problems(self) -> list[str]:
        problems = [f"--benchmarks {path}: no such file or directory" for path in self.benchmarks
                    if not os.path.exists(os.path.expanduser(path))]
        if self.benchmark_shots < 0:
            problems.append(f"--benchmark_shots {self.benchmark_shots}: must be at least 0")
        if self.benchmark_max_items < 0:
            problems.append(f"--benchmark_max_items {self.benchmark_max_items}: must be at least 0 (0: every item)")
        return problems


# The configs in the order --help shows them.
CONFIGS = {"sources": SourcesConfig, "stage": StageConfig, "packing": PackingConfig, "dedup": DedupConfig,
           "workers": WorkersConfig, "cache": CacheConfig, "model": ModelConfig, "benchmarks": BenchmarkConfig}


@dataclass(frozen=True)
class Args:
    """Everything a run was given, parsed and checked (rankzero/args.py: parse_args)."""

    sources: SourcesConfig
    stage: StageConfig
    packing: PackingConfig
    dedup: DedupConfig
    workers: WorkersConfig
    cache: CacheConfig
    model: ModelConfig
    benchmarks: BenchmarkConfig
    training: Any  # rankzero.train.training_args.TrainingArguments; None with --tokenize_only
    tokenize_only: bool = False
    seed: int = DEFAULT_SEED
    given: frozenset[str] = frozenset()  # fields set on the command line or in the recipe (defaults apply elsewhere)
    recipe: str | None = None
    overwrite_output_dir: bool = False
    # The Trainer flags given, as parsed and before TrainingArguments processed them (rankzero/recipe.py
    # records these): name → value.
    training_given: dict[str, Any] = field(default_factory=dict)
    # Our flags that the parser set for this run because the user did not (checks.py: data_defaults):
    # name → "value (why)", printed with the Trainer's fast defaults.
    defaults: dict[str, str] = field(default_factory=dict)
    # What rankzero/recipe.py's `replay` did with the recipe (None without one): the keys taken from it
    # ("replayed"), those left out and why.
    replayed: dict[str, Any] | None = None
    # The --benchmarks files as read before training (rankzero/data/screen/benchmark_files.py: Suite), every rank.
    suites: tuple = ()
