"""Serve a functions-framework target on a listening socket that the parent process bound.

``python -m scheduler_dedup.local.servers.serve_socket --source FILE --target FUNC --listen-fd N --ready-fd M``
is ``functions-framework --source FILE --target FUNC`` (the same app, the same gunicorn server and
``THREADS``/``WORKERS`` settings) except that gunicorn serves the already-bound socket ``N`` instead of
binding a port itself, and writes ``ready`` to the pipe ``M`` once its worker has loaded the app.

Why: a port found free and bound later by another process can be taken in between by anyone on the
machine (a test's own HTTP server, another test session, an outgoing connection's ephemeral port); the
server then fails to bind while a "does the port accept connections" check succeeds against the other
listener. A socket bound to port 0 by the parent and inherited by the child cannot be taken.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
from typing import Any

from functions_framework import create_app
from functions_framework._http import create_server


#: The signal on which the server's worker writes every thread's stack to its log (:mod:`faulthandler`; the arbiter
#: ignores it): one gunicorn leaves alone (it acts on HUP, QUIT, INT, TERM, USR1, USR2, TTIN, TTOU, WINCH and CHLD).
DUMP_STACKS_SIGNAL = signal.SIGRTMIN + 1


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and serve until terminated (SIGTERM, as functions-framework)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="path of the .py file holding the target")
    parser.add_argument("--target", required=True, help="name of the function to serve")
    parser.add_argument("--listen-fd", type=int, required=True, help="inherited listening TCP socket")
    parser.add_argument("--ready-fd", type=int, required=True, help="inherited pipe; 'ready' is written once serving")
    args = parser.parse_args(argv)
    signal.signal(DUMP_STACKS_SIGNAL, signal.SIG_IGN)  # the arbiter's; its worker writes its stacks
    app = create_app(args.target, args.source, "http")

    def post_worker_init(worker: Any) -> None:
        faulthandler.register(DUMP_STACKS_SIGNAL, all_threads=True)
        # The worker has loaded the app and is about to accept: the readiness signal the parent waits on. A worker
        # gunicorn starts again (the job ended its process: os._exit, a crash, the OOM killer) writes to a pipe the
        # parent has closed; that worker must still serve, or gunicorn gives up ("Worker failed to boot").
        try:
            os.write(args.ready_fd, b"ready\n")
        except OSError:
            pass

    create_server(app, False, bind=f"fd://{args.listen_fd}", post_worker_init=post_worker_init).run("127.0.0.1", 0)


if __name__ == "__main__":
    main()
