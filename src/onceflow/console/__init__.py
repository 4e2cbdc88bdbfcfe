"""`onceflow console`: a read-only web view of a Kafka-compatible cluster's exactly-once state.

Data gathering (`offsets`, `topics`, `transactions`, `groups`, `markers`) talks to the cluster
through `AdminClient` only, so the console works on Apache Kafka as on onceflow's broker, and
returns plain dataclasses; `render` turns them into HTML; `app` serves both as pages and as a
JSON API (`/api/...`). See docs/console.md.
"""
