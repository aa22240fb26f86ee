"""The transaction coordinator (Kafka's ``kafka.coordinator.transaction``): one module per concept.

``transaction_log`` (the ``__transaction_state`` records), ``transaction_metadata`` (one
id's state machine), ``transaction_state_manager`` (the topic: appends, loads),
``transaction_marker_channel`` (markers, then Complete*), ``marker_writer`` (where a
marker goes: this broker's partitions or another leader's), ``transaction_coordinator``
(the requests).
"""
