"""Environment report: is this machine ready to prepare data and train fast, and what to change if not.

    python verify_optimization.py                                   # this machine, default cache dir
    python verify_optimization.py --tokenizer_path tok/ --cache_dir /scratch/rankzero
    python verify_optimization.py --tokenizer_path tok/ --json | jq .ready

One line per check: a status (ok, WARN, FAIL, or -- for information), the value, and advice when
there is something to do. Exit 0 when ready (warnings allowed); 1 when something required is missing
or broken: the tokenizer given with --tokenizer_path (missing, not loadable, or not fast), a required
package, an unwritable cache dir, or a DATASET_* variable train.py would reject. `--json` prints one
JSON object on stdout and nothing else: {"ready": bool, "problems": [...], "checks": {name: {...}}}.
GPU, CUDA, bf16, TF32, flash SDPA and NCCL show as unavailable on a CPU-only machine; that is not an error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import socket
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run from a checkout

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
MARKS = {OK: "ok  ", WARN: "WARN", FAIL: "FAIL", INFO: "--  "}

# Oldest versions this code is written against (pyproject.toml), and what the optional ones are for.
REQUIRED_PACKAGES = {"torch": "2.6", "transformers": "5.0", "datasets": "4.0", "tokenizers": "0.22",
                     "accelerate": "1.7"}
OPTIONAL_PACKAGES = {"kiwipiepy": ("0.22", "needed for --quality_filter ko"),
                     "ftfy": ("6.1", "needed for --quality_filter ko (mojibake repair)"),
                     "fastokens": ("0.3.5", "the HF tokenizer is used instead: ~4x slower preparation"),
                     "ray": ("2.50", "needed for --prep_engine ray: pip install 'rankzero[ray]'")}

SPEED_SAMPLE_BYTES = 1 << 20
SPEED_SENTENCES = [
    "서울은 대한민국의 수도이며 정치, 경제, 문화의 중심지이다.",
    "오늘 아침에는 비가 조금 내렸지만 점심 무렵부터 날씨가 맑아졌다.",
    "한국어는 교착어이기 때문에 하나의 어절 안에 어간과 조사, 어미가 함께 붙는다.",
    "제1조(목적) 이 법은 국민의 건강을 보호하고 삶의 질을 높이는 것을 목적으로 한다.",
    "새로운 서비스를 출시하고 사용자 의견을 모아 기능을 계속 개선하기로 했습니다.",
    "인공지능 모델을 학습하려면 많은 양의 데이터와 계산 자원이 필요하다.",
    "The model reads Korean and English text, and some code: x = f(y) + 1.",
]


@dataclass
class Check:
    name: str
    status: str
    value: str
    advice: str = ""
    data: dict = field(default_factory=dict)


# --- tokenizer -------------------------------------------------------------------------------

def check_tokenizer(path: str | None) -> list[Check]:
    if path is None:
        return [Check("tokenizer", INFO, "not checked", "pass --tokenizer_path DIR to check the tokenizer you will use")]
    directory = Path(path)
    if not directory.is_dir():
        return [Check("tokenizer", FAIL, f"--tokenizer_path {path}: no such directory",
                      "train one with scripts/train_tokenizer.py or point at an HF tokenizer dir")]
    if not (directory / "tokenizer.json").is_file():
        return [Check("tokenizer", FAIL, f"--tokenizer_path {path}: no tokenizer.json (not a fast tokenizer dir)",
                      "rankzero encodes on the Rust backend and fingerprints tokenizer.json: re-save it with "
                      "AutoTokenizer.from_pretrained(src).save_pretrained(DIR)")]
    try:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(directory))
    except Exception as error:  # any load failure is the user's tokenizer dir, reported, not raised
        return [Check("tokenizer", FAIL, f"--tokenizer_path {path}: does not load: {type(error).__name__}: {error}",
                      "check the files in the dir (tokenizer.json, tokenizer_config.json)")]
    if not getattr(tokenizer, "is_fast", False):
        return [Check("tokenizer", FAIL, f"--tokenizer_path {path}: is_fast is False ({type(tokenizer).__name__})",
                      "a slow (Python) tokenizer is ~20x slower; convert it to a fast one")]
    data = {"is_fast": True, "vocab_size": len(tokenizer), "eos_token": tokenizer.eos_token}
    checks = [Check("tokenizer", OK if tokenizer.eos_token else WARN,
                    f"fast, {len(tokenizer):,} tokens, eos {tokenizer.eos_token!r}",
                    "" if tokenizer.eos_token else "no eos token: documents cannot be separated when packing", data)]
    checks.append(tokenizer_speed(path))
    return checks


def tokenizer_speed(path: str, budget_s: float = 1.0) -> Check:
    """MB/s of the engine the prepare would choose for this tokenizer (fastokens when its ids equal the HF
    tokenizer's on the same check, else HF), on varied Korean-heavy text, the way the data pipeline encodes."""
    from rankzero.data.encode import load_tokenizer, select_engine

    rng = random.Random(0)
    texts, size = [], 0
    while size < SPEED_SAMPLE_BYTES:
        # Shuffled sentences and fresh numbers, so the BPE word cache does not flatter the figure.
        text = " ".join(rng.sample(SPEED_SENTENCES, 4)) + f" {rng.randint(0, 10**9)}"
        texts.append(text)
        size += len(text.encode("utf-8"))
    choice = select_engine(load_tokenizer(path), "auto", texts[:64])
    engine = choice.engine
    engine.encode(texts[:64])  # warm-up
    started, encoded_bytes, tokens = time.perf_counter(), 0, 0
    while time.perf_counter() - started < budget_s:
        tokens += len(engine.encode(texts)[0])
        encoded_bytes += size
    elapsed = time.perf_counter() - started
    mb_per_s = encoded_bytes / 1e6 / elapsed
    data = {"mb_per_s": round(mb_per_s, 2), "tokens_per_s": round(tokens / elapsed), "engine": engine.name,
            "fallback_reason": choice.fallback_reason}
    slow = mb_per_s < 1.0
    fix = ("under 1 MB/s: the machine is busy or the tokenizer is unusual" if slow else
           f"fastokens is not used: {choice.fallback_reason}" if choice.fallback_reason else "")
    return Check("tokenizer_speed", WARN if slow or choice.fallback_reason else OK,
                 f"{mb_per_s:.1f} MB/s, {tokens / elapsed / 1e6:.2f} M tok/s ({engine.name} {engine.version})",
                 fix, data)


# --- CPU, memory, disks ----------------------------------------------------------------------

def cgroup_cpu_limit() -> float | None:
    """CPUs allowed by a cgroup quota (v2 cpu.max or v1 cfs quota), None when unlimited or unknown."""
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text())
        period = int(Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


def check_cpu() -> Check:
    from rankzero.runtime import usable_cpu_count

    usable = usable_cpu_count()
    quota = cgroup_cpu_limit()
    data = {"usable_cores": usable, "os_cpu_count": os.cpu_count(), "cgroup_cpu_limit": quota}
    value = f"{usable} usable (affinity) of {os.cpu_count()}"
    if quota is not None and quota < usable:
        return Check("cpu", WARN, value + f"; cgroup quota {quota:g} CPUs",
                     f"the quota is lower than the affinity: export DATASET_NUM_PROC={max(1, int(quota))}", data)
    return Check("cpu", OK, value + (f"; cgroup quota {quota:g}" if quota else ""),
                 "" if usable > 1 else "one core: data preparation will be slow", data)


def check_memory() -> Check:
    import psutil

    memory = psutil.virtual_memory()
    available, total = memory.available, memory.total
    limit = None
    for candidate in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(candidate).read_text().strip()
            if raw != "max" and int(raw) < total:
                limit = int(raw)
            break
        except (OSError, ValueError):
            continue
    data = {"available_bytes": available, "total_bytes": total, "cgroup_limit_bytes": limit}
    value = f"{available / 2**30:.1f} GiB available of {total / 2**30:.1f} GiB"
    if limit is not None:
        value += f" (cgroup limit {limit / 2**30:.1f} GiB)"
        available = min(available, limit)
    if available < 4 * 2**30:
        return Check("memory", WARN, value, "under 4 GiB free: Kiwi (~0.5 GiB) plus workers may not fit; "
                     "lower DATASET_NUM_PROC", data)
    return Check("memory", OK, value, "", data)


def existing_ancestor(path: Path) -> Path:
    path = path.expanduser().absolute()
    while not path.exists():
        path = path.parent
    return path


def mount_for_device(major: int, minor: int, mountinfo: str = "/proc/self/mountinfo") -> tuple[str, str] | None:
    """(filesystem type, source) of the mount whose st_dev is major:minor."""
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 2 and fields[2] == f"{major}:{minor}" and " - " in line:
            after = line.split(" - ", 1)[1].split()
            return after[0], after[1] if len(after) > 1 else ""
    return None


def rotational_of(block: Path, sys_root: Path = Path("/sys"), depth: int = 0) -> str:
    """'ssd', 'rotational' or 'unknown' for a /sys/dev/block/<maj:min> or /sys/class/block/<name> entry.

    A partition is judged by its disk; device-mapper (LVM, LUKS) and md RAID by the devices under them
    (slaves/: rotational if any is); a loop device by the disk holding its backing file.
    """
    if depth > 8:
        return "unknown"
    try:
        device = block.resolve(strict=True)
    except OSError:
        return "unknown"
    if (device / "partition").exists():
        device = device.parent
    slaves = sorted((device / "slaves").iterdir()) if (device / "slaves").is_dir() else []
    if slaves:
        kinds = {rotational_of(sys_root / "class" / "block" / s.name, sys_root, depth + 1) for s in slaves}
        return "rotational" if "rotational" in kinds else "ssd" if kinds == {"ssd"} else "unknown"
    backing = device / "loop" / "backing_file"
    if backing.is_file():
        try:
            backing_dev = os.stat(backing.read_text().strip()).st_dev
        except OSError:
            return "unknown"
        return rotational_of(sys_root / "dev" / "block" / f"{os.major(backing_dev)}:{os.minor(backing_dev)}",
                             sys_root, depth + 1)
    try:
        flag = (device / "queue" / "rotational").read_text().strip()
    except OSError:
        return "unknown"
    return {"0": "ssd", "1": "rotational"}.get(flag, "unknown")


def disk_kind(path: Path) -> dict:
    """What backs `path`: {'kind': ssd|rotational|memory|network|unknown, 'device', 'fstype', 'note'}."""
    st_dev = os.stat(path).st_dev
    major, minor = os.major(st_dev), os.minor(st_dev)
    mount = mount_for_device(major, minor)
    fstype, source = mount or ("", "")
    info = {"device": f"{major}:{minor}", "fstype": fstype, "source": source, "note": ""}
    if fstype in ("tmpfs", "ramfs"):
        return {**info, "kind": "memory"}
    if fstype.split(".")[0] in ("nfs", "nfs4", "cifs", "smb3", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
                                "9p", "virtiofs", "fuse"):
        return {**info, "kind": "network"}
    block = Path("/sys/dev/block") / f"{major}:{minor}"
    if not block.exists() and source.startswith("/dev/"):
        try:  # btrfs and others give files an anonymous st_dev: use the mount's source device
            rdev = os.stat(source).st_rdev
            block = Path("/sys/dev/block") / f"{os.major(rdev)}:{os.minor(rdev)}"
        except OSError:
            pass
    if not block.exists():
        return {**info, "kind": "unknown", "note": f"no block device behind it ({fstype or 'unknown fs'})"}
    kind = rotational_of(block)
    resolved = str(block.resolve())
    info["device"] = resolved.rsplit("/", 1)[-1]
    if "zram" in info["device"]:
        return {**info, "kind": "memory"}
    if "/virtio" in resolved or "/xen" in resolved:
        info["note"] = "virtual disk, flag set by the hypervisor"
    return {**info, "kind": kind}


def check_cache_dir(cache_dir: str) -> list[Check]:
    path = Path(cache_dir)
    anchor = existing_ancestor(path)
    writable = os.access(anchor, os.W_OK | os.X_OK)
    usage = shutil.disk_usage(anchor)
    disk = disk_kind(anchor)
    data = {"path": str(path), "exists": path.exists(), "writable": writable, "free_bytes": usage.free,
            "total_bytes": usage.total, **disk}
    checks = []
    if not writable:
        checks.append(Check("cache_dir", FAIL, f"{path}: not writable ({anchor} is the nearest existing dir)",
                            "pass --cache_dir on a writable disk (or set RANKZERO_CACHE)", data))
    else:
        checks.append(Check("cache_dir", OK, f"{path}{'' if path.exists() else ' (will be created)'}", "", data))
    kind = disk["kind"]
    where = f"{disk['device']}, {disk['fstype'] or '?'}" + (f"; {disk['note']}" if disk["note"] else "")
    advice = {
        "rotational": "training reads memory-mapped data in random order; put --cache_dir on SSD/NVMe",
        "network": "fine when all nodes share it (one build per job); reads are slower than local SSD",
        "memory": "RAM-backed: fast, but gone at reboot and it counts against memory",
        "unknown": "could not tell the medium; make sure it is SSD/NVMe",
    }.get(kind, "")
    if kind == "rotational" and disk["note"]:
        advice = "harmless if the host disk is SSD; otherwise " + advice[advice.index("put"):]
    checks.append(Check("cache_disk", WARN if kind in ("rotational", "unknown") else OK, f"{kind} ({where})",
                        advice, disk))
    free_gib = usage.free / 2**30
    checks.append(Check("cache_free", WARN if free_gib < 20 else OK,
                        f"{free_gib:.1f} GiB free of {usage.total / 2**30:.1f} GiB",
                        "under 20 GiB: prepared data needs ~2-4 bytes per token plus a tmp copy while building"
                        if free_gib < 20 else "", {"free_bytes": usage.free}))
    return checks


def check_shm() -> Check:
    try:
        usage = shutil.disk_usage("/dev/shm")
    except OSError:
        return Check("dev_shm", WARN, "missing", "DataLoader workers pass batches through /dev/shm; "
                     "use --dataloader_num_workers 0 or mount one")
    size_gib = usage.total / 2**30
    data = {"total_bytes": usage.total, "free_bytes": usage.free}
    if usage.total < 1 * 2**30:
        return Check("dev_shm", WARN, f"{size_gib * 1024:.0f} MiB",
                     "too small for DataLoader workers ('bus error'): run the container with --shm-size=8g "
                     "or --ipc=host, or use --dataloader_num_workers 0", data)
    return Check("dev_shm", OK, f"{size_gib:.1f} GiB ({usage.free / 2**30:.1f} GiB free)", "", data)


# --- environment variables -------------------------------------------------------------------

def check_env_settings() -> list[Check]:
    from rankzero.runtime import usable_cpu_count

    usable = usable_cpu_count()
    checks = []
    defaults = {"DATASET_NUM_PROC": (usable, "all usable cores"), "DATASET_BATCH_SIZE": (1000, "1000"),
                "DATASET_WRITER_BATCH_SIZE": (1000, "1000")}
    for name, (_, default_text) in defaults.items():
        raw = os.environ.get(name)
        if raw in (None, ""):
            checks.append(Check(name, OK, f"unset (default {default_text})", "", {"value": None}))
            continue
        try:
            value = int(raw)
            if value <= 0:
                raise ValueError
        except ValueError:
            checks.append(Check(name, FAIL, f"{raw!r} is not a positive whole number",
                                f"train.py will refuse it: unset {name} or give a number", {"value": raw}))
            continue
        if name == "DATASET_NUM_PROC" and value > usable:
            checks.append(Check(name, WARN, f"{value}", f"more than the {usable} usable cores: workers will "
                                f"fight for CPU (and each holds its own memory); use {usable}", {"value": value}))
        else:
            checks.append(Check(name, OK, f"{value}", "", {"value": value}))

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        raw = os.environ.get(name)
        if raw in (None, ""):
            what = {"OMP_NUM_THREADS": "torch CPU ops use all cores (torchrun sets 1 per rank)",
                    "MKL_NUM_THREADS": "MKL follows OMP_NUM_THREADS",
                    "RAYON_NUM_THREADS": "the Rust tokenizer pool uses all cores"}[name]
            checks.append(Check(name, INFO, f"unset: {what}", "", {"value": None}))
            continue
        try:
            value = int(raw)
        except ValueError:
            checks.append(Check(name, WARN, f"{raw!r} is not a number", f"unset {name}", {"value": raw}))
            continue
        status, advice = OK, ""
        if value > usable:
            status, advice = WARN, f"more threads than the {usable} usable cores oversubscribe the CPU"
        checks.append(Check(name, status, str(value), advice, {"value": value}))

    raw = os.environ.get("TOKENIZERS_PARALLELISM")
    data = {"value": raw}
    if raw is not None and raw.lower() in ("true", "1", "on", "yes"):
        checks.append(Check("TOKENIZERS_PARALLELISM", WARN, f"{raw} (dangerous)",
                            "with forking workers (datasets.map, DataLoader, preparation pool) a Rust thread "
                            "pool started before the fork can deadlock the children: unset it or set false",
                            {**data, "dangerous": True}))
    else:
        checks.append(Check("TOKENIZERS_PARALLELISM", OK,
                            raw if raw else "unset: threads until a fork, then off in the children",
                            "", {**data, "dangerous": False}))
    return checks


def check_malloc() -> Check:
    """The malloc train.py will run under (rankzero/malloc.py): tcmalloc tokenizes in ~27% less time than glibc's."""
    from rankzero import malloc

    choice = os.environ.get(malloc.ENV, "auto")
    data = {"setting": choice}
    try:
        library = malloc.resolve(choice)
    except malloc.MallocError as error:
        return Check("malloc", FAIL, str(error), f"train.py will refuse it: unset {malloc.ENV}", data)
    already = malloc.preloaded()
    if already:
        return Check("malloc", OK, f"{already} (already in LD_PRELOAD)", "", {**data, "library": None})
    if library is not None:
        return Check("malloc", OK, f"{library} (train.py preloads it)", "", {**data, "library": str(library)})
    if choice.strip() == "system":
        return Check("malloc", INFO, f"glibc ({malloc.ENV}=system)", "", {**data, "library": None})
    if sys.platform != "linux":
        return Check("malloc", INFO, "system malloc (preloading is Linux only)", "", {**data, "library": None})
    return Check("malloc", WARN, "glibc: no tcmalloc, mimalloc or jemalloc found",
                 f"preparing data takes ~1.4x the time under glibc malloc: {malloc.INSTALL_HINT}", {**data, "library": None})


# --- packages, Kiwi, GPU ---------------------------------------------------------------------

def check_packages() -> list[Check]:
    from importlib import metadata

    from packaging.version import Version

    checks = []
    wanted = {**{name: (minimum, "") for name, minimum in REQUIRED_PACKAGES.items()}, **OPTIONAL_PACKAGES}
    for name, (minimum, why) in wanted.items():
        required = name in REQUIRED_PACKAGES
        try:
            version = metadata.version(name)
        except metadata.PackageNotFoundError:
            checks.append(Check(name, FAIL if required else WARN, "not installed",
                                f"pip install '{name}>={minimum}'" + (f" ({why})" if why else ""),
                                {"version": None, "required": required}))
            continue
        too_old = Version(version) < Version(minimum)
        checks.append(Check(name, (FAIL if required else WARN) if too_old else OK, version,
                            f"needs >= {minimum}: pip install -U '{name}>={minimum}'" if too_old else "",
                            {"version": version, "required": required}))
    return checks


def check_kiwi() -> Check:
    """Build Kiwi as the quality filter does (no thread pool: forked workers hang otherwise) and run it once."""
    try:
        import warnings

        from kiwipiepy import Kiwi

        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kiwi = Kiwi(num_workers=0)
        sentences = kiwi.split_into_sents("한국어 문장을 나눕니다. 형태소도 봅니다.", return_tokens=True)
        elapsed = time.perf_counter() - started
    except Exception as error:
        return Check("kiwi", WARN, f"does not load: {type(error).__name__}: {error}",
                     "--quality_filter ko needs Kiwi: pip install kiwipiepy (its model ships in kiwipiepy_model)")
    ok = len(sentences) == 2
    return Check("kiwi", OK if ok else WARN, f"loads and analyses ({elapsed:.1f} s to first result)",
                 "" if ok else f"unexpected analysis: {len(sentences)} sentences instead of 2",
                 {"loads": True, "load_s": round(elapsed, 2)})


def check_accelerator() -> list[Check]:
    try:
        import torch
    except Exception as error:
        return [Check("gpu", FAIL, f"torch does not import: {error}", "install torch")]
    import torch.distributed as dist

    gloo = dist.is_available() and dist.is_gloo_available()
    if not torch.cuda.is_available():
        cpu = "unavailable (CPU only)"
        return [
            Check("gpu", INFO, "none (CPU only)", "training runs on CPU: fine for tests and the demo", {"count": 0}),
            Check("cuda", INFO, cpu, "", {"available": False, "torch_cuda": torch.version.cuda}),
            Check("bf16", INFO, cpu, "", {"available": False}),
            Check("tf32", INFO, cpu, "", {"available": False}),
            Check("flash_sdpa", INFO, cpu, "", {"available": False}),
            Check("nccl", INFO, f"{cpu}; gloo {'available' if gloo else 'unavailable'}",
                  "" if gloo else "no gloo either: multi-process runs on this machine will not start",
                  {"available": False, "gloo": gloo}),
        ]
    count = torch.cuda.device_count()
    names = [torch.cuda.get_device_name(i) for i in range(count)]
    capability = torch.cuda.get_device_capability(0)
    memory = torch.cuda.get_device_properties(0).total_memory
    ampere = capability >= (8, 0)
    checks = [
        Check("gpu", OK, f"{count} x {names[0]} ({memory / 2**30:.0f} GiB, sm_{capability[0]}{capability[1]})",
              "" if len(set(names)) == 1 else f"mixed GPUs: {', '.join(names)}",
              {"count": count, "names": names, "capability": list(capability), "memory_bytes": memory}),
        Check("cuda", OK, f"torch built with CUDA {torch.version.cuda}", "",
              {"available": True, "torch_cuda": torch.version.cuda}),
    ]
    bf16 = torch.cuda.is_bf16_supported()
    checks.append(Check("bf16", OK if bf16 else WARN, "supported" if bf16 else "not supported",
                        "" if bf16 else "pre-Ampere GPU: use --fp16 instead of --bf16", {"available": bf16}))
    checks.append(Check("tf32", OK if ampere else INFO, "available" if ampere else "unavailable (pre-Ampere)",
                        "train.py turns it on for fp32 matmuls" if ampere else "", {"available": ampere}))
    built_with_flash = getattr(torch.backends.cuda, "is_flash_attention_available", lambda: True)()
    flash = ampere and built_with_flash and torch.backends.cuda.flash_sdp_enabled()
    checks.append(Check("flash_sdpa", OK if flash else WARN, "available" if flash else "unavailable",
                        "" if flash else "SDPA falls back to the memory-efficient/math kernel: slower attention",
                        {"available": flash}))
    nccl = dist.is_available() and dist.is_nccl_available()
    version = None
    if nccl:
        raw = torch.cuda.nccl.version()  # a tuple in torch 2.x, an int (2708 = 2.7.8) before
        version = ".".join(map(str, raw)) if isinstance(raw, tuple) else str(raw)
    checks.append(Check("nccl", OK if nccl else (WARN if count > 1 else INFO),
                        f"NCCL {version}" if nccl else "unavailable",
                        "" if nccl else "multi-GPU runs fall back to gloo: much slower", {"available": nccl,
                                                                                            "version": version}))
    return checks


# --- the report ------------------------------------------------------------------------------

def run_checks(tokenizer_path: str | None, cache_dir: str) -> list[Check]:
    checks: list[Check] = []
    checks += check_tokenizer(tokenizer_path)
    checks.append(check_cpu())
    checks.append(check_memory())
    checks += check_cache_dir(cache_dir)
    checks.append(check_shm())
    checks += check_env_settings()
    checks.append(check_malloc())
    checks += check_packages()
    checks.append(check_kiwi())
    checks += check_accelerator()
    return checks


def print_report(checks: list[Check], ready: bool) -> None:
    width = max(len(c.name) for c in checks)
    print(f"rankzero environment on {socket.gethostname()} (Python {platform.python_version()})")
    for check in checks:
        line = f"  {MARKS[check.status]}  {check.name:<{width}}  {check.value}"
        if check.advice:
            line += f"  -> {check.advice}"
        print(line)
    failed = [c for c in checks if c.status == FAIL]
    warned = sum(c.status == WARN for c in checks)
    if ready:
        print(f"ready ({warned} warning{'s' if warned != 1 else ''})")
    else:
        print(f"NOT READY: {'; '.join(f'{c.name}: {c.value}' for c in failed)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer_path", default=None, help="HF fast tokenizer dir to check (required to be fast).")
    parser.add_argument("--cache_dir", default=None,
                        help="Where prepared data will live (default: $RANKZERO_CACHE or ~/.cache/rankzero).")
    parser.add_argument("--json", action="store_true", help="Print one JSON object on stdout instead of the report.")
    args = parser.parse_args(argv)
    from rankzero.config import DEFAULT_CACHE_DIR
    from rankzero.logging_utils import stdout_to_stderr

    cache_dir = args.cache_dir or os.environ.get("RANKZERO_CACHE") or DEFAULT_CACHE_DIR

    with stdout_to_stderr() if args.json else contextlib.nullcontext():
        checks = run_checks(args.tokenizer_path, cache_dir)
    problems = [f"{c.name}: {c.value}" for c in checks if c.status == FAIL]
    ready = not problems
    if args.json:
        report = {"ready": ready, "problems": problems, "host": socket.gethostname(),
                  "checks": {c.name: {k: v for k, v in asdict(c).items() if k != "name"} for c in checks}}
        print(json.dumps(report, ensure_ascii=False))
    else:
        print_report(checks, ready)
    if problems:
        print("error: not ready: " + "; ".join(problems), file=sys.stderr)
    return 0 if ready else 1


if __name__ == "__main__":
    sys.exit(main())
