#!/usr/bin/env python3
"""Download a package's source distribution from PyPI into a directory, verified by sha256.

    scripts/fetch-sdist.py NAME VERSION SHA256 DIR

Prints the file's path. Reads the index's simple JSON API (PEP 691, what pip reads) instead
of running `pip download`: pip prepares an sdist's metadata by running its build backend,
and llama-cpp-python's (scikit-build-core) wants CMake for that, which a fresh machine lacks.
PIP_INDEX_URL is honoured.
"""
import hashlib
import json
import os
import sys
import tempfile
import urllib.request


def main() -> int:
    if len(sys.argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    name, version, want, out_dir = sys.argv[1:]
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    req = urllib.request.Request(f"{index}/{name}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        files = json.load(r)["files"]
    # an sdist's name: the normalized project name, '-', the version, '.tar.gz'
    stem = f"{name.replace('-', '_')}-{version}.tar.gz".lower()
    sdists = [f for f in files if f["filename"].lower() == stem]
    if not sdists:
        print(f"error: no {stem} on {index}/{name}/", file=sys.stderr)
        return 1
    url = sdists[0]
    if url["hashes"].get("sha256") != want:
        print(f"error: {url['filename']} on {index} has sha256 "
              f"{url['hashes'].get('sha256')}, want {want}", file=sys.stderr)
        return 1
    os.makedirs(out_dir, exist_ok=True)
    dest = os.path.join(out_dir, url["filename"])
    fd, tmp = tempfile.mkstemp(dir=out_dir, prefix=".sdist.")
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as f, urllib.request.urlopen(url["url"], timeout=120) as r:
            while chunk := r.read(1 << 20):
                h.update(chunk)
                f.write(chunk)
        if h.hexdigest() != want:
            print(f"error: downloaded {url['filename']} has sha256 {h.hexdigest()}, want {want}",
                  file=sys.stderr)
            return 1
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
