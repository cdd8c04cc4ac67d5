"""Familiars lifecycle over the store: TTL (ttl.py) and consolidation."""
