"""Records → text: parse a chunk's raw lines or records and render each record as text segments.

A document is a list of `(text, trainable)` segments. Pretraining joins them; SFT masks the
segments that are not trainable (prompts, role headers). Recognised record shapes, first match wins:

    --text_column C / text / content / document      plain text
    instruction [+ input] + output                   user turn (instruction, then input) → assistant
    prompt + response | question + answer            user → assistant
    prompt + completion                              plain continuation (no chat template)
    messages: [{role, content}]                      chat
    conversations: [{from, value}]                   ShareGPT chat (human/gpt/system)

Chats are rendered with the tokenizer's chat template when it has one; otherwise with the plain
format below, which keeps every role:

    ### User:\\n{content}\\n\\n### Assistant:\\n{content}\\n\\n

`PLAIN_CHAT_TEMPLATE` is that format as a Jinja chat template: an SFT run saves it as its tokenizer's
`chat_template`, so the model is prompted as it was trained (`scripts/generate.py --chat`).

`--text_column a.b` picks field `b` of a struct (or JSON object) column `a`; a text column that holds a
struct is an error listing its fields. Every field read as text (the text column, instruction/input/output,
prompt/response/completion, question/answer, system, a message's content) follows one rule: a number, a
boolean (JSON `true`, `12345`, `NaN`), an object or a list with anything but strings (or chat content parts
of type text) in it is an error naming file, line and field (a list of strings is one text, its parts
joined by newlines; null is empty: a record with no text left is dropped and counted). Binary columns are decoded as UTF-8, and text no tokenizer can
take (a lone UTF-16 surrogate from a JSON escape such as `\\ud800`) follows the same rules as
undecodable bytes: an error naming file and line, or `--on_decode_error replace` (U+FFFD, counted), or
`--skip_bad_records`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rankzero.errors import RankzeroError

if TYPE_CHECKING:
    import numpy as np

TEXT_COLUMNS = ("text", "content", "document")
SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                  "system": "system", "bot": "assistant", "model": "assistant"}
KNOWN_SHAPES = ("text/content/document (or --text_column)", "instruction/input/output", "prompt/response",
                "prompt/completion", "question/answer", "messages (role/content)", "conversations (from/value)")

Segments = list[tuple[str, bool]]

# ChatRenderer's plain format, for apply_chat_template (Jinja's `capitalize` is str.capitalize, as below).
PLAIN_CHAT_TEMPLATE = (
    "{% for message in messages %}### {{ message['role'] | capitalize }}:\n{{ message['content'] }}\n\n{% endfor %}"
    "{% if add_generation_prompt %}### Assistant:\n{% endif %}"
)
SURROGATES = re.compile("[\ud800-\udfff]")


class TextError(ValueError):
    """A record whose text cannot be used as it is (the message says why and what to do)."""


def as_text(value: Any, name: str) -> str:
    """The text of field `name` (named in the error): a string, or null (empty); a list of strings or of chat
    content parts (`{"type": "text", "text": ...}`) is joined by newlines. JSON `true`, `12345`, `NaN` or an
    object is not text: never train "True" or a JSON dump."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, dict):
        raise TextError(f"{name} is an object with fields {sorted(value)[:8]}, not text")
    if isinstance(value, (bool, int, float)):
        raise TextError(f"{name} holds {json.dumps(value)} ({type(value).__name__}), not text")
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str):
                part = part["text"]  # a chat content part
            if not isinstance(part, str):
                raise TextError(f"{name} holds a list with {json.dumps(part, ensure_ascii=False)[:40]} "
                                f"({type(part).__name__}) in it: only a list of strings (parts of one text) is text")
            parts.append(part)
        return "\n".join(part for part in parts if part)
    raise TextError(f"{name} holds a {type(value).__name__}, not text")


def detect_schema(columns: list[str], text_column: str | None) -> str:
    keys = set(columns)
    if text_column:
        return f"text:{text_column}" if text_column in keys or text_column.split(".")[0] in keys else ""
    for name in TEXT_COLUMNS:
        if name in keys:
            return f"text:{name}"
    if {"instruction", "output"} <= keys:
        return "instruction"
    if {"prompt", "response"} <= keys:
        return "prompt_response"
    if {"prompt", "completion"} <= keys:
        return "prompt_completion"
    if {"question", "answer"} <= keys:
        return "question_answer"
    if "messages" in keys:
        return "messages"
    if "conversations" in keys:
        return "conversations"
    return ""


