"""The embedded default policy's warm start: corpus, tokenizer, SFT data."""
