"""benchmarks/memory.py on a tiny config.json and 2 forced devices: the
JSON line carries every program's figures, and the larger micro-batch
needs more temporaries."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"model_type": "qwen2", "vocab_size": 512, "hidden_size": 64,
        "intermediate_size": 96, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2,
        "tie_word_embeddings": True}


def _run(config, *flags):
  out = subprocess.run(
      [sys.executable, "benchmarks/memory.py", f"--model={config}",
       "--devices=2", "--prompts=2", "--samples=2", "--prompt_len=40",
       "--new_tokens=8", *flags],
      cwd=ROOT, capture_output=True, text=True, timeout=900, check=True)
  return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout


def test_tiny_config_on_two_devices(tmp_path):
  config = tmp_path / "config.json"
  config.write_text(json.dumps(TINY))
  small, stdout = _run(config, "--rows=2", "--seq_len=64")
  assert small["mesh"] == {"data": 1, "fsdp": 2, "tensor": 1}
  assert small["devices"] == 2 and small["dtype"] == "bfloat16"
  assert small["update_shape"] == {"micro_batches": 1, "rows": 2,
                                   "seq_len": 64}
  assert set(small["programs"]) == {"grads", "apply", "prefill", "decode"}
  for key in ("update_temp_gb", "update_total_gb", "sampler_total_gb",
              "compile_s"):
    assert small[key] > 0, key
  assert small["update_total_gb"] >= small["update_temp_gb"]
  assert "KV cache" in stdout and "temporaries" in stdout
  big, _ = _run(config, "--rows=4", "--seq_len=512", "--sampler=false")
  assert "sampler_total_gb" not in big
  assert big["update_temp_gb"] > small["update_temp_gb"]
