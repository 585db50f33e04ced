"""TrainingArguments: Hugging Face's class with device set-up deferred until the data is ready.

    training = TrainingArguments(output_dir="runs/x")           # no process group yet
    set_up_devices(training, runtime)                           # devices + process group, once the data is ready
    training = training.replaced(learning_rate=1e-3)            # a copy that keeps the set-up

Why defer: `transformers.TrainingArguments.__post_init__` reads `self.device`, which builds
accelerate's `PartialState` and, under torchrun, initialises the process group. `train.py` parses
its arguments *before* the data is prepared, and the ranks that wait for the builder must not hold
a process group (an NCCL barrier times out after 10 minutes). Our subclass skips that one read;
everything else in `__post_init__` (validation included) runs as before, and `set_up_devices` makes
the first later read of `.device`, which sets devices and the process group up — after the data is ready.
rankzero's defaults for the other fields are chosen in defaults.py.
"""

from __future__ import annotations

import dataclasses
import os
import socket

import transformers

from rankzero.runtime import Runtime


class TrainingArguments(transformers.TrainingArguments):
    __doc__ = transformers.TrainingArguments.__doc__

    def __post_init__(self):
        from rankzero.train.recompute import quiet_checkpointing_warning
        from rankzero.train.sharding import fsdp_words_to_config

        # Several backends in one value (`--report_to tensorboard,wandb`, a recipe's list): the command line
        # gives this field one string, which TrainingArguments would take as one backend's name.
        if isinstance(self.report_to, str) and "," in self.report_to:
            self.report_to = [name.strip() for name in self.report_to.split(",") if name.strip()]
        # `--fsdp full_shard` (the form torchtitan-era docs and recipes use) into `fsdp=True` + fsdp_config, as
        # transformers itself does, without its deprecation warning for the string form.
        self.fsdp, self.fsdp_config = fsdp_words_to_config(self.fsdp, self.fsdp_config)
        if self.fsdp:
            quiet_checkpointing_warning()  # before transformers' check below warns of an all-gather that is not made
        self.__dict__["_defer_devices"] = True
        try:
            super().__post_init__()
        finally:
            self.__dict__["_defer_devices"] = False

    def replaced(self, **changes) -> TrainingArguments:
        """A copy with `changes`, validated as the original was, that keeps its device set-up: the set-up is the
        process's (accelerate's state, the process group), and HF's would reset that state on the copy's first read
        of `.device`, undoing what set_up_devices chose (LOCAL_RANK hidden for one CPU process)."""
        copy = dataclasses.replace(self, **changes)
        for name in ("_setup_devices", "distributed_state", "_n_gpu"):  # HF's cached set-up and what it sets
            if name in self.__dict__:
                copy.__dict__[name] = self.__dict__[name]
        return copy

    @property
    def device(self):
        if self.__dict__.get("_defer_devices"):
            return None  # __post_init__'s only use of it is to trigger the set-up we defer
        return transformers.TrainingArguments.device.fget(self)

    @property
    def world_size(self):
        if self.__dict__.get("_defer_devices"):
            # transformers' DeepSpeed config reads it in __post_init__ (train_batch_size = world × micro-batch ×
            # accumulation). The process group that set-up would create spans the launcher's world (runtime.py).
            return Runtime.from_env().world_size
        return transformers.TrainingArguments.world_size.fget(self)

    def __getattr__(self, name):
        # Only reached for attributes the deferred set-up would have created (read by e.g. `.should_log`).
        if name in ("distributed_state", "_n_gpu") and not self.__dict__.get("_defer_devices"):
            self._setup_devices
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


