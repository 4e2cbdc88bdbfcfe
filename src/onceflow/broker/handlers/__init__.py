"""One module per Kafka API, each exposing `async def handle_<api>(ctx, header, request)`.

`ctx` is a `broker.context.RequestContext` (`ctx.broker` is the `BrokerState`), `header` the
parsed request header and `request` the decoded request message. A handler returns the
response message, or None when the API sends no response (Produce with acks=0).
"""
