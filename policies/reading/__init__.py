"""Resources as the rules see them: engine-shaped properties with unknowns marked, values read failing closed,
and which Scheduler job calls which handler service. Imports the handler and ``policies.limits``.
"""
