"""merge_attn_states: merge two partial attention results by their log-sum-exps."""
