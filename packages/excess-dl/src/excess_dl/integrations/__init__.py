"""Integrations with other libraries (TRL)."""
