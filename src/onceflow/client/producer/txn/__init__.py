"""The transactional producer, with no I/O except in `sender`: every client transaction
table in `states`, the transaction's state (`manager.TxnManager`), one class per coordinator
request kind (`requests`, on the base in `request`), and the sender of those requests."""
