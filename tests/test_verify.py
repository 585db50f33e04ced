"""verify_optimization.py: the JSON report parses, failures exit non-zero naming the problem, disk detection."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CLEARED = ("DATASET_NUM_PROC", "DATASET_BATCH_SIZE", "DATASET_WRITER_BATCH_SIZE", "TOKENIZERS_PARALLELISM",
           "OMP_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS", "RANKZERO_CACHE", "RANKZERO_MALLOC", "LD_PRELOAD")


@pytest.fixture(scope="module")
def verify():
    spec = importlib.util.spec_from_file_location("verify_optimization", REPO / "verify_optimization.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def run_verify(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k not in CLEARED}
    environment.update(env)
    return subprocess.run([sys.executable, str(REPO / "verify_optimization.py"), *args], capture_output=True,
                          text=True, env=environment, timeout=300, cwd=REPO)


def test_json_report_when_ready(tokenizer_dir, tmp_path):
    result = run_verify("--tokenizer_path", str(tokenizer_dir), "--cache_dir", str(tmp_path / "cache"), "--json",
                        TOKENIZERS_PARALLELISM="true", DATASET_NUM_PROC="1")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.strip().splitlines()) == 1  # exactly one JSON object, nothing else
    report = json.loads(result.stdout)
    assert report["ready"] is True and report["problems"] == []
    checks = report["checks"]
    assert checks["tokenizer"]["status"] == "ok" and checks["tokenizer"]["data"]["is_fast"] is True
    assert checks["tokenizer_speed"]["data"]["mb_per_s"] > 0
    assert checks["cpu"]["data"]["usable_cores"] == len(os.sched_getaffinity(0))
    assert checks["memory"]["data"]["available_bytes"] > 0
    assert checks["cache_disk"]["data"]["kind"] in {"ssd", "rotational", "memory", "network", "unknown"}
    assert checks["cache_free"]["data"]["free_bytes"] > 0
    assert checks["DATASET_NUM_PROC"]["data"]["value"] == 1
    parallelism = checks["TOKENIZERS_PARALLELISM"]
    assert parallelism["status"] == "warn" and parallelism["data"]["dangerous"] is True
    assert "fork" in parallelism["advice"]
    for package in ("torch", "transformers", "datasets", "accelerate", "kiwipiepy"):
        assert checks[package]["data"]["version"]
    assert checks["kiwi"]["data"]["loads"] is True
    import torch

    if not torch.cuda.is_available():  # on CPU everything GPU-side is information, not a failure
        for name in ("gpu", "cuda", "bf16", "tf32", "flash_sdpa", "nccl"):
            assert checks[name]["status"] == "info", name
        assert checks["gpu"]["data"]["count"] == 0


def test_human_report_one_line_per_check(tokenizer_dir, tmp_path):
    result = run_verify("--tokenizer_path", str(tokenizer_dir), "--cache_dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("ready")
    body = lines[1:-1]
    names = [line.split()[1] for line in body]
    assert {"tokenizer", "tokenizer_speed", "cpu", "memory", "cache_disk", "dev_shm", "kiwi", "gpu"} <= set(names)
    assert len(names) == len(set(names))
    assert all(line.split()[0] in {"ok", "WARN", "FAIL", "--"} for line in body)


def test_failures_exit_non_zero_naming_each_problem(tmp_path):
    missing = tmp_path / "no-such-tokenizer"
    result = run_verify("--tokenizer_path", str(missing), "--cache_dir", str(tmp_path), "--json",
                        DATASET_NUM_PROC="many")
    assert result.returncode == 1
    report = json.loads(result.stdout)
    assert report["ready"] is False
    assert report["checks"]["tokenizer"]["status"] == "fail"
    assert str(missing) in result.stderr and "DATASET_NUM_PROC" in result.stderr  # all problems, together
    assert len(report["problems"]) == 2


def test_malloc_check_says_what_train_py_will_preload(verify, monkeypatch, tmp_path):
    from rankzero import malloc

    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setattr(malloc, "search_dirs", lambda: [tmp_path])
    monkeypatch.setenv("RANKZERO_MALLOC", "auto")
    check = verify.check_malloc()
    assert check.status == verify.WARN and "apt install libtcmalloc-minimal4" in check.advice
    (tmp_path / "libtcmalloc_minimal.so.4").write_bytes(b"")
    check = verify.check_malloc()
    assert check.status == verify.OK and str(tmp_path / "libtcmalloc_minimal.so.4") in check.value
    monkeypatch.setenv("RANKZERO_MALLOC", "system")
    assert verify.check_malloc().status == verify.INFO
    monkeypatch.setenv("RANKZERO_MALLOC", str(tmp_path / "libnone.so"))
    check = verify.check_malloc()
    assert check.status == verify.FAIL and "no such file" in check.value


def test_tokenizer_dir_without_tokenizer_json_fails(verify, tmp_path):
    (tmp_path / "tokenizer_config.json").write_text("{}")
    [check] = verify.check_tokenizer(str(tmp_path))
    assert check.status == verify.FAIL and "no tokenizer.json" in check.value


def test_slow_tokenizer_fails(verify, tokenizer_dir, monkeypatch):
    import transformers

    class Slow:
        is_fast = False

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Slow())
    [check] = verify.check_tokenizer(str(tokenizer_dir))
    assert check.status == verify.FAIL and "is_fast is False" in check.value


def make_block(sys_root: Path, name: str, rotational: str | None, parent: Path | None = None,
               slaves: tuple[str, ...] = ()) -> Path:
    """A fake /sys/devices/.../<name> entry linked from /sys/class/block/<name>."""
    device = (parent or sys_root / "devices" / "virtual" / "block") / name
    device.mkdir(parents=True)
    if parent is not None:
        (device / "partition").write_text("1\n")
    if rotational is not None:
        (device / "queue").mkdir()
        (device / "queue" / "rotational").write_text(rotational + "\n")
    if slaves:
        (device / "slaves").mkdir()
        for slave in slaves:
            (device / "slaves" / slave).symlink_to(sys_root / "class" / "block" / slave)
    link = sys_root / "class" / "block" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(device)
    return link


def test_rotational_resolves_partitions_and_device_mapper(verify, tmp_path):
    sys_root = tmp_path / "sys"
    hdd = make_block(sys_root, "sda", "1")
    make_block(sys_root, "sda1", None, parent=hdd.resolve())
    nvme = make_block(sys_root, "nvme0n1", "0")
    make_block(sys_root, "nvme0n1p2", None, parent=nvme.resolve())
    make_block(sys_root, "dm-0", "0", slaves=("nvme0n1p2",))          # LVM on an NVMe partition
    make_block(sys_root, "dm-1", "0", slaves=("nvme0n1p2", "sda1"))   # spans both: the slow one counts
    make_block(sys_root, "vdb", None)                                 # no queue/rotational
    block = sys_root / "class" / "block"
    assert verify.rotational_of(block / "sda1", sys_root) == "rotational"
    assert verify.rotational_of(block / "nvme0n1p2", sys_root) == "ssd"
    assert verify.rotational_of(block / "dm-0", sys_root) == "ssd"  # dm's own flag (0) is not trusted
    assert verify.rotational_of(block / "dm-1", sys_root) == "rotational"
    assert verify.rotational_of(block / "vdb", sys_root) == "unknown"
    assert verify.rotational_of(block / "missing", sys_root) == "unknown"


def test_disk_kind_of_real_paths(verify, tmp_path):
    assert verify.disk_kind(tmp_path)["kind"] in {"ssd", "rotational", "memory", "network", "unknown"}
    if Path("/dev/shm").is_dir():
        assert verify.disk_kind(Path("/dev/shm"))["kind"] == "memory"


def test_gpu_checks_with_a_faked_cuda_device(verify, monkeypatch):
    """The GPU branch runs without a GPU: CUDA's answers are faked (an H100-like device)."""
    import types

    import torch
    import torch.distributed as dist

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index=0: types.SimpleNamespace(total_memory=80 * 2**30))
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    monkeypatch.setattr(torch.backends.cuda, "flash_sdp_enabled", lambda: True)
    monkeypatch.setattr(torch.backends.cuda, "is_flash_attention_available", lambda: True, raising=False)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "nccl", types.SimpleNamespace(version=lambda: (2, 21, 5)), raising=False)
    checks = {check.name: check for check in verify.check_accelerator()}
    assert checks["gpu"].status == verify.OK and checks["gpu"].data["count"] == 2
    assert "H100" in checks["gpu"].value and "sm_90" in checks["gpu"].value
    assert all(checks[name].status == verify.OK for name in ("cuda", "bf16", "tf32", "flash_sdpa", "nccl"))
    assert checks["nccl"].value == "NCCL 2.21.5"
