"""What a prepare prints: each progress line once, and what weighted mixing does to every source's data."""

from __future__ import annotations

import json

from helpers import korean_documents, prepare_cli, prepared_dir, write_jsonl


def test_a_small_corpus_prints_its_encode_line_once(tmp_path, tokenizer_dir, corpus):
    result = prepare_cli("--dataset", corpus, "--tokenizer_path", tokenizer_dir, "--cache_dir", tmp_path / "cache")
    lines = result.stderr.splitlines()
    encode = [line for line in lines if line.startswith("[prepare] encode:")]
    assert len(encode) == 1, result.stderr
    assert len(lines) == len(set(lines)), result.stderr


def test_mixing_that_subsamples_or_repeats_says_so_per_source(tmp_path, tokenizer_dir):
    news = write_jsonl(tmp_path / "news.jsonl", [{"text": t} for t in korean_documents(260, seed=1)])
    dialogue = write_jsonl(tmp_path / "dialogue.jsonl", [{"text": t} for t in korean_documents(100, seed=2)])
    result = prepare_cli("--dataset", f"{news}@0.5", f"{dialogue}@0.5", "--tokenizer_path", tokenizer_dir,
                         "--cache_dir", tmp_path / "cache")
    sources = json.loads((prepared_dir(result.stdout) / "manifest.json").read_text())["sources"]
    mixing = [line.strip() for line in result.stderr.splitlines() if line.strip().startswith("mixing ")]
    assert len(mixing) == 2, result.stderr
    news_line, dialogue_line = mixing
    left_out = sources[0]["docs_kept"] - sources[0]["documents_out"]
    assert 0 < left_out and sources[1]["ratio"] > 1
    assert (f"{news}@0.5: {sources[0]['documents_out']} of its 260 documents used, {left_out} left out "
            f"(ratio {sources[0]['ratio']:.2f})") in news_line
    assert (f"{dialogue}@0.5: its 100 documents repeated {sources[1]['ratio']:.2f}x "
            f"({sources[1]['documents_out']} in the output)") in dialogue_line
    # without weights nothing is mixed, and nothing is said
    plain = prepare_cli("--dataset", news, dialogue, "--tokenizer_path", tokenizer_dir, "--cache_dir", tmp_path / "c2")
    assert "  mixing " not in plain.stderr


# The hub's offline switches, as offline clusters set them; "0" turns each off whatever the caller's environment says.
OFFLINE = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


def test_a_hub_name_without_network_fails_at_once_in_one_line(tmp_path, tokenizer_dir):
    from helpers import free_port

    # A hub that refuses connections stands for no network (the same on a machine that has one).
    endpoint = f"http://127.0.0.1:{free_port()}"
    online = {"HF_ENDPOINT": endpoint, **dict.fromkeys(OFFLINE, "0")}
    result = prepare_cli("--dataset", "someorg/news_ko", "--tokenizer_path", tokenizer_dir,
                         "--cache_dir", tmp_path / "cache", env=online, check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: --dataset someorg/news_ko: names a hub dataset, and {endpoint} cannot be reached from here "
        f"(ConnectError: [Errno 111] Connection refused); give a local file or directory (no someorg/news_ko here), a "
        "dataset saved with save_to_disk, or set HF_HUB_OFFLINE=1 to read a copy cached earlier"], result.stderr


def test_a_hub_name_offline_with_no_cached_copy_fails_at_once_in_one_line(tmp_path, tokenizer_dir, corpus):
    cache = tmp_path / "hf"
    result = prepare_cli("--eval_dataset", "someorg/news_ko", "--dataset", corpus, "--tokenizer_path", tokenizer_dir,
                         "--cache_dir", tmp_path / "cache", env={"HF_HOME": str(cache), **dict.fromkeys(OFFLINE, "1")},
                         check=False)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: --eval_dataset someorg/news_ko: names a hub dataset, and the hub is off (HF_HUB_OFFLINE or "
        f"HF_DATASETS_OFFLINE is set) with no copy of 'someorg/news_ko' cached in {cache / 'datasets'}; give a local "
        "file or directory (no someorg/news_ko here), a dataset saved with save_to_disk, or fetch it once where the "
        "hub can be reached (HF_HOME names the cache)"], result.stderr


def test_a_hub_client_warning_is_printed_once():
    import subprocess
    import sys

    from helpers import REPO, quiet_env

    code = ("from rankzero.logging_utils import setup_logging\nfrom rankzero.runtime import Runtime\n"
            "setup_logging(Runtime.from_env())\nfrom huggingface_hub.utils import logging\n"
            "logging.get_logger('huggingface_hub.utils._http').warning('Retrying in 1s [Retry 1/5].')")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=quiet_env(), cwd=REPO)
    assert result.stderr.count("Retrying in 1s") == 1, result.stderr
