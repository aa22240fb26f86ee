"""Log compaction: keep the latest record per key of ``cleanup.policy=compact`` topics.

Modules: ``offset_map`` (key hash -> latest offset in a fixed memory budget),
``record_scan`` (records of many batches as numpy arrays; key hashing; the produce
path's keyless-record check), ``cleaner`` (one two-pass compaction of one log),
``log_cleaner`` (the background threads, scheduling, throttle and
``cleaner-offset-checkpoint``). The crash-safe swap of cleaned segments lives in
``strom.storage.segment_swap``, next to the loader that recovers it.
"""
