"""The log cleaner: compaction of `cleanup.policy=compact` logs (Kafka's `LogCleaner`).

- `cleaner`: one round over one log (cleanable range, groups, what is kept);
- `offset_map`: each key's latest offset in the dirty section (records read only as far as
  their keys, `records.record_scan`), from which most dirty batches are kept or dropped unread;
- `transactions`: aborted transactions and when markers may go;
- `batch_rewrite`: a batch rewritten with fewer records (same attributes, codec, CRC32C);
- `child`: the offset map and the `.cleaned` segments written by a niced child process;
- `swap`: the crash-safe `.cleaned`/`.swap` replacement and its completion at load;
- `manager`: which log to clean next, the `cleaner-offset-checkpoint`, stats, the task.
"""
