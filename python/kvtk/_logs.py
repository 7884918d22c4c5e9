"""Request logs that only Python can read, turned into a token-id JSONL log for the C++ importer.

* Parquet token-id logs (pyarrow, the ``sweep`` extra): the columns the field options name, row by
  row, as ``kvtk trace import`` reads JSONL.
* OpenAI chat-completions text logs (transformers, the ``text`` extra): each record's
  ``messages`` rendered with the user's own tokenizer and chat template, then tokenized, as vLLM's
  OpenAI server does (the template rendered to text with ``add_generation_prompt=True``, the text
  tokenized without adding special tokens), so the token ids are the ones the engine hashed.

Both write a temporary JSONL log in kvtk's field names (deleted afterwards, even on error) and
hand it to the C++ importer; an error the importer finds on line N of it is reported as row or
record N of the user's log.
"""
from __future__ import annotations

import datetime
import json
import os
import tempfile
from typing import Any, Callable, Iterable, Iterator, Optional

# kvtk's own field names (the importer's "kvtk" preset), which the temporary log uses.
_KVTK_FIELDS = {"field_timestamp": "timestamp", "field_tokens": "token_ids",
                "field_output": "output_length", "field_session": "session",
                "field_lora": "lora_name", "field_lora_path": "lora_path",
                "field_cache_salt": "cache_salt", "field_mm": "mm_hashes"}
_VLLM_PRESET = {"field_timestamp": "arrival_time", "field_tokens": "prompt_token_ids",
                "field_output": "max_tokens"}


def _error(log: str, kind: str, number: int, reason: str) -> Exception:
    from . import TraceError
    return TraceError(f"{log}: {kind} {number}: {reason}", log, number)


