"""Logs only Python reads (kvtk._logs): Parquet token-id logs and OpenAI chat-completions text
logs tokenized with a local Hugging Face tokenizer and chat template. The tokenizer is trained
here with `tokenizers` from the example log's own text and saved as a model directory would hold
it; the import loads it through transformers (the real loading code), and its trace equals the
token-id import of ids computed independently (Jinja2 + the raw `tokenizers` file). Tests skip
without pyarrow / transformers unless KVTK_REQUIRE_SWEEP_DEPS=1 / KVTK_REQUIRE_TEXT_DEPS=1
(scripts/python sets both)."""
import importlib
import json
import math
import os

import pytest

import kvtk
from conftest import ROOT

IMPORT = ROOT / "tests" / "data" / "import"
CHAT = IMPORT / "openai_chat_example.jsonl"
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def need(module, env, extra):
    try:
        return importlib.import_module(module)
    except ImportError:
        if os.environ.get(env) == "1":
            pytest.fail(f"{module} is not installed and {env}=1")
        pytest.skip(f"{module} is not installed (pip install ./python[{extra}])")


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    """A byte-level BPE tokenizer trained on the example log's text, saved with a chat template
    as a Hugging Face model directory (tokenizer.json, tokenizer_config.json)."""
    need("transformers", "KVTK_REQUIRE_TEXT_DEPS", "text")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    texts = []
    for line in CHAT.read_text().splitlines():
        texts += [m["content"] for m in json.loads(line)["request"]["messages"]]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<unk>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", eos_token="<|im_end|>")
    fast.chat_template = TEMPLATE
    path = tmp_path_factory.mktemp("toy-tokenizer")
    fast.save_pretrained(path)
    return path


def expected_token_log(path, tokenizer_dir):
    """The chat log's token ids computed without transformers: the template rendered by Jinja2,
    the text encoded by the raw tokenizer file (no special tokens added), as vLLM does."""
    import jinja2
    from tokenizers import Tokenizer
    raw = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    template = jinja2.Environment().from_string(TEMPLATE)
    with open(path, "w") as out:
        for line in CHAT.read_text().splitlines():
            rec = json.loads(line)
            text = template.render(messages=rec["request"]["messages"], add_generation_prompt=True)
            out.write(json.dumps({"timestamp": rec["response"]["created"],
                                  "token_ids": raw.encode(text, add_special_tokens=False).ids,
                                  "output_length": rec["response"]["usage"]["completion_tokens"],
                                  "session": rec["request"]["user"]}) + "\n")


def test_chat_log_equals_the_token_ids_the_engine_would_hash(tokenizer_dir, tmp_path):
    r = kvtk.import_trace(CHAT, tmp_path / "chat.kvtb", format="openai-chat",
                          tokenizer=tokenizer_dir, block_tokens=4)
    assert r["requests"] == 12 and r["log_format"] == "openai-chat"
    expected_token_log(tmp_path / "ids.jsonl", tokenizer_dir)
    kvtk.import_trace(tmp_path / "ids.jsonl", tmp_path / "ids.kvtb", block_tokens=4)
    assert (tmp_path / "chat.kvtb").read_bytes() == (tmp_path / "ids.kvtb").read_bytes()
    # The conversations grow turn by turn: every request starts with the system prompt's blocks,
    # and a later turn of a conversation shares its earlier turn's prefix.
    t = kvtk.load_trace(tmp_path / "chat.kvtb")
    firsts = {int(t.block_keys[t.block_offsets[i]]) for i in range(len(t))}
    assert len(firsts) == 1
    assert kvtk.replay(tmp_path / "chat.kvtb", capacity=10_000, opt=False)[0]["block_hits"] > 0
    # A template file given explicitly is the one used (here: the same text, so the same trace).
    (tmp_path / "t.jinja").write_text(TEMPLATE)
    kvtk.import_trace(CHAT, tmp_path / "chat2.kvtb", format="openai-chat", tokenizer=tokenizer_dir,
                      chat_template=tmp_path / "t.jinja", block_tokens=4)
    assert (tmp_path / "chat2.kvtb").read_bytes() == (tmp_path / "chat.kvtb").read_bytes()


