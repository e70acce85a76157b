"""Plugin entry point of the scheduler-dedup component package (see scheduler_dedup.infra.stack.provider_host)."""

from scheduler_dedup.infra.stack.provider_host import main

if __name__ == "__main__":
    main()
