"""The container's health probe: ``GET /healthz`` on the broker's own HTTP port, from inside the
container, over TLS when the broker serves it (``python -m broker.healthcheck``; exit 0 if healthy).

The probe reaches the broker by 127.0.0.1, a name its certificate need not carry, so it does not
verify the certificate; it only asks whether this broker answers. With a client CA (mutual TLS)
it presents the broker's own certificate, which that CA must then have signed.
"""

from __future__ import annotations

import os
import ssl
import sys
import urllib.request


def main() -> int:
    port = os.environ.get("HALFMQ_HTTP_PORT", "8080")
    cert, key = os.environ.get("HALFMQ_TLS_CERT"), os.environ.get("HALFMQ_TLS_KEY")
    if cert is None or key is None:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
        return 0
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if os.environ.get("HALFMQ_TLS_CLIENT_CA"):
        context.load_cert_chain(cert, key)
    urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
