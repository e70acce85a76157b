"""The Memorystore for Redis run store: its settings (:mod:`.config`), client (:mod:`.store`, :mod:`.lua`), values and
limits (:mod:`.values`) and wire classifier (:mod:`.wire`), registered by :data:`STORE`.

Its kind id is ``redis`` (``DEDUP_STORE=redis``, the protocol it speaks, a local ``redis-server`` included); the
component names it ``memorystore``, the managed service it creates, as its declared alias.
"""

from scheduler_dedup.handler.stores.kind import StoreKind

_HERE = "scheduler_dedup.handler.stores.redis"

STORE = StoreKind(
    id="redis", display_name="Memorystore for Redis", component_kind="memorystore",
    config=f"{_HERE}.config:RedisConfig",
    factory=f"{_HERE}.store:from_settings", schema=f"{_HERE}.lua", values=f"{_HERE}.values",
    wire=f"{_HERE}.wire:classify", extra="redis",
    requirements=("redis==8.1.0",),
    local_server="scheduler_dedup.local.servers.redis_server:RedisServer",
    component="scheduler_dedup.infra.stores.memorystore",
    pack_rules="scheduler_dedup.policies.rules.stores.memorystore",
)
