"""Root Pulumi program of the scheduler-dedup stack: everything lives in scheduler_dedup.infra."""

from scheduler_dedup.infra.stack.program import main

main()
