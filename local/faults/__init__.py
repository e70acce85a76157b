"""Proxies between a store's client and its server that inject faults on the wire: gRPC (Firestore, Spanner)
and RESP (Redis). Imports only the handler's wire classifiers.
"""
