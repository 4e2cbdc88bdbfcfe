"""Security: Kafka's ACL model (`acl`), the ACL authorizer (`authorizer`) and the durable ACL set
(`acl_store`). Not yet wired into the broker."""