def chat_rendering(chat_template: str | None) -> str:
    """How chats are rendered with this chat template (None: the tokenizer has none), in words."""
    if chat_template:
        return "the tokenizer's chat template"
    return "plain '### User:/### Assistant:' (the tokenizer has no chat template)"


class ChatRenderer:
    """Renders a chat as segments with the tokenizer's chat template, or the plain role format."""

    def __init__(self, chat_template: str | None, special_tokens: dict[str, str] | None = None):
        self.chat_template = chat_template
        self.special_tokens = {k: v for k, v in (special_tokens or {}).items() if isinstance(v, str)}

    def _render(self, messages: list[dict], add_generation_prompt: bool) -> str:
        # transformers' own Jinja environment (with its raise_exception/strftime helpers) renders exactly
        # as apply_chat_template does. Imported on the first chat record only: it costs ~1 s.
        from jinja2 import TemplateError
        from transformers.utils.chat_template_utils import render_jinja_template

        try:
            rendered, _ = render_jinja_template(conversations=[messages], chat_template=self.chat_template,
                                                add_generation_prompt=add_generation_prompt, **self.special_tokens)
        except TemplateError as error:  # raise_exception(...) in the template: "roles must alternate", say
            raise TextError(f"the tokenizer's chat template refused this conversation: {error}") from None
        return rendered[0]

    def render(self, messages: list[dict], with_masks: bool) -> Segments:
        if not self.chat_template:
            segments: Segments = []
            for message in messages:
                segments.append((f"### {message['role'].capitalize()}:\n", False))
                segments.append((message["content"] + "\n\n", _answers(message)))
            return segments
        full = self._render(messages, add_generation_prompt=False)
        if not with_masks:
            return [(full, True)]
        # Cut the rendering at each assistant turn: the text up to the generation prompt is context,
        # the turn itself is trained on. Templates that are not prefix-stable cannot be cut this way.
        segments, position = [], 0
        for index, message in enumerate(messages):
            if not _answers(message):
                continue
            prompt = self._render(messages[:index], add_generation_prompt=True)
            upto = self._render(messages[: index + 1], add_generation_prompt=False)
            if not (full.startswith(upto) and upto.startswith(prompt) and len(prompt) >= position):
                raise RankzeroError("the tokenizer's chat template is not prefix-stable; --mode sft cannot mask prompts with it")
            segments += [(full[position:len(prompt)], False), (full[len(prompt):len(upto)], True)]
            position = len(upto)
        if position < len(full):
            segments.append((full[position:], False))
        return [s for s in segments if s[0]]


def _answers(message: dict) -> bool:
    """Whether a turn is trained on: an assistant's, with something in it (an empty answer would teach the
    template's closing tokens, or "\\n\\n", as the reply)."""
    return message["role"] == "assistant" and not message["content"].isspace() and message["content"] != ""


def _chat_from_record(record: dict, schema: str) -> list[dict]:
    if schema in ("messages", "conversations"):
        role_key, content_key = ("role", "content") if schema == "messages" else ("from", "value")
        raw = record[schema]
        if not isinstance(raw, list):
            raise ValueError(f"'{schema}' is not a list")
        messages = []
        for index, message in enumerate(raw):
            if not isinstance(message, dict):
                raise TextError(f"{schema}[{index}] is {json.dumps(message, ensure_ascii=False)[:40]}, not a message "
                                f"object ({role_key}/{content_key})")
            role = message[role_key]
            if not isinstance(role, str):
                raise TextError(f"{schema}[{index}].{role_key} holds {json.dumps(role)[:40]}, not a role name")
            if schema == "conversations":
                role = SHAREGPT_ROLES.get(role.lower(), role)
            messages.append({"role": role, "content": as_text(message.get(content_key), f"{schema}[{index}].{content_key}")})
        return messages
    question_key, answer_key = {"instruction": ("instruction", "output"), "prompt_response": ("prompt", "response"),
                                "question_answer": ("question", "answer")}[schema]
    question = as_text(record[question_key], f"'{question_key}'")
    extra = as_text(record.get("input"), "'input'") if schema == "instruction" else ""
    if extra.strip():
        question = f"{question}\n\n{extra}"
    messages = [{"role": "user", "content": question},
                {"role": "assistant", "content": as_text(record[answer_key], f"'{answer_key}'")}]
    system = as_text(record.get("system"), "'system'")
    if system.strip():
        messages.insert(0, {"role": "system", "content": system})
    return messages


