"""Authentication and authorization: SASL mechanisms, credentials, ACLs."""
