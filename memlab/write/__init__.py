"""What is written and how: importance scoring, layer choice, record construction."""
