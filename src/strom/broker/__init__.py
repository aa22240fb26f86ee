"""The broker: ``strom serve``. Network layer in ``server``, one handler module per API in
``handlers``, the parts they call (``replica_manager``, ``metadata_cache``) beside them."""
