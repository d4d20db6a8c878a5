"""Plumbing every layer may import and that imports none of them: atomic writes, name-derived
seeds, the errors that name a file and its fix, file and config digests, provenance."""
