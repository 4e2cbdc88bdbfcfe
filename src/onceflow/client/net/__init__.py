"""The client's wire level: the protocol conversation without I/O (`wire`), the asyncio
transport and network client (`network`), cluster metadata (`metadata`), the background I/O
thread (`io_thread`) and its tasks (`tasks`), and FindCoordinator (`coordinator_lookup`)."""
