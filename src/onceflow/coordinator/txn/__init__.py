"""The transaction coordinator (KIP-98): transactional-id state, `__transaction_state`, markers.

- `state` - `TxnState` and its transition table.
- `metadata` - `TransactionMetadata` with Kafka's two-phase `prepare_*` / `complete_transition`.
- `log_codec` / `state_log` - records of `__transaction_state` and their durable append/load.
- `markers` - `TxnMarkerChannel`: COMMIT/ABORT markers to the partitions of a transaction.
- `coordinator` - `TransactionCoordinator`: the request handling, timeouts, expiration, recovery.
- `faults` - TEST-ONLY fault points (a crash right after a durable PREPARE_COMMIT).
"""
