"""The embedded policy's warm start: corpus, tokenizer, SFT data."""
