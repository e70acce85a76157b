"""The HTTP service: the WSGI app built from the environment, a delivery in and a JSON answer out, request
bounds, the server's settings and the start-up checks. The top layer: it may import every other folder.
"""
