"""FSDP checkpoints: their DCP metadata read safely, and exported as one plain HF directory.

    metadata = read_dcp_metadata(directory)             # verify.py checks the shards against it
    problems = pretrained_weights_problems(directory)   # checks.py: --pretrained_model naming an FSDP checkpoint
    state_dict = gathered_state_dict(model)              # every rank; the full weights on rank 0 ({} elsewhere)
    with optimizer_as_saved(model, optimizer, checkpoint): …  # trainer.py: a resume's optimizer, as it was saved
    save_model_files(checkpoint_dir, model, tokenizer)   # rank 0: config and tokenizer beside the shards
    problems = export_problems(checkpoint_dir)           # config.json against the shards' names and shapes
    export_checkpoint(checkpoint_dir, output_dir)        # scripts/export_checkpoint.py: DCP shards → HF dir

Under FSDP a checkpoint holds the model and the optimizer as DCP folders (`pytorch_model_fsdp_0/`,
`optimizer_0/`: each rank writes its own `__<rank>_0.distcp`, and the coordinator writes `.metadata`
last, once every rank has written its part), or with `state_dict_type FULL_STATE_DICT` one
`pytorch_model_fsdp.bin` and `optimizer.bin` gathered on rank 0; verify.py checks both without loading
a tensor.

**`.metadata` is a pickle**, and torch (2.13) reads it with plain `pickle.load`: a planted file would run
code from the checks themselves. rankzero reads it with an unpickler that builds only what DCP metadata
holds (its dataclasses and enum, torch.Size, dtypes and layouts, paths) and calls anything else damaged, not run;
the export loads through the same reader. A resume verifies the checkpoint this way before accelerate's
own `dcp.load` reads the file.

The finished run is one plain HF directory (safetensors, config, tokenizer) that
`AutoModelForCausalLM.from_pretrained` loads: the shards are gathered once, at the end, onto rank 0 (in
host memory, one parameter at a time on the device) and saved with `save_pretrained`, which writes
tied weights once. A checkpoint's shards are exported the same way by one process, no process group.
"""

from __future__ import annotations

import os
import pickle
from contextlib import contextmanager
from pathlib import Path

FSDP_MODEL = "pytorch_model_fsdp"
DCP_METADATA = ".metadata"
# What torch's FileSystemWriter pickles into .metadata (2.13: found by recording find_class over real saves).
METADATA_CLASSES = {
    "torch.distributed.checkpoint.metadata": {"Metadata", "TensorStorageMetadata", "ChunkStorageMetadata",
                                              "BytesStorageMetadata", "TensorProperties", "MetadataIndex",
                                              "StorageMeta", "_MEM_FORMAT_ENCODING"},
    "torch.distributed.checkpoint.filesystem": {"_StorageInfo"},
    "torch": {"Size"},
    "torch.serialization": {"_get_layout"},  # a layout by its name, from torch's own table
    "pathlib": {"Path", "PosixPath", "WindowsPath", "PurePosixPath", "PureWindowsPath"},  # StorageMeta.checkpoint_id
    "collections": {"OrderedDict"},
}


class DamagedMetadata(ValueError):
    """A .metadata that is not DCP metadata: cut short, overwritten, or planted."""


def _enum_member(cls, name: str):
    """What `builtins.getattr` may do in DCP metadata: name a member of one of its enums. Python 3.11.2 (Debian
    12's) pickles an enum member as getattr(its class, its name), where 3.11.7 pickles it by value."""
    import enum

    if (isinstance(cls, enum.EnumMeta) and cls.__name__ in METADATA_CLASSES.get(cls.__module__, ())
            and isinstance(name, str) and name in cls.__members__):
        return cls[name]
    named = cls.__name__ if isinstance(cls, type) else type(cls).__name__
    raise DamagedMetadata(f"it asks for getattr({named}, {name!r}), which DCP metadata never holds (not loaded: "
                          "damaged, or planted to run code)")


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        import torch

        if module == "builtins" and name == "getattr":
            return _enum_member
        if name in METADATA_CLASSES.get(module, ()) or module == "torch" and isinstance(getattr(torch, name, None),
                                                                                         torch.dtype):
            return super().find_class(module, name)
        raise DamagedMetadata(f"it asks for {module}.{name}, which DCP metadata never holds (not loaded: damaged, or "
                              "planted to run code)")


