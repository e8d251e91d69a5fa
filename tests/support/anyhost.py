"""An HTTP server for every name: one small page per host, robots.txt 404, each request logged.

``python -m tests.support.anyhost LOG IP [IP...]`` listens on port 80 of each IP (run it in a
network namespace) and prints ``ready``; the log has one ``host<TAB>path`` line per request.
For crawls where the names, not the pages, are under test (tests/test_dns_crawl.py).
"""

from __future__ import annotations

import asyncio
import sys

PAGE = b"<html><head><title>a host</title></head><body><p>hello</p></body></html>"


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, log: object) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
        writer.close()
        return
    lines = head.decode("latin-1").split("\r\n")
    path = lines[0].split(" ")[1] if " " in lines[0] else "/"
    host = next((line.split(":", 1)[1].strip() for line in lines[1:]
                 if line.lower().startswith("host:")), "")
    log.write(f"{host.split(':')[0].lower()}\t{path}\n")  # type: ignore[attr-defined]
    log.flush()  # type: ignore[attr-defined]
    status, body = (b"404 Not Found", b"") if path == "/robots.txt" else (b"200 OK", PAGE)
    writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Type: text/html\r\nConnection: close\r\n"
                 b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    try:
        await writer.drain()
    finally:
        writer.close()


async def main(log_path: str, ips: list[str]) -> None:
    with open(log_path, "a", encoding="utf-8") as log:
        servers = [await asyncio.start_server(lambda r, w: _serve(r, w, log), ip, 80,
                                              backlog=1024) for ip in ips]
        print("ready", flush=True)
        await asyncio.gather(*(s.serve_forever() for s in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
