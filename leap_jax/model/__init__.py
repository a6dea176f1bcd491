"""Decoder-only LLMs (Llama, Qwen2, Qwen3) in Flax NNX: weights, sampler."""
