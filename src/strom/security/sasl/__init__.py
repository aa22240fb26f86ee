"""SASL authentication on SASL_PLAINTEXT and SASL_SSL listeners, as Kafka's broker does it.

``server_authenticator`` is Kafka's ``SaslServerAuthenticator``: the per-connection state
machine (ApiVersions, SaslHandshake v0/v1, SaslAuthenticate, KIP-368 re-authentication)
behind the ``strom.security.authenticator.Authenticator`` seam. Each mechanism is a small
sans-IO server (``mechanism.SaslServer``): ``plain`` (RFC 4616), ``scram`` (RFC 5802/7677,
SHA-256 and SHA-512) and ``oauthbearer`` (RFC 7628, unsecured JWS with a validator seam).
``jaas`` reads Kafka's ``sasl.jaas.config`` values, ``credential_store`` keeps SCRAM
credentials (salt, stored key, server key, iterations; never a password) and
``listener_config`` the per-listener, per-mechanism settings.
"""
