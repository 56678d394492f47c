"""A minimal JSON client of the admin API (standard library only)."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any


class AdminError(Exception):
    """The admin API answered with an error, or could not be reached."""

    def __init__(self, code: str, message: str, details: list[dict[str, Any]] | None = None) -> None:
        """``details``: the reply's ``[{"where": [...], "problem": ...}]``, one per invalid field."""
        said = [f"{'.'.join(str(part) for part in d.get('where', []))}: {d.get('problem')}" for d in details or []]
        super().__init__("; ".join([f"{code}: {message}", *said]))
        self.code = code


class AdminClient:
    def __init__(self, url: str, token: str | None, timeout: float = 10.0, ca: str | None = None) -> None:
        """``ca``: a PEM file of the CA that signed the broker's certificate, trusted for an
        ``https://`` URL (instead of the system's CAs)."""
        self._url = url.rstrip("/")
        self._token = token
        self._timeout = timeout
        try:
            self._tls = ssl.create_default_context(cafile=ca)
        except (OSError, ssl.SSLError) as exc:
            raise AdminError("BAD_CA", f"cannot use the CA file {ca}: {exc}") from None

    def get(self, path: str, **query: object) -> Any:
        params = urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        return self._request("GET", f"{path}?{params}" if params else path)

    def post(self, path: str, body: object = None) -> Any:
        return self._request("POST", path, body)

    def put(self, path: str, body: object) -> Any:
        return self._request("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self._request("DELETE", path)

    def _request(self, method: str, path: str, body: object = None) -> Any:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(self._url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._tls) as response:
                answer = response.read()
                return json.loads(answer) if answer else None
        except urllib.error.HTTPError as exc:
            try:
                error = json.load(exc)["error"]
            except (ValueError, KeyError, TypeError):
                raise AdminError(f"HTTP_{exc.code}", exc.reason) from None
            raise AdminError(error["code"], error["message"], error.get("details")) from None
        except (urllib.error.URLError, OSError) as exc:
            raise AdminError("UNREACHABLE", f"cannot reach the admin API at {self._url}: {exc}") from None
