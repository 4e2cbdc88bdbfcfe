"""Classic consumer group coordinator: membership, rebalances and committed offsets."""
