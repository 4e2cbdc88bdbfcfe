"""The broker: asyncio server (`server`), connections (`connection`), the API table
(`dispatch`), shared state (`state`), configuration (`config`) and one handler module per
Kafka API (`handlers`)."""
