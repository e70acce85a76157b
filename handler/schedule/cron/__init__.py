"""Cloud Scheduler's unix-cron, one implementation for the handler, the component and the policy pack: its
fields and their rules (:mod:`.fields`), the readings of forms the cron page does not settle (:mod:`.readings`),
which schedules Scheduler accepts (:mod:`.accepted`), fire times on the job's wall clock (:mod:`.fire_times`), the
gaps between them (:mod:`.gaps`), a run's previous fire time (:mod:`.previous`) and steps larger than their range
(:mod:`.oversized_steps`).
"""
