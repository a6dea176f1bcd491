"""LEAP RL: DCP, rank rewards, per-turn advantages, GRPO, rollouts."""
