"""A local npm registry for tests: real packuments and tarballs over real HTTP.

npm (and npx, and the governor's fetch) talk to it as to registry.npmjs.org
when a ``.npmrc`` names it (`Registry.npmrc`): a test can publish any package
name at any version (a preset's own, with a scripted agent as its program) and
nothing leaves the machine. Standard library only.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def tarball(
    name: str,
    version: str,
    files: Mapping[str, str],
    bin_: Mapping[str, str],
    scripts: Mapping[str, str] | None = None,
) -> bytes:
    """An npm package tarball (``package/...``), its package.json made here;
    files named in ``bin_`` are executable."""
    manifest = {"name": name, "version": version, "bin": dict(bin_), "scripts": dict(scripts or {})}
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path, text in {"package.json": json.dumps(manifest), **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"package/{path}")
            info.size = len(data)
            info.mode = 0o755 if path in bin_.values() else 0o644
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


@dataclass
class Registry:
    """Packages published on a local HTTP port; `url` is the registry's address."""

    url: str = ""
    packuments: dict[str, dict[str, object]] = field(default_factory=dict)
    tarballs: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def publish(
        self,
        name: str,
        version: str,
        files: Mapping[str, str],
        bin_: Mapping[str, str],
        scripts: Mapping[str, str] | None = None,
    ) -> None:
        """Publish ``name@version`` (the latest), with ``scripts`` in its package.json."""
        data = tarball(name, version, files, bin_, scripts)
        key = f"{hashlib.sha1(data).hexdigest()}.tgz"
        self.tarballs[key] = data
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
        doc = self.packuments.setdefault(name, {"name": name, "versions": {}, "dist-tags": {}})
        versions = doc["versions"]
        assert isinstance(versions, dict)
        versions[version] = {
            "name": name,
            "version": version,
            "bin": dict(bin_),
            "scripts": dict(scripts or {}),
            **({"hasInstallScript": True} if scripts else {}),
            "dist": {
                "tarball": f"{self.url}tarballs/{key}",
                "shasum": hashlib.sha1(data).hexdigest(),
                "integrity": integrity,
            },
        }
        doc["dist-tags"] = {"latest": version}

    def npmrc(self, home: Path) -> None:
        """Make ``home/.npmrc`` point npm at this registry."""
        (home / ".npmrc").write_text(f"registry={self.url}\naudit=false\nfund=false\n")


@contextmanager
def serving() -> Iterator[Registry]:
    """A `Registry` answering on 127.0.0.1 until the block ends."""
    registry = Registry()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urllib.parse.unquote(self.path.split("?")[0]).lstrip("/")
            registry.requests.append(path)
            if path.startswith("tarballs/") and path[9:] in registry.tarballs:
                body, kind = registry.tarballs[path[9:]], "application/octet-stream"
            elif path in registry.packuments:
                body, kind = json.dumps(registry.packuments[path]).encode(), "application/json"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    registry.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield registry
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
