"""Real local servers, each on a free loopback port and stopped by its own PID: the Firestore and Spanner
emulators, redis-server, handler processes under functions-framework, and a loopback HTTP server for local stand-ins of
Google APIs. Imports ``local.faults``.
"""