def test_chat_log_models_and_bad_records(tokenizer_dir, tmp_path):
    lines = CHAT.read_text().splitlines()
    other = json.loads(lines[1])
    other["request"]["model"] = "other-model"
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([lines[0], json.dumps(other)] + lines[2:]) + "\n")
    with pytest.raises(kvtk.TraceError, match=r"mixed.jsonl: record 2: is for model 'other-model'"):
        kvtk.import_trace(mixed, tmp_path / "m.kvtb", format="openai-chat", tokenizer=tokenizer_dir)
    r = kvtk.import_trace(mixed, tmp_path / "m.kvtb", format="openai-chat", tokenizer=tokenizer_dir,
                          model="toy-chat")
    assert (r["requests"], r["skipped_other_model"]) == (11, 1)
    # An error the C++ importer finds is reported on the user's record, not the temporary log.
    back = json.loads(lines[3])
    back["response"]["created"] = 1
    bad = tmp_path / "back.jsonl"
    bad.write_text("\n".join(lines[:3] + [json.dumps(back)]) + "\n")
    with pytest.raises(kvtk.TraceError, match=r"back.jsonl: record 4: timestamp goes backwards") as e:
        kvtk.import_trace(bad, tmp_path / "b.kvtb", format="openai-chat", tokenizer=tokenizer_dir)
    assert (e.value.path, e.value.line) == (str(bad), 4)
    assert not (tmp_path / "b.kvtb").exists()
    bad.write_text(lines[0] + "\n" + json.dumps({"request": {"model": "toy-chat"}}) + "\n")
    with pytest.raises(kvtk.TraceError, match=r"record 2: has no 'messages' list"):
        kvtk.import_trace(bad, tmp_path / "b.kvtb", format="openai-chat", tokenizer=tokenizer_dir)
    with pytest.raises(ValueError, match="is not a directory"):
        kvtk.import_trace(CHAT, tmp_path / "b.kvtb", format="openai-chat", tokenizer=tmp_path / "nope")
    with pytest.raises(ValueError, match="needs tokenizer="):
        kvtk.import_trace(CHAT, tmp_path / "b.kvtb", format="openai-chat")


def test_parquet_log_equals_the_jsonl_one(tmp_path):
    need("pyarrow", "KVTK_REQUIRE_SWEEP_DEPS", "sweep")
    import pyarrow as pa
    import pyarrow.parquet as pq
    r = kvtk.import_trace(IMPORT / "token_ids_example.parquet", tmp_path / "pq.kvtb")
    assert (r["requests"], r["tokens"], r["full_blocks"], r["log_format"]) == (40, 14835, 912, "parquet")
    kvtk.import_trace(IMPORT / "token_ids_example.jsonl", tmp_path / "js.kvtb")
    assert (tmp_path / "pq.kvtb").read_bytes() == (tmp_path / "js.kvtb").read_bytes()
    # Other column names through field_*; an error names the Parquet row.
    table = pa.table({"t": [0.5, 1.0], "ids": [[1, 2, 3], []]})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(kvtk.TraceError, match=r"bad.parquet: row 2: 'ids' is empty"):
        kvtk.import_trace(tmp_path / "bad.parquet", tmp_path / "b.kvtb", field_tokens="ids",
                          field_timestamp="t")
    with pytest.raises(kvtk.TraceError, match=r"has no 'token_ids' column"):
        kvtk.import_trace(tmp_path / "bad.parquet", tmp_path / "b.kvtb")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(kvtk.TraceError, match="not a readable Parquet file"):
        kvtk.import_trace(tmp_path / "junk.parquet", tmp_path / "b.kvtb")


def test_anonymize_trace_equals_the_cli(kvtk_bin, tmp_path):
    import subprocess
    kvtk.import_trace(IMPORT / "token_ids_example.csv", tmp_path / "in.kvtb")
    (tmp_path / "salt").write_bytes(os.urandom(32))
    r = kvtk.anonymize_trace(tmp_path / "in.kvtb", tmp_path / "py.kvtb", salt_file=tmp_path / "salt",
                             time_zero=True)
    assert (r["requests"], r["sessions"], r["random_salt"]) == (40, 4, False)
    subprocess.run([kvtk_bin, "trace", "anonymize", str(tmp_path / "in.kvtb"), "-o",
                    str(tmp_path / "cli.kvtb"), "--salt-file", str(tmp_path / "salt"), "--time-zero"],
                   check=True, capture_output=True)
    assert (tmp_path / "py.kvtb").read_bytes() == (tmp_path / "cli.kvtb").read_bytes()
    assert kvtk.replay(tmp_path / "py.kvtb", engine="vllm", capacity=100, opt=False)[0]["block_hits"] == 639
    t = kvtk.load_trace(tmp_path / "py.kvtb")
    assert t.arrival_s[0] == 0.0
    assert not set(t.block_keys.tolist()) & set(kvtk.load_trace(tmp_path / "in.kvtb").block_keys.tolist())
    with pytest.raises(ValueError, match="--time-shift-s: must be a finite number"):
        kvtk.anonymize_trace(tmp_path / "in.kvtb", tmp_path / "x.kvtb", time_shift_s=float("nan"))


