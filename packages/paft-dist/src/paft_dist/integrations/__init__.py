"""Integrations with training frameworks (transformers Trainer / TRL)."""
