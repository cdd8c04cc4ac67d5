"""Familiars' lifecycle over the store: TTL (:mod:`.ttl`, familiars §5.3.3) and consolidation
(:mod:`.consolidate`, familiars §5.9)."""
