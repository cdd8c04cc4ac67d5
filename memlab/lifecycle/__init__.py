"""Familiars' lifecycle over the store: consolidation (:mod:`.consolidate`, familiars §5.9)."""