def read_dcp_metadata(directory: str | os.PathLike):
    """The DCP folder's Metadata, unpickled without running anything else (module docstring); DamagedMetadata
    (one line: what is wrong) for a file that is cut short or holds anything but DCP metadata."""
    from torch.distributed.checkpoint.metadata import Metadata

    path = Path(directory, DCP_METADATA)
    try:
        with open(path, "rb") as handle:
            metadata = _MetadataUnpickler(handle).load()
    except DamagedMetadata:
        raise
    except (EOFError, pickle.UnpicklingError) as error:
        if isinstance(error, EOFError) or "truncated" in str(error):
            raise DamagedMetadata("it ends before the pickle does: cut short") from None
        raise DamagedMetadata(f"it does not unpickle ({error}): damaged") from None
    except Exception as error:  # a broken pickle raises UnpicklingError, ValueError, TypeError, …
        raise DamagedMetadata(f"it does not unpickle ({type(error).__name__}: {error}): damaged") from None
    if not isinstance(metadata, Metadata) or not isinstance(metadata.state_dict_metadata, dict) \
            or not isinstance(metadata.storage_data, dict):
        raise DamagedMetadata(f"it holds a {type(metadata).__name__}, not DCP's Metadata with its storage table: "
                              "damaged")
    return metadata


def metadata_reader(directory: str | os.PathLike):
    """torch's FileSystemReader for a DCP folder, reading its .metadata with read_dcp_metadata."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args, **kwargs):
            metadata = read_dcp_metadata(self.path)
            metadata.storage_meta = metadata.storage_meta or StorageMeta()
            metadata.storage_meta.load_id = self.load_id  # as FileSystemReader.read_metadata does
            return metadata

    return SafeReader(str(directory))


def is_fsdp_checkpoint(names: set[str]) -> bool:
    return any(name.startswith(FSDP_MODEL) for name in names)


def pretrained_weights_problems(directory: str | os.PathLike) -> list[str]:
    """--pretrained_model naming an FSDP checkpoint: its weights are DCP shards, which from_pretrained cannot read
    (checks.py, at argument time; `./pretrain_cont.sh RUN/checkpoint-N` passes it so)."""
    directory = Path(directory)
    names = set(os.listdir(directory)) if directory.is_dir() else set()
    if not is_fsdp_checkpoint(names) or any(name.startswith(("model.safetensors", "pytorch_model.bin")) for name in names):
        return []
    run = directory.parent if directory.name.startswith("checkpoint-") else directory
    return [f"--pretrained_model {directory}: an FSDP checkpoint (the weights are DCP shards in {FSDP_MODEL}_0/, no "
            f"model.safetensors). To go on with its run exactly: RESUME=1 ./pretrain_cont.sh {directory}; to start a "
            f"new run from its weights, export them first: python scripts/export_checkpoint.py {directory} "
            f"{run}-export, then --pretrained_model {run}-export"]


@contextmanager
def optimizer_as_saved(model, optimizer, checkpoint: str | os.PathLike):
    """Around accelerate's load of an FSDP optimizer from `checkpoint` (every rank, a fresh optimizer): the
    parameters the checkpoint holds a state for get one to load into, the others none.

    accelerate asks torch's get_optimizer_state_dict which keys to load, and that first steps a stateless
    optimizer once with zero gradients (lr 0) so that every parameter has a state; then set_optimizer_state_dict
    refuses a parameter that requires a gradient and has no state in the checkpoint. A checkpoint saved inside
    --train_new_embeddings_steps holds none for the parameters that had not trained yet (vocabulary.py: they
    start fresh when those steps end), so the resume stopped at "Missing key in checkpoint state_dict:
    optimizer.state.….step". Here the optimizer is stepped the same way with zero gradients on the checkpoint's
    parameters only, and the others are marked as needing no gradient while it loads: it asks for the
    checkpoint's keys and no others, the rest start fresh when they first train, as in the run that saved it,
    and the resume is exact."""
    import torch

    folder = Path(checkpoint, "optimizer_0")
    optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper steps only on a sync step
    stateless = []
    if not optimizer.state and (folder / DCP_METADATA).is_file():
        prefix = "optimizer.state."
        held = {key[len(prefix):].rpartition(".")[0] for key in read_dcp_metadata(folder).state_dict_metadata
                if key.startswith(prefix)}
        # The checkpoint's names are torch's canonical ones (_get_fqns: no activation-checkpointing or compile
        # wrapper in them), which named_parameters keeps; a tied weight has two names.
        from torch.distributed.checkpoint.state_dict import _get_fqns

        names: dict[int, set[str]] = {}
        for name, parameter in model.named_parameters(remove_duplicate=False):
            names.setdefault(id(parameter), set()).update(_get_fqns(model, name))
        trained = [parameter for group in optimizer.param_groups for parameter in group["params"]]
        stateless = [parameter for parameter in trained if not names.get(id(parameter), set()) & held]
        if len(stateless) == len(trained):
            stateless = []  # names that match nothing: leave the load to torch, which names what it misses
    if stateless:
        for parameter in trained:
            parameter.grad = None if any(parameter is other for other in stateless) else torch.zeros_like(parameter)
        rates = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = torch.tensor(0.0) if isinstance(group["lr"], torch.Tensor) else 0.0
        optimizer.step()
        for group, rate in zip(optimizer.param_groups, rates):
            group["lr"] = rate
        optimizer.zero_grad(set_to_none=True)
    for parameter in stateless:
        parameter.requires_grad_(False)
    try:
        yield
    finally:
        for parameter in stateless:
            parameter.requires_grad_(True)


def gathered_state_dict(model) -> dict:
    """The full, unsharded state dict on rank 0 (host memory), {} on the other ranks. A collective."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state_dict = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    # Tied weights (input and output embeddings) come back as separate copies under both names, and
    # save_pretrained would write both: keep the first name of each parameter, as the model's own state dict does.
    names: dict[int, list[str]] = {}
    for name, parameter in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(parameter), []).append(name)
    for shared in names.values():
        for name in shared[1:]:
            state_dict.pop(name, None)
    return state_dict


