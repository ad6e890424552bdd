"""Audit tools that need cryptography beyond the standard library (Ed25519 signatures)."""
