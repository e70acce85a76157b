"""The Cloud Scheduler simulator, the recording job and the no-dedup baseline, for the demo and the tests.
"""
