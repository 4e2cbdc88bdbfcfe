"""Authentication and authorization, each piece I/O-free or a small durable store:

- SASL: `sasl` (errors, the mechanism interface), `scram` and `scram_messages` (SCRAM-SHA-256/512,
  RFC 5802/7677), `plain` (PLAIN, checked against the SCRAM credentials), `credentials` (the
  durable user store, KIP-554's operations), `bootstrap` (first users from config);
- ACLs: `acl` (Kafka's ACL model and filters), `authorizer` (decisions, indexed lookup),
  `acl_store` (the durable ACL set).

The broker uses the SASL pieces (`broker.sasl_authenticator`); the ACL pieces are not yet wired.
"""