def text_field(record: dict, column: str) -> str:
    """The text of `column` (`a.b`: field b of struct a, unless a column is literally named 'a.b')."""
    if column in record:
        value = record[column]
    else:
        value = record
        for part in column.split("."):
            if not isinstance(value, dict) or part not in value:
                raise KeyError(column)
            value = value[part]
    if isinstance(value, dict):
        raise TextError(f"column '{column}' is a struct with fields {sorted(value)}: pick the one holding the text "
                        f"with --text_column {column}.FIELD")
    return as_text(value, f"column '{column}'")


def record_to_segments(record: dict, schema: str, renderer: ChatRenderer, with_masks: bool) -> Segments:
    if schema.startswith("text:"):
        return [(text_field(record, schema[5:]), True)]
    if schema == "prompt_completion":
        return [(as_text(record["prompt"], "'prompt'"), False), (as_text(record["completion"], "'completion'"), True)]
    return renderer.render(_chat_from_record(record, schema), with_masks)


@dataclass
class ChunkDocuments:
    documents: list[Segments] = field(default_factory=list)
    numbers: list[int] = field(default_factory=list)  # each document's line (record number for records)
    bad_records: int = 0
    empty: int = 0
    replaced_lines: int = 0


def _decode(chunk, on_decode_error: str) -> tuple[str, int]:
    payload: bytes = chunk.payload
    try:
        return payload.decode("utf-8"), 0
    except UnicodeDecodeError as error:
        line = chunk.first_line + payload.count(b"\n", 0, error.start)
        if on_decode_error != "replace":
            raise RankzeroError(
                f"{chunk.path}:{line}: undecodable bytes at byte offset {chunk.byte_offset + error.start} (not UTF-8); "
                "fix the file or pass --on_decode_error replace"
            ) from None
    replaced = 0
    for raw_line in payload.split(b"\n"):
        try:
            raw_line.decode("utf-8")
        except UnicodeDecodeError:
            replaced += 1
    return payload.decode("utf-8", errors="replace"), replaced


def _iter_line_records(chunk, text: str, skip_bad_records: bool, counts: ChunkDocuments,
                       skip_lines: np.ndarray | None = None):
    """Yield (line number, record) from a decoded chunk of a line-oriented file, less the JSONL lines `skip_lines`
    names (the decoded text splits at the same newlines as the bytes)."""
    if chunk.fmt == "jsonl":
        skip = skip_lines.tolist() if skip_lines is not None else None
        for offset, line in enumerate(text.split("\n")):
            if (skip is not None and skip[offset]) or not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise json.JSONDecodeError(f"expected an object, got {type(record).__name__}", line, 0)
            except json.JSONDecodeError as error:
                if skip_bad_records:
                    counts.bad_records += 1
                    continue
                raise RankzeroError(
                    f"{chunk.path}:{chunk.first_line + offset}: malformed JSON ({error.msg}, column {error.colno + 1}); "
                    "fix the line or pass --skip_bad_records"
                ) from None
            yield chunk.first_line + offset, record
    elif chunk.fmt == "txt-line":
        for offset, line in enumerate(text.split("\n")):
            line = line.rstrip("\r")
            if line.strip():
                yield chunk.first_line + offset, {"text": line}
    elif chunk.fmt == "txt-paragraph":
        line_no = chunk.first_line
        for paragraph in text.replace("\r\n", "\n").split("\n\n"):
            if paragraph.strip():
                yield line_no, {"text": paragraph.strip("\n")}
            line_no += paragraph.count("\n") + 2
    else:  # txt-document
        if text.strip():
            yield 1, {"text": text}