def test_session_columns_of_a_bailian_trace(tmp_path):
    lines = [
        {"chat_id": 10, "parent_chat_id": -1, "timestamp": 0.5, "input_length": 32, "output_length": 5,
         "type": "text", "turn": 1, "hash_ids": [1, 2]},
        {"chat_id": 11, "parent_chat_id": 10, "timestamp": 2.0, "input_length": 48, "output_length": 5,
         "type": "search", "turn": 2, "hash_ids": [1, 2, 3]},
    ]
    path = tmp_path / "b.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = kvtk.load_trace(path, format="bailian")
    assert t.request_id.tolist() == [10, 11]
    assert t.parent.tolist() == [2**64 - 1, 10]
    assert t.turn.tolist() == [1, 2]
    assert [t.kind_names[k] for k in t.kind.tolist()] == ["text", "search"]
    t.save(tmp_path / "b.kvtb")
    back = kvtk.load_trace(tmp_path / "b.kvtb")
    assert back.parent.tolist() == [2**64 - 1, 10] and back.kind_names == t.kind_names


def test_tool_s_round_trips_through_python(tmp_path):
    lines = [
        {"kvtk_trace": 1, "block_tokens": 16},
        {"arrival_s": 0.5, "input_length": 32, "session": 1, "id": 0, "kind": "agent", "tool_s": 1.25,
         "hash_ids": [1, 2]},
        {"arrival_s": 3.0, "input_length": 48, "session": 1, "id": 1, "parent": 0, "kind": "tool",
         "hash_ids": [1, 2, 3]},
    ]
    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = kvtk.load_trace(path)
    assert t.tool_s[0] == 1.25 and math.isnan(t.tool_s[1])
    t.save(tmp_path / "a.kvtb")
    back = kvtk.load_trace(tmp_path / "a.kvtb")
    assert back.tool_s[0] == 1.25 and math.isnan(back.tool_s[1])


def test_fan_in_parents_round_trip_through_python(tmp_path):
    lines = [
        {"arrival_s": 0.0, "input_length": 32, "session": 1, "id": 4, "hash_ids": [1, 2]},
        {"arrival_s": 0.5, "input_length": 32, "session": 2, "id": 5, "kind": "sub-agent", "hash_ids": [7, 8]},
        {"arrival_s": 3.0, "input_length": 48, "session": 1, "id": 6, "parent": [4, 5], "hash_ids": [1, 2, 3]},
    ]
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    t = kvtk.load_trace(path, block_tokens=16)
    assert list(t.parent) == [2**64 - 1, 2**64 - 1, 4]
    assert list(t.join_offsets) == [0, 0, 0, 1] and list(t.join_ids) == [5]
    t.save(tmp_path / "f.kvtb")
    back = kvtk.load_trace(tmp_path / "f.kvtb")
    assert list(back.join_offsets) == [0, 0, 0, 1] and list(back.join_ids) == [5]
    back.save(tmp_path / "g.jsonl", format="kvtk")
    assert '"parent": [4, 5]' in (tmp_path / "g.jsonl").read_text()


def test_engine_events_import_and_check_engine(tmp_path):
    # SGLang 0.5.23's own recording of the example log (tools/engine-check/record_sglang_events.sh)
    # and vLLM 0.33.0's with reuse reports: the Python surface gives the CLI's numbers.
    sglang = IMPORT / "sglang_events_example.jsonl"
    r = kvtk.import_trace(sglang, tmp_path / "misses.ids", format="sglang-events", to="ids")
    assert (r["engine"], r["stored_blocks"], r["removed_blocks"]) == ("sglang", 550, 507)
    with pytest.raises(ValueError, match="--engine must be sglang"):
        kvtk.import_trace(sglang, tmp_path / "x.ids", format="sglang-events", to="ids", engine="vllm")
    requests = tmp_path / "requests.kvtb"
    kvtk.import_trace(IMPORT / "token_ids_example.jsonl", requests, engine="sglang",
                      field_lora="no_lora", field_lora_path="no_lora_path")
    c = kvtk.check_engine(sglang, requests, gpu_blocks=64, engine="sglang")
    assert c["equal"] and c["recorded_stored"] == c["predicted_stored"] == 550
    c = kvtk.check_engine(sglang, requests, gpu_blocks=60, engine="sglang")
    assert not c["equal"] and c["first_divergence"].startswith("stored block #66")
    full = IMPORT / "vllm_events_full_example.jsonl"
    r = kvtk.import_trace(full, tmp_path / "rebuilt.kvtb", format="vllm-events", report_mode="full")
    assert (r["requests"], r["full_blocks"], r["reused_blocks"]) == (40, 912, 431)
    rebuilt = kvtk.load_trace(tmp_path / "rebuilt.kvtb")
    assert len(rebuilt) == 40
    # Dynamo 1.6.1 relaying the vLLM recording: the engine's keys (its default), vLLM's misses.
    r = kvtk.import_trace(IMPORT / "dynamo_events_example.jsonl", tmp_path / "dyn.ids",
                          format="dynamo-events", to="ids")
    assert (r["engine"], r["stored_blocks"], r["removed_blocks"]) == ("dynamo", 481, 419)
