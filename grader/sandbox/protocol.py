"""The grader's end of the wire: reading what a worker sends, strictly.

The worker (`grader.case.wire`) writes length-prefixed JSON. The grader reads with a size
cap and parses strictly: exact dicts, lists, strings, ints and floats in the agreed shape,
nothing else. The worker runs student code, so a message may be forged, truncated or
huge: any deviation is a `MalformedResult`, never a crash and never a pass.
"""

from __future__ import annotations

import json
from typing import Any

from grader.case.quantity import MalformedResult, Quantity
from grader.case.run import Failure, Run
from grader.case.wire import (
    HEADER,
    MAX_MESSAGE,
    MAX_MISSING,
    MAX_NAME,
    MAX_NOTE,
    MAX_NOTES,
    MAX_TEXT,
    TAPE_KEYS,
)

__all__ = ["FrameReader", "decode", "parse_run", "parse_tape", "MAX_MESSAGE"]


class FrameReader:
    """Splits a byte stream into messages; refuses one that announces more than `limit`."""

    def __init__(self, limit: int = MAX_MESSAGE) -> None:
        self.limit = limit
        self.buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        self.buffer += data
        frames = []
        while len(self.buffer) >= HEADER.size:
            (size,) = HEADER.unpack_from(self.buffer)
            if size > self.limit:
                raise MalformedResult(f"a message of {size} bytes (the limit is {self.limit})")
            if len(self.buffer) < HEADER.size + size:
                break
            frames.append(bytes(self.buffer[HEADER.size : HEADER.size + size]))
            del self.buffer[: HEADER.size + size]
        return frames


def decode(frame: bytes) -> dict[str, Any]:
    """JSON only yields plain types; the shape is checked by the parsers below."""
    try:
        obj = json.loads(frame)
    except (ValueError, RecursionError) as exc:
        raise MalformedResult(f"not JSON: {exc}"[:200]) from None
    if type(obj) is not dict or type(obj.get("kind")) is not str:
        raise MalformedResult("a message must be an object with a 'kind'")
    return obj


# ---- strict parsing ----


def _expect(cond: bool, what: str) -> None:
    if not cond:
        raise MalformedResult(what)


def _text(obj: Any, what: str, limit: int = MAX_TEXT) -> str:
    _expect(type(obj) is str, f"{what} must be a string")
    return obj[:limit]


def _quantity(obj: Any) -> Quantity | None:
    return None if obj is None else Quantity.from_plain(obj)


def _failure(obj: Any) -> Failure | None:
    if obj is None:
        return None
    _expect(
        type(obj) is dict and set(obj) == {"type", "message", "where", "rule"},
        "a failure must be {type, message, where, rule}",
    )
    where = obj["where"]
    if where is not None:
        _expect(type(where) is list and len(where) == 3, "where must be [file, line, function]")
        _expect(type(where[1]) is int, "where's line must be an integer")
        where = (_text(where[0], "file", 200), where[1], _text(where[2], "function", 200))
    rule = None if obj["rule"] is None else _text(obj["rule"], "rule", 200)
    return Failure(_text(obj["type"], "type", 100), _text(obj["message"], "message"), where, rule)


RUN_KEYS = {"kind", "id", "results", "tape", "failure", "output", "notes", "missing"}


def parse_notes(obj: Any) -> list[str]:
    """Notes on loading the submission: a short list of short strings."""
    _expect(type(obj) is list and len(obj) <= MAX_NOTES, f"notes must be a list of at most {MAX_NOTES}")
    return [_text(note, "a note", MAX_NOTE) for note in obj]


def _tape(tape: Any) -> list[dict[str, Quantity | None]]:
    _expect(type(tape) is list, "tape must be a list")
    parsed = []
    for entry in tape:
        ok = type(entry) is dict and set(entry) == set(TAPE_KEYS)
        _expect(ok, f"a tape entry must be {{{', '.join(TAPE_KEYS)}}}")
        parsed.append({key: _quantity(entry[key]) for key in TAPE_KEYS})
    return parsed


def parse_run(obj: dict[str, Any], case_id: str) -> Run:
    """The worker's answer for `case_id`, or `MalformedResult` on anything unexpected. A
    tape of `null` was held back (see `grader.case.worker`): the run's tape stays empty."""
    try:
        _expect(
            set(obj) == RUN_KEYS and obj["kind"] == "run",
            "a run must be {kind, id, results, tape, failure, output, notes, missing}",
        )
        _expect(obj["id"] == case_id, f"an answer for {str(obj['id'])[:100]!r} where {case_id!r} was due")
        results = obj["results"]
        _expect(type(results) is dict, "results must be an object")
        parsed = Run(output=_text(obj["output"], "output"), failure=_failure(obj["failure"]))
        parsed.notes = parse_notes(obj["notes"])
        missing = obj["missing"]
        _expect(type(missing) is list and len(missing) <= MAX_MISSING, "missing must be a short list")
        parsed.missing = [_text(name, "a missing op's name", MAX_NAME) for name in missing]
        for name, q in results.items():
            parsed.results[_text(name, "a result's name", 200)] = _quantity(q)
        if obj["tape"] is not None:
            parsed.tape = _tape(obj["tape"])
        return parsed
    except MalformedResult:
        raise
    except Exception as exc:  # e.g. float() of a 400-digit int: still the worker's fault
        raise MalformedResult(f"{type(exc).__name__}: {exc}"[:200]) from None


def parse_tape(obj: dict[str, Any], case_id: str) -> list[dict[str, Quantity | None]]:
    """The worker's answer to ASK_TAPE for `case_id`: the tape it held back."""
    try:
        shaped = set(obj) == {"kind", "id", "tape"} and obj["kind"] == "tape"
        _expect(shaped, "a tape must be {kind, id, tape}")
        _expect(obj["id"] == case_id, f"a tape for {str(obj['id'])[:100]!r} where {case_id!r} was due")
        return _tape(obj["tape"])
    except MalformedResult:
        raise
    except Exception as exc:
        raise MalformedResult(f"{type(exc).__name__}: {exc}"[:200]) from None