def _decode_binary(record: dict, on_decode_error: str) -> bool:
    """Binary columns (parquet/Arrow `binary`) holding text: decoded as UTF-8 in place; True if bytes were replaced."""
    replaced = False
    for key, value in record.items():
        if isinstance(value, bytes):
            try:
                record[key] = value.decode("utf-8")
            except UnicodeDecodeError as error:
                if on_decode_error != "replace":
                    raise TextError(f"binary column '{key}' is not UTF-8 (byte {error.start}); fix the data or pass "
                                    "--on_decode_error replace") from None
                record[key], replaced = value.decode("utf-8", errors="replace"), True
    return replaced


def _has_surrogates(segments: Segments) -> bool:
    # A str with a lone surrogate cannot be encoded as UTF-8 (nor passed to the Rust tokenizer); trying is
    # faster than a regex search and allocates one short-lived copy.
    try:
        for text, _ in segments:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def chunk_documents(chunk, text_column: str | None, renderer: ChatRenderer, *, with_masks: bool = False,
                    skip_bad_records: bool = False, on_decode_error: str = "error",
                    skip_lines: np.ndarray | None = None) -> ChunkDocuments:
    """Parse one chunk into documents; errors name the file and line (or record number). `skip_lines` (JSONL: a bool
    per line of the chunk): lines left unparsed, counted nowhere (the stage counts them)."""
    out = ChunkDocuments()
    if chunk.fmt == "records":
        records = enumerate(chunk.payload, start=chunk.first_line)
        where = "record"
        may_hold_surrogates = True  # records parsed from JSON (.json arrays, some hub datasets) may
    else:
        text, out.replaced_lines = _decode(chunk, on_decode_error)
        records = _iter_line_records(chunk, text, skip_bad_records, out, skip_lines)
        where = "line"
        # Decoded UTF-8 never holds a surrogate; only a JSON escape (backslash-u) can make one.
        may_hold_surrogates = chunk.fmt == "jsonl" and "\\u" in text
    schemas: dict[frozenset, str] = {}  # files may mix shapes (instruction and chat records, say)
    for number, record in records:
        keys = frozenset(record)
        schema = schemas.get(keys)
        if schema is None:
            schema = schemas[keys] = detect_schema(list(record), text_column)
        if not schema:
            if skip_bad_records:
                out.bad_records += 1
                continue
            wanted = f"no column '{text_column}'" if text_column else "cannot tell which field holds the text"
            raise RankzeroError(
                f"{chunk.path}: {where} {number}: {wanted}; its columns are {sorted(record)}. "
                f"Pass --text_column NAME, or use one of: {', '.join(KNOWN_SHAPES)}"
            )
        try:
            replaced = where == "record" and _decode_binary(record, on_decode_error)
            segments = record_to_segments(record, schema, renderer, with_masks)
            if may_hold_surrogates and _has_surrogates(segments):
                if on_decode_error != "replace":
                    raise TextError("the text holds a lone UTF-16 surrogate (a JSON escape such as \\ud800 without "
                                    "its pair): not Unicode, no tokenizer takes it; fix it or pass --on_decode_error "
                                    "replace (U+FFFD)")
                segments, replaced = [(SURROGATES.sub("\ufffd", text), trainable) for text, trainable in segments], True
            out.replaced_lines += replaced
        except (KeyError, TypeError, ValueError) as error:
            if skip_bad_records:
                out.bad_records += 1
                continue
            if isinstance(error, TextError):
                place = f"{chunk.path}:{number}" if where == "line" else f"{chunk.path}: record {number}"
                raise RankzeroError(f"{place}: {error} (or --skip_bad_records to skip such records)") from None
            raise RankzeroError(
                f"{chunk.path}: {where} {number}: malformed '{schema}' record ({error}); "
                f"its columns are {sorted(record)}; pass --skip_bad_records to skip such records"
            ) from None
        if all(text.isspace() or not text for text, _ in segments):  # isspace: no copy, unlike strip
            out.empty += 1
            continue
        out.documents.append(segments)
        out.numbers.append(number)
    return out
