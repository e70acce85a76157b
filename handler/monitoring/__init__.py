"""A job's run history and the run check: expected fire times against run records. Imports the layers below
it and only the store contract.
"""
