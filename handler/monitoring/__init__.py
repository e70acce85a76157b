"""A job's run history and the run check: one run as the history shows it (:mod:`.run_view`), reading one job's
records (:mod:`.run_history`), comparing them with the schedule's fire times (:mod:`.comparison`, which reports
:mod:`.findings`), the alerts the records raise (:mod:`.run_alerts`), the Scheduler job's own state
(:mod:`.job_state`), the watchdog's run check (:mod:`.run_check`) and its reading of runs forwarded to a downstream
execution (:mod:`.downstream_check`). Imports the layers below it and only the store
contract.
"""
