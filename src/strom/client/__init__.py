"""Strom's Kafka clients: an asyncio core (producer, group consumer, admin) and a thin
synchronous facade over it. They speak the Kafka protocol through Strom's generated
codec, so they work against any Kafka-compatible broker, not only Strom's."""
