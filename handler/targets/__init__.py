"""Downstream targets, one module each (:mod:`.workflows`, :mod:`.cloud_run_job`, :mod:`.cloud_build_trigger`,
:mod:`.http_url`), each given the run id as its idempotency token; the call they share (:mod:`.call`) and what each
downstream answer means for the run (:mod:`.answers`); their settings (:mod:`.settings`) and the target a setting
names (:mod:`.build_target`); reading and cancelling the executions they start (:mod:`.executions`); the session Google APIs are called through (:mod:`.google_api`). Imports ``core``, ``callers`` and ``protocol.job``.
"""
