"""The Cloud Spanner run store: its settings (:mod:`.config`), client (:mod:`.store`, :mod:`.admin`), table
(:mod:`.schema`), values and limits (:mod:`.values`) and wire classifier (:mod:`.wire`), registered by :data:`STORE`."""

from scheduler_dedup.handler.stores.kind import StoreKind

_HERE = "scheduler_dedup.handler.stores.spanner"

STORE = StoreKind(
    id="spanner", display_name="Spanner",
    config=f"{_HERE}.config:SpannerConfig",
    factory=f"{_HERE}.store:from_settings", schema=f"{_HERE}.schema", values=f"{_HERE}.values",
    wire=f"{_HERE}.wire:SPANNER_WIRE", emulator_variable="SPANNER_EMULATOR_HOST", extra="spanner",
    requirements=("google-cloud-spanner==3.68.0",),
    local_server="scheduler_dedup.local.servers.spanner_emulator:SpannerEmulator",
    component="scheduler_dedup.infra.stores.spanner",
    pack_rules="scheduler_dedup.policies.rules.stores.spanner",
)
