"""What is written and how: THE write pipeline (:mod:`.pipeline`) and its steps — records
(validation, ids), importance (§5), gate (autonomy), layers (routing, budget pressure per owner),
interaction (store_interaction, writer mode)."""
