"""The Firestore run store (the default): its settings (:mod:`.config`), client (:mod:`.store`), record layout
(:mod:`.schema`), values and limits (:mod:`.values`) and wire classifier (:mod:`.wire`), registered by :data:`STORE`."""

from scheduler_dedup.handler.stores.kind import StoreKind

_HERE = "scheduler_dedup.handler.stores.firestore"

STORE = StoreKind(
    id="firestore", display_name="Firestore",
    config=f"{_HERE}.config:FirestoreConfig",
    factory=f"{_HERE}.store:from_settings", schema=f"{_HERE}.schema", values=f"{_HERE}.values",
    wire=f"{_HERE}.wire:FIRESTORE_WIRE", emulator_variable="FIRESTORE_EMULATOR_HOST",
    requirements=("google-cloud-firestore==2.27.0",),
    local_server="scheduler_dedup.local.servers.firestore_emulator:FirestoreEmulator",
    component="scheduler_dedup.infra.stores.firestore",
    pack_rules="scheduler_dedup.policies.rules.stores.firestore",
)
