"""Shared by the vLLM engine checks (vllm_scheduler.py, vllm_offload_connector.py)."""
import json
from pathlib import Path


def tiny_llama(directory):
    """A model directory with only a config.json: the smallest Llama vLLM's ModelConfig accepts
    (no weights: the checks never run a model, only the scheduler). Returns its path as text."""
    model = Path(directory) / "tiny-llama"
    model.mkdir(parents=True, exist_ok=True)
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
        "num_hidden_layers": 1, "vocab_size": 1000, "max_position_embeddings": 1 << 20,
        "rms_norm_eps": 1e-5, "torch_dtype": "float16"}))
    return str(model)
