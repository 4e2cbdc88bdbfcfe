"""Consumer groups: the group coordinator client (`coordinator`), the member's join, sync and
heartbeat state (`membership`), partition assignors (`assignors`) and the consumer protocol's
subscription and assignment codec (`protocol`)."""