def save_model_files(directory: str | os.PathLike, model, tokenizer) -> None:
    """config.json (and generation_config.json) and the tokenizer beside a checkpoint's shards, so that the
    checkpoint alone is enough to export it."""
    model.config.save_pretrained(directory)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)


def export_checkpoint(checkpoint: str | os.PathLike, output_dir: str | os.PathLike) -> Path:
    """A checkpoint (FSDP's DCP shards, or any HF weights) as one plain HF directory in `output_dir`: one
    process, no process group, the whole model in host memory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    checkpoint, output_dir = Path(checkpoint), Path(output_dir)
    if (checkpoint / f"{FSDP_MODEL}_0").is_dir():
        model = _model_from_shards(checkpoint, checkpoint / f"{FSDP_MODEL}_0")
    else:
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32)
    output_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(output_dir)
    if (checkpoint / "tokenizer_config.json").is_file():
        AutoTokenizer.from_pretrained(checkpoint).save_pretrained(output_dir)
    return output_dir


def export_problems(checkpoint: str | os.PathLike) -> list[str]:
    """Whether the model config.json describes is the one whose weights the checkpoint's DCP shards hold: every
    tensor there has a place of its shape, and every weight of the model is there (a config edited after the
    run: a layer fewer would drop one silently). Reads the metadata only; [] for a checkpoint of HF weights."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    checkpoint = Path(checkpoint)
    shards = checkpoint / f"{FSDP_MODEL}_0"
    if not shards.is_dir():
        return []
    if not (checkpoint / "config.json").is_file():
        return [f"no config.json beside {shards.name}/ (saved by an older rankzero or another tool): copy the run's "
                "config.json into it"]
    try:
        config = AutoConfig.from_pretrained(checkpoint)
        with torch.device("meta"):  # names and shapes, no memory
            model = AutoModelForCausalLM.from_config(config)
        stored = {name.removeprefix("model."): tuple(entry.size)
                  for name, entry in read_dcp_metadata(shards).state_dict_metadata.items()
                  if name.startswith("model.") and hasattr(entry, "size")}
    except DamagedMetadata as error:
        return [f"{shards.name}/{DCP_METADATA} does not load: {error}"]
    except (OSError, ValueError, KeyError) as error:
        return [f"config.json does not describe a model transformers builds ({error})"]
    wanted = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    aliases = {}  # a tied weight is saved under its first name only
    for name, parameter in model.named_parameters(remove_duplicate=False):
        aliases.setdefault(id(parameter), []).append(name)
    missing = sorted(name for names in aliases.values() if not any(name in stored for name in names) for name in names[:1])
    extra = sorted(set(stored) - set(wanted))
    shapes = [f"{name} {list(stored[name])} there, {list(wanted[name])} in the config's model"
              for name in sorted(set(stored) & set(wanted)) if stored[name] != wanted[name]]
    problems = [f"{shards.name}/ holds {what}: config.json is not the config of this checkpoint's model (edited "
                "after the run?); put the run's config.json back"
                for what in (f"{len(extra)} tensor(s) its model has no place for ({_first(extra)})" if extra else None,
                             f"no {_first(missing)} of its model" if missing else None,
                             f"tensors of other shapes: {_first(shapes)}" if shapes else None) if what]
    return problems


def _first(items: list[str], count: int = 3) -> str:
    return ", ".join(items[:count]) + (f" and {len(items) - count} more" if len(items) > count else "")


def _model_from_shards(checkpoint: Path, shards: Path):
    """The model of config.json with the weights of a DCP folder (accelerate saves them under "model.")."""
    import torch
    import torch.distributed.checkpoint as dcp
    from transformers import AutoConfig, AutoModelForCausalLM

    from rankzero.errors import RankzeroError

    problems = export_problems(checkpoint)  # every weight is in the shards, of its shape, and nothing else is
    if problems:
        raise RankzeroError(f"{checkpoint}: {'; '.join(problems)}")
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(checkpoint), dtype=torch.float32)
    reader = metadata_reader(shards)
    stored = set(reader.read_metadata().state_dict_metadata)
    present = {name: tensor for name, tensor in model.state_dict().items() if f"model.{name}" in stored}
    dcp.load({"model": present}, storage_reader=reader, no_dist=True)
    model.load_state_dict(present, strict=False)
    model.tie_weights()  # the tied copy, saved under its first name only
    return model