def set_up_devices(training: TrainingArguments, runtime: Runtime):
    """The deferred device set-up (and, with 2+ ranks, the process group): call once every rank holds the data.

    A single process on CPU trains without DDP. torchrun sets LOCAL_RANK even for one process, and accelerate
    takes any LOCAL_RANK on CPU as a distributed run (MULTI_CPU), which it wraps in DDP whatever the world
    size: gradient buckets copied and all-reduced with nobody every step. So LOCAL_RANK is hidden from that one
    read. On CUDA accelerate already skips DDP for one process, and hiding it there would be wrong: without
    LOCAL_RANK the Trainer spreads one process over every visible GPU with nn.DataParallel.
    --fsdp or --deepspeed in a single process gets a process group of one (one_process_group), never an
    unsharded run (ZeRO-3 builds the model over that group; DeepSpeed would otherwise look for MPI).
    """
    sharded = training.fsdp or training.deepspeed is not None
    if sharded and not runtime.is_distributed:
        one_process_group()
    if sharded or runtime.is_distributed or not training.use_cpu or "LOCAL_RANK" not in os.environ:
        device = training.device
        deepspeed_comm(training)
        return device
    local_rank = os.environ.pop("LOCAL_RANK")
    try:
        return training.device
    finally:
        os.environ["LOCAL_RANK"] = local_rank


def deepspeed_comm(training) -> None:
    """Hand the process group to DeepSpeed's own communication layer (deepspeed.comm), as accelerate does on GPUs.

    On CPU accelerate creates the gloo group with torch alone (its MULTI_CPU set-up), and deepspeed.comm learns of a
    group only through init_distributed. Until then DeepSpeedConfig counts a world of 1, and ZeRO-3's zero.Init,
    which runs while the model is built, stops on its batch check (train_batch_size != micro x accumulation x 1).
    On an existing group init_distributed only wraps it."""
    if training.deepspeed is None:
        return
    import warnings

    from deepspeed import comm

    # DeepSpeed 0.19 calls these two every step; torch 2.13 warns on each call, nothing a user can change.
    warnings.filterwarnings("ignore", r"`torch\.distributed\.(reduce_scatter_tensor|all_gather_into_tensor)` is "
                                      "deprecated", FutureWarning)
    comm.init_distributed(dist_backend=training.ddp_backend, auto_mpi_discovery=False, verbose=False)


def one_process_group() -> None:
    """--fsdp or --deepspeed in a single process (`python train.py`, one GPU): a world of one, so that accelerate
    shards rather than train the model unwrapped (it sets FSDP up only for a distributed run) and DeepSpeed finds
    its group in the environment."""
    os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1"})
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(sock.getsockname()[1])



def max_steps_problems(training) -> list[str]:
    """--max_steps 0 is accepted by TrainingArguments and trains a step; a negative count other than -1 (the
    default: train by epochs) is a typo too."""
    if training.max_steps == 0 or training.max_steps < -1:
        return [f"--max_steps {training.max_steps}: must be at least 1 (or leave it out to train for "
                "--num_train_epochs)"]
    return []


def compile_problems(training, attention: str) -> list[str]:
    """What inductor compiles on a machine without CUDA (--torch_compile, flex attention's kernel) needs a C++
    compiler, found as torch finds it ($CXX, else g++). Without one the first step would stop in a traceback from
    inside dynamo."""
    wants = {}
    if training.torch_compile and training.torch_compile_backend in (None, "inductor"):
        wants["--torch_compile"] = "drop --torch_compile"
    if attention == "flex_attention":
        wants["--attn_implementation flex_attention"] = "use --attn_implementation sdpa"
    import torch

    if not wants or torch.cuda.is_available() or inductor_finds_a_cpp_compiler():
        return []
    return [f"{flag}: inductor builds its CPU kernels with a C++ compiler and finds none here ($CXX, else g++); "
            f"install one (apt-get install g++) or {instead}" for flag, instead in wants.items()]


def inductor_finds_a_cpp_compiler() -> bool:
    """Whether torch's own search ($CXX, else g++; run as `--version`) finds the compiler inductor builds CPU
    kernels with."""
    from torch._inductor import cpp_builder, exc

    try:
        cpp_builder.get_cpp_compiler()
    except exc.InvalidCxxCompiler:
        return False
    return True
