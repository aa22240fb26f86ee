"""Client quotas (Kafka's ClientQuotaManager and ClientRequestQuotaManager): byte rates and
request time per user and/or client id, throttled by answering at once and muting (KIP-219)."""

from strom.broker.quota.client_quotas import REQUEST_QUOTA_EXEMPT, ClientQuotas, QuotaChange
from strom.broker.quota.entity import DEFAULT, QuotaEntity, QuotaError, QuotaFilter
from strom.broker.quota.manager import ClientQuotaManager
from strom.broker.quota.rate import SampledRate, throttle_time_ms
from strom.broker.quota.store import FileQuotaStore

__all__ = [
    "DEFAULT",
    "REQUEST_QUOTA_EXEMPT",
    "ClientQuotaManager",
    "ClientQuotas",
    "FileQuotaStore",
    "QuotaChange",
    "QuotaEntity",
    "QuotaError",
    "QuotaFilter",
    "SampledRate",
    "throttle_time_ms",
]
