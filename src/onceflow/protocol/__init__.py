"""Kafka wire protocol: primitives (`codec`), error codes, API keys, headers and framing, and the
message classes generated from Kafka's JSON specs (`messages`). Pure: no I/O, no asyncio."""