def _relabel(error: Exception, temp: str, log: str, kind: str, names: dict) -> Exception:
    """An importer error on line N of the temporary log, renamed to the user's log: its record
    number (``log_record``, which the importer ignores) where rows were skipped, else row N, and
    the user's field names (`names`: kvtk's name -> the log's)."""
    from . import TraceError
    if not (isinstance(error, TraceError) and error.path == temp and error.line > 0):
        return error
    reason = str(error).split(f"{temp}:{error.line}: ", 1)[-1]
    for ours, theirs in names.items():
        reason = reason.replace(f"'{ours}'", f"'{theirs}'")
    number = error.line
    with open(temp, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if n == error.line:
                number = json.loads(line).get("log_record", number)
                break
    return _error(log, kind, number, reason)


def _import_rows(rows: Iterable[dict], log: str, kind: str, run: Callable[[str], dict],
                 names: Optional[dict] = None) -> dict:
    """Writes `rows` to a temporary JSONL log, imports it with `run(path)`, and removes it.
    `names`: kvtk's field name -> the log's, for error messages."""
    with tempfile.TemporaryDirectory(prefix="kvtk-import-") as scratch:
        temp = os.path.join(scratch, "log.jsonl")
        with open(temp, "w", encoding="utf-8") as out:
            for number, row in enumerate(rows, start=1):
                try:
                    text = json.dumps(row, ensure_ascii=False, allow_nan=False)
                except (TypeError, ValueError) as e:  # NaN, bytes, dates a log may hold
                    raise _error(log, kind, row.get("log_record", number),
                                 f"a value kvtk cannot read ({e})") from None
                out.write(text)
                out.write("\n")
        try:
            return run(temp)
        except Exception as e:  # noqa: BLE001 — re-raised, renamed
            raise _relabel(e, temp, log, kind, names or {}) from None


def _field_names(options: dict) -> dict:
    """The user's field names: the preset's, overridden by field_* options."""
    names = dict(_KVTK_FIELDS)
    if options.get("preset") == "vllm":
        names.update(_VLLM_PRESET)
    for key in _KVTK_FIELDS:
        if options.get(key):
            names[key] = options[key]
    return names


def user_names(options: dict) -> dict:
    """kvtk's field name -> the name the user's log gives it (where they differ)."""
    return {_KVTK_FIELDS[key]: theirs for key, theirs in _field_names(options).items()
            if theirs != _KVTK_FIELDS[key]}


def _seconds(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.timestamp()
    return value


def parquet_rows(log: str, options: dict) -> Iterator[dict]:
    """The rows of a Parquet token-id log, in kvtk's field names, a record batch at a time."""
    try:
        import pyarrow.parquet as pq
    except ImportError as e:
        raise ImportError("reading a Parquet log needs pyarrow: pip install 'kvtk[sweep]' "
                          "(or pyarrow)") from e
    names = _field_names(options)
    try:
        pf = pq.ParquetFile(log)
    except Exception as e:  # noqa: BLE001 — pyarrow raises several kinds for a bad file
        raise _error(log, "file", 0, f"not a readable Parquet file ({e})") from None
    present = set(pf.schema_arrow.names)
    if names["field_tokens"] not in present:
        raise _error(log, "file", 0, f"has no '{names['field_tokens']}' column (the prompt's "
                     f"token ids; field_tokens= names another); columns: {sorted(present)}")
    wanted = {ours: theirs for ours, theirs in names.items() if theirs in present}
    kvtk_name = {theirs: _KVTK_FIELDS[ours] for ours, theirs in wanted.items()}
    for batch in pf.iter_batches(batch_size=4096, columns=list(kvtk_name)):
        for row in batch.to_pylist():
            out = {}
            for theirs, value in row.items():
                if value is None:
                    continue
                key = kvtk_name[theirs]
                if key == "timestamp":
                    value = _seconds(value)
                out[key] = value
            yield out


def _chat_record(record: dict) -> tuple[dict, dict]:
    """(request, response) of a log record: {"request": {...}, "response": {...}} or one flat
    object holding both."""
    if isinstance(record.get("request"), dict):
        response = record.get("response")
        return record["request"], response if isinstance(response, dict) else {}
    return record, record


def load_tokenizer(path: str):
    """The Hugging Face tokenizer in the local directory `path` (tokenizer.json and
    tokenizer_config.json, as a model repository has them). Nothing is downloaded."""
    if not os.path.isdir(path):
        raise ValueError(f"tokenizer: '{path}' is not a directory (give the local path of the "
                         "model's tokenizer files; nothing is downloaded)")
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise ImportError("importing text logs needs transformers: pip install 'kvtk[text]'") from e
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    except Exception as e:  # noqa: BLE001 — transformers raises many kinds
        raise ValueError(f"tokenizer: cannot load '{path}': {e}") from None


def chat_rows(log: str, tokenizer_path: str, chat_template: Optional[str], model: Optional[str],
              options: dict, counts: dict) -> Iterator[dict]:
    """The records of an OpenAI chat-completions JSONL log as token-id rows, in record order.

    Each record: ``messages`` (and ``tools``) of the request, ``model``, a timestamp (the field
    named by field_timestamp, default ``timestamp``, else the response's ``created``), the
    reply's ``usage.completion_tokens`` as the output length, and ``session`` (else the
    request's OpenAI ``user``). Records of another model than `model` are counted and skipped;
    with model=None, a log of several models is refused (their caches are not shared)."""
    tok = load_tokenizer(tokenizer_path)
    template = None
    if chat_template is not None:
        with open(chat_template, encoding="utf-8") as f:
            template = f.read()
    elif not getattr(tok, "chat_template", None):
        raise ValueError(f"tokenizer: '{tokenizer_path}' has no chat template; give "
                         "chat_template= (a Jinja file, as vLLM's --chat-template)")
    names = _field_names(options)
    ts_field, session_field = names["field_timestamp"], names["field_session"]
    seen_model = None
    pending: list[tuple[int, str, dict]] = []

    def flush() -> Iterator[dict]:
        if not pending:
            return
        # One call for the whole chunk: the fast tokenizer encodes a batch on every core.
        encoded = tok([text for _, text, _ in pending], add_special_tokens=False)["input_ids"]
        for (_, _, row), ids in zip(pending, encoded):
            row["token_ids"] = list(ids)
            yield row
        pending.clear()

    with open(log, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise _error(log, "record", number, f"invalid JSON: {e.msg} at column {e.colno}") from None
            if not isinstance(record, dict):
                raise _error(log, "record", number, "is not a JSON object")
            request, response = _chat_record(record)
            messages = request.get("messages")
            if not isinstance(messages, list) or not messages:
                raise _error(log, "record", number, "has no 'messages' list (a chat-completions request)")
            name = request.get("model", record.get("model"))
            if model is not None and name != model:
                counts["other_model"] = counts.get("other_model", 0) + 1
                continue
            if model is None:
                if seen_model is None:
                    seen_model = name
                elif name != seen_model:
                    raise _error(log, "record", number, f"is for model '{name}', earlier records for "
                                 f"'{seen_model}': import one model at a time (model=...)")
            try:
                text = tok.apply_chat_template(messages, tools=request.get("tools"),
                                               chat_template=template, tokenize=False,
                                               add_generation_prompt=True)
            except Exception as e:  # noqa: BLE001 — Jinja and transformers errors
                raise _error(log, "record", number, f"the chat template failed: {e}") from None
            row: dict[str, Any] = {"log_record": number}
            stamp = record.get(ts_field, request.get(ts_field))
            if stamp is None:
                stamp = response.get("created")
            if stamp is not None:
                row["timestamp"] = stamp
            usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
            if usage.get("completion_tokens") is not None:
                row["output_length"] = usage["completion_tokens"]
            session = record.get(session_field, request.get(session_field, request.get("user")))
            if session is not None:
                row["session"] = session
            pending.append((number, text, row))
            if len(pending) >= 256:
                yield from flush()
    yield from flush()
