"""Security as Kafka does it (issue 20): TLS on a listener, SASL authentication, the
principal each connection acts as, ACLs over what a principal may do, and client quotas.

Names follow Kafka's ``org.apache.kafka.common.security`` and ``kafka.security``:
``authenticator`` is the connection-level seam (Kafka's ``Authenticator``), SASL
mechanisms live in ``sasl``, TLS material and the certificate-to-principal mapping in
``tls``/``ssl_principal_mapper``. Nothing here knows sockets: the network layer
(``strom.broker.server``) feeds frames in and writes what comes out.
"""
