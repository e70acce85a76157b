"""The job the reuse example deploys: ``report:run``."""


def run(scheduled):
    print(f"nightly report for {scheduled.schedule_time:%Y-%m-%d}")
    return {"rows": 0}
