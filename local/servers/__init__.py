"""Real local servers, each on a free loopback port and stopped by its own PID: the Firestore and Spanner
emulators, redis-server, and handler processes under functions-framework. Imports ``local.faults``.
"""
