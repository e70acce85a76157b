"""Cloud Scheduler's rules: unix-cron schedules and time zones, retry windows, and which scheduled run a
delivery belongs to (its run key and run id). Imports only ``core``.
"""
