"""`onceflow console`: a web view of a Kafka-compatible cluster's exactly-once state, read-only
unless started with `--allow-actions`.

Data gathering (`offsets`, `topics`, `transactions`, `groups`, `markers`, the message browser
`browse`) talks to the cluster through `AdminClient` (and, to browse, a group-less `Consumer`)
only, so the console works on Apache Kafka as on onceflow's broker, and returns plain
dataclasses; `render` and `render_actions` turn them into HTML; `app` serves both as pages and
as a JSON API (`/api/...`) through `cluster`. The actions (`abort`, `reset`, served by
`actions`) ask before they change anything. See docs/console.md.
"""
