"""A `.json` file holding one array of records, read one record at a time.

    for number, record in json_array_records(path, max_document_bytes):   # number: 1, 2, ... in the array
        ...

`json.load` would hold the whole array as Python objects (about 10x the file for short records, and a
`.json.gz` of a few MB can inflate to gigabytes): here memory is one read buffer plus the record being
parsed, and a record longer than --max_document_mb is an error naming the file and line, as a line of a
.jsonl is. Written by hand on the standard library's `JSONDecoder.raw_decode` (which parses one value from
a position in a string): json has no streaming reader, and ijson, which has, would be a dependency for
this one format.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

from rankzero.data.inputs.files import damaged, open_input, stream_errors, too_long
from rankzero.errors import RankzeroError

READ_CHARS = 1 << 20
# How near the end of the buffer a parse error may be and still come from a read that stopped inside an item:
# the longest such tail is an escape cut in the middle, a backslash, "u" and up to 4 hex digits plus a quote.
CUT_TAIL = 8
_SPACE = " \t\r\n"


class _Text:
    """The file's text from `at` on, read as needed; `line` is the line number of `text[0]`."""

    def __init__(self, handle, path: str):
        self.handle, self.path = handle, path
        self.text, self.at, self.line, self.eof = "", 0, 1, False

    def more(self) -> bool:
        """Read another piece, dropping what was consumed; False at the end of the file."""
        if self.eof:
            return False
        try:
            piece = self.handle.read(READ_CHARS)
        except stream_errors() as error:
            raise damaged(self.path, "what was read of it", error) from None
        self.line += self.text.count("\n", 0, self.at)
        self.text, self.at = self.text[self.at:] + piece, 0
        self.eof = not piece
        return bool(piece)

    def next_char(self) -> str:
        """The next character that is not white space ('' at the end of the file), not consumed."""
        while True:
            while self.at < len(self.text) and self.text[self.at] in _SPACE:
                self.at += 1
            if self.at < len(self.text) or not self.more():
                return self.text[self.at:self.at + 1]

    def where(self, position: int) -> tuple[int, int]:
        line = self.line + self.text.count("\n", 0, position)
        return line, position - self.text.rfind("\n", 0, position)

    def malformed(self, position: int, what: str) -> RankzeroError:
        line, column = self.where(position)
        return RankzeroError(f"{self.path}:{line}: malformed JSON ({what}, column {column})")


def json_array_records(path: str, max_document_bytes: int) -> Iterator[tuple[int, dict]]:
    """(number, record) for each object of the array in the file, in order; RankzeroError naming the file and
    line for malformed JSON, an item that is not an object, or an item longer than `max_document_bytes`."""
    decoder = json.JSONDecoder()
    with io.TextIOWrapper(open_input(path), encoding="utf-8-sig") as handle:  # -sig: skips a byte-order mark
        text = _Text(handle, path)
        if text.next_char() != "[":
            raise text.malformed(text.at, "expected one array in the file, '[' first")
        text.at += 1
        number = 0
        while True:
            char = text.next_char()
            if char == "]":
                break
            if number:  # after an item: ',' then the next one
                if char != ",":
                    raise text.malformed(text.at, "expected ',' or ']' after an item" if char else "the array is not closed")
                text.at += 1
                text.next_char()
            number += 1
            while True:
                try:
                    record, end = decoder.raw_decode(text.text, text.at)
                    break
                except json.JSONDecodeError as error:
                    # An error at the end of what was read so far may only mean the item goes on: read more
                    # and parse again. An error earlier than the last CUT_TAIL characters is in the file.
                    cut = error.pos >= len(text.text) - CUT_TAIL or error.msg.startswith("Unterminated string")
                    if not cut or not text.more():
                        raise text.malformed(error.pos, error.msg) from None
                    _check_length(text, text.at, len(text.text), number, max_document_bytes)
            _check_length(text, text.at, end, number, max_document_bytes)
            if not isinstance(record, dict):
                raise RankzeroError(f"{path}:{text.where(text.at)[0]}: item {number} of the JSON array is "
                                    f"{type(record).__name__}, expected an object")
            text.at = end
            yield number, record
        text.at += 1
        if text.next_char():
            raise text.malformed(text.at, "more data after the array")


def _check_length(text: _Text, start: int, end: int, number: int, limit: int) -> None:
    # Characters first (at most 4 bytes each): most items are far below the limit.
    if end - start > limit // 4 and len(text.text[start:end].encode("utf-8", "surrogatepass")) > limit:
        raise too_long(text.path, text.where(start)[0], f"record (item {number} of the JSON array)", limit)
