"""A deterministic synthetic web on loopback, served by Debian's nginx.

``N`` hosts, each on its own IP ``127.0.2.N`` (``net`` changes the prefix; all of 127.0.0.0/8 is
routed to ``lo`` on Linux, so no address has to be added) and one shared port. Each host has a
start page ``/``, ``P - 1`` pages ``/sK/pageI.html``, and a ``robots.txt`` that allows
everything. Each page has 30-60 links (``links`` fixes the count): mostly same-host (relative,
root-relative or absolute), ~10% to other hosts (absolute, with the port); page ``i`` always
links to page ``i + 1``, so
every page is reachable from the start pages (the seeds) through ``<a href>`` alone. Some pages
also link through ``<iframe src>`` (5%) and an image map's ``<area href>`` (3%), and 2% link to
one of ``dead`` addresses ``127.0.3.K`` where nothing listens (connections are refused), as the
real web links to dead hosts. The ground truth (``SynthWeb.pages``) is every page URL.

By default the URLs name the hosts by IP (``http://127.0.2.N:PORT/``): crawlee-python and wget,
two of the benchmark's peers, have no resolver override, and the web must not go through
/etc/hosts. ``named=True`` names them ``hNN.bench`` (dead ones ``dNN.bench``) with ``resolve``
mapping names to IPs, for crawlers that take such a map (larbinscrapy's ``LARBIN_RESOLVE``).

nginx runs in the foreground (``daemon off``) from a generated config in a temp dir, one worker,
and writes an access log ``$msec $server_addr $host $request_uri $status $connection
$ssl_session_reused``, which is how the benchmark runner counts what a crawler fetched, and when,
over how many connections and resumed TLS sessions. ``tls=True`` serves https (a self-signed
certificate made at start, TLS 1.2 and 1.3, session tickets and a session cache, as a typical
server has them); a default port (80, or 443 with TLS) is left out of the URLs.

Run ``python -m testweb.synthweb --hosts 3 --pages 30`` to serve a web by hand.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import psutil

if TYPE_CHECKING:
    from types import TracebackType

logger = logging.getLogger(__name__)

NGINX = "/usr/sbin/nginx"
SECTIONS = 8
IFRAME_SHARE = 0.05  # pages with an <iframe src> to a page of their host
AREA_SHARE = 0.03  # pages with an image map (<area href>)
DEAD_LINK_SHARE = 0.02  # pages with a link to a dead address
LOG_FORMAT = "$msec $server_addr $host $request_uri $status $connection $ssl_session_reused"

_WORD_TEXT = (
    "crawler frontier politeness robots queue segment bitmap hash page site server request "
    "response header body link anchor title meta keyword description archive mirror index "
    "network address resolver cache timeout delay interval budget depth breadth scheduler "
    "market river mountain garden library museum station harbour village history science "
    "music theatre weather travel kitchen recipe bread cheese apple winter summer autumn spring "
    "the a of and to in is was for on that with as by at from this it be are were which or an "
    "new old large small quick slow early late first last other every many few more most such "
    "report notes review guide manual story letter chapter section table figure example result"
)
_WORDS = _WORD_TEXT.split()


class LogEntry(NamedTuple):
    """One access-log line: when, which server IP, which host, which path, which status."""

    msec: float
    ip: str
    host: str
    uri: str
    status: int
    connection: int = 0  # nginx's connection serial number
    reused: bool = False  # the connection's TLS session was resumed


def free_port(ip: str = "127.0.2.1") -> int:
    """A TCP port free on ``ip`` right now (nginx binds it on every host IP)."""
    with socket.socket() as sock:
        sock.bind((ip, 0))
        return int(sock.getsockname()[1])


def page_path(index: int) -> str:
    """The path of page ``index`` of a host: ``/`` for the start page."""
    return "/" if index == 0 else f"/s{index % SECTIONS}/page{index}.html"


def _file_of(index: int) -> str:
    return "index.html" if index == 0 else page_path(index).lstrip("/")


class SynthWeb:
    """The synthetic web: generate it, serve it with nginx, read nginx's access log.

    Use as a context manager; the temp dir (files, config, log) is removed on exit unless
    ``keep`` is true. ``seeds``, ``resolve``, ``port``, ``pages`` and ``pid`` (nginx master) are
    set on entry.
    """

    def __init__(
        self,
        hosts: int = 20,
        pages_per_host: int = 100,
        *,
        seed: int = 1,
        port: int = 0,
        workdir: str | None = None,
        nginx: str = NGINX,
        keep: bool = False,
        named: bool = False,
        dead: int = 3,
        tls: bool = False,
        net: str = "127.0.2",
        links: int | None = None,
    ) -> None:
        if not 1 <= hosts <= 254:
            raise ValueError("hosts must be 1..254 (one 127.0.2.N address each)")
        if pages_per_host < 2:
            raise ValueError("pages_per_host must be at least 2")
        if links is not None and links < 2:
            raise ValueError("links must be at least 2 (the next page and the home page)")
        if not 0 <= dead <= 254:
            raise ValueError("dead must be 0..254 (one 127.0.3.K address each)")
        self.hosts = hosts
        self.pages_per_host = pages_per_host
        self.links = links  # links a page; None: 30-60 (drawn per page)
        self.seed = seed
        self.port = port
        self.tls = tls
        self.scheme = "https" if tls else "http"
        self.nginx = nginx
        self.keep = keep
        self._workdir = workdir
        self.dir = Path()
        ips = [f"{net}.{n}" for n in range(1, hosts + 1)]
        dead_ips = [f"127.0.3.{k}" for k in range(1, dead + 1)]
        if named:
            self.hostnames = [f"h{n:02d}.bench" for n in range(1, hosts + 1)]
            self.dead_hosts = [f"d{k:02d}.bench" for k in range(1, dead + 1)]
            self.resolve = dict(zip(self.hostnames + self.dead_hosts, ips + dead_ips, strict=True))
        else:
            self.hostnames, self.dead_hosts, self.resolve = ips, dead_ips, {}
        self.ips = dict(zip(self.hostnames, ips, strict=True))  # serving host -> its IP
        self._dirs = {host: f"h{n:02d}" for n, host in enumerate(self.hostnames, 1)}
        self.seeds: list[str] = []
        self.pages: set[str] = set()
        self.page_bytes = 0
        self._proc: subprocess.Popen[bytes] | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def __enter__(self) -> SynthWeb:
        self.dir = Path(self._workdir or tempfile.mkdtemp(prefix="synthweb-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        self.seeds = [self.url(h, 0) for h in self.hostnames]
        self.pages = {self.url(h, i) for h in self.hostnames for i in range(self.pages_per_host)}
        self.generate()
        self._write_config()
        self._start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def pid(self) -> int:
        """The pid of the nginx master process."""
        if self._proc is None:
            raise RuntimeError("nginx is not running")
        return self._proc.pid

    @property
    def access_log(self) -> Path:
        return self.dir / "access.log"

    def file_of(self, host: str, index: int) -> Path:
        """The file of page ``index`` of ``host`` (after ``generate``)."""
        return self.dir / self._dirs[host] / _file_of(index)

    @property
    def origin_of(self) -> str:
        """``scheme://{}`` with the port when it is not the scheme's default (format a host)."""
        default = 443 if self.tls else 80
        return f"{self.scheme}://{{}}" + ("" if self.port == default else f":{self.port}")

    def url(self, host: str, index: int) -> str:
        return self.origin_of.format(host) + page_path(index)

    # --- generation ------------------------------------------------------------------------
    def generate(self) -> None:
        """Write every host's pages and robots.txt under ``self.dir/hNN``."""
        self.page_bytes = 0
        for host_no, host in enumerate(self.hostnames):
            root = self.dir / self._dirs[host]
            for sec in range(SECTIONS):
                (root / f"s{sec}").mkdir(parents=True, exist_ok=True)
            (root / "robots.txt").write_text("User-agent: *\nAllow: /\n")
            for index in range(self.pages_per_host):
                rng = random.Random(f"{self.seed}:{host_no}:{index}")
                data = self._page_html(rng, host, index).encode()
                (root / _file_of(index)).write_bytes(data)
                self.page_bytes += len(data)

    def _links(self, rng: random.Random, host: str, index: int) -> list[tuple[str, str]]:
        """(href, anchor text) pairs of one page; the first is always the next page."""
        n_pages = self.pages_per_host
        here = page_path(index)
        links = [(self._href(rng, here, host, host, (index + 1) % n_pages, "relative"), "next")]
        links.append(("/", "home"))
        count = rng.randint(30, 60)  # drawn always: a fixed count leaves the rest of the web as is
        for _ in range((self.links or count) - 2):
            if len(self.hostnames) > 1 and rng.random() < 0.10:
                other = rng.choice([h for h in self.hostnames if h != host])
                target = 0 if rng.random() < 0.2 else rng.randrange(n_pages)
                links.append((self.url(other, target), _words(rng, 2, 4)))
                continue
            style = rng.choices(("relative", "root", "absolute"), (6, 3, 1))[0]
            href = self._href(rng, here, host, host, rng.randrange(n_pages), style)
            if rng.random() < 0.05:
                href += "#comments"
            links.append((href, _words(rng, 1, 5)))
        if self.dead_hosts and rng.random() < DEAD_LINK_SHARE:
            dead = rng.choice(self.dead_hosts)
            links.insert(
                2,
                (
                    self.origin_of.format(dead) + page_path(rng.randrange(n_pages)),
                    _words(rng, 1, 3),
                ),
            )
        return links

    def _extra_links(self, rng: random.Random, host: str, index: int) -> list[str]:
        """An <iframe> and/or an image map for some pages (links other than <a>)."""
        here, n_pages = page_path(index), self.pages_per_host
        parts = []
        if rng.random() < IFRAME_SHARE:
            src = self._href(rng, here, host, host, rng.randrange(n_pages), "relative")
            parts.append(f'<iframe src="{src}" title="related"></iframe>\n')
        if rng.random() < AREA_SHARE:
            areas = "".join(
                f'<area shape="rect" coords="{10 * k},0,{10 * k + 9},9" href="'
                f'{self._href(rng, here, host, host, rng.randrange(n_pages), "root")}" '
                f'alt="{_words(rng, 1, 2)}">'
                for k in range(rng.randint(1, 3))
            )
            parts.append(f'<map name="nav{index}">{areas}</map>\n')
        return parts

    def _href(
        self, rng: random.Random, here: str, host: str, to_host: str, index: int, style: str
    ) -> str:
        target = page_path(index)
        if style == "absolute" or to_host != host:
            return self.url(to_host, index)
        if style == "root" or target == "/":
            return target
        here_dir, _, _ = here.rpartition("/")
        to_dir, _, to_file = target.rpartition("/")
        if here_dir == to_dir:
            return to_file
        return ("../" if here_dir else "") + target.lstrip("/")

    def _page_html(self, rng: random.Random, host: str, index: int) -> str:
        title = _words(rng, 3, 7).capitalize()
        links = self._links(rng, host, index)
        parts = [
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n',
            f"<title>{title} - {host}</title>\n",
            f'<meta name="description" content="{_words(rng, 10, 20)}">\n',
            f'<meta name="keywords" content="{", ".join(rng.sample(_WORDS, 6))}">\n',
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
            "<style>body{font-family:sans-serif;max-width:60em;margin:auto}</style>\n",
            "</head>\n<body>\n<header><nav><ul>\n",
        ]
        nav, body_links = links[:6], links[6:]
        parts += [f'<li><a href="{href}">{text}</a></li>\n' for href, text in nav]
        parts.append(f"</ul></nav></header>\n<main>\n<article>\n<h1>{title}</h1>\n")
        parts += self._extra_links(rng, host, index)
        target_size = rng.randint(10_000, 18_000)
        size = sum(map(len, parts))
        while body_links or size < target_size:
            para = _paragraph(rng)
            if body_links:
                href, text = body_links.pop()
                cut = rng.randrange(len(para) // 2, len(para))
                cut = para.rfind(" ", 0, cut) + 1 or cut
                para = f'{para[:cut]}<a href="{href}">{text}</a> {para[cut:]}'
            chunk = f"<p>{para}</p>\n"
            if rng.random() < 0.15:
                chunk = f"<h2>{_words(rng, 2, 5).capitalize()}</h2>\n" + chunk
            parts.append(chunk)
            size += len(chunk)
        parts.append(
            "</article>\n</main>\n<footer><p>Generated by synthweb for the "
            f"larbinscrapy benchmark. Page {index} of {host}.</p></footer>\n"
            "</body>\n</html>\n"
        )
        return "".join(parts)

    # --- nginx -----------------------------------------------------------------------------
    def _write_config(self) -> None:
        d = self.dir
        (d / "tmp").mkdir(exist_ok=True)
        ssl = ""
        if self.tls:
            cert, key = self_signed_certificate(d, [*self.hostnames, *self.ips.values()])
            ssl = (
                f"  ssl_certificate {cert};\n  ssl_certificate_key {key};\n"
                "  ssl_protocols TLSv1.2 TLSv1.3;\n  ssl_session_cache shared:tls:4m;\n"
                "  ssl_session_timeout 1h;\n"
            )
        servers = "".join(
            f"  server {{ listen {ip}:{self.port}{' ssl' if self.tls else ''}; "
            f"server_name {host}; root {d / self._dirs[host]}; }}\n"
            for host, ip in self.ips.items()
        )
        temp_paths = "".join(
            f"  {kind}_temp_path {d / 'tmp' / kind};\n"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        user = "user root;\n" if os.geteuid() == 0 else ""
        (d / "nginx.conf").write_text(
            f"{user}worker_processes 1;\npid {d / 'nginx.pid'};\n"
            f"error_log {d / 'error.log'} warn;\n"
            "events { worker_connections 4096; }\n"
            "http {\n"
            f"  log_format bench '{LOG_FORMAT}';\n"
            f"  access_log {self.access_log} bench;\n"
            f"{temp_paths}"
            "  types { text/html html; text/plain txt; }\n"
            "  default_type application/octet-stream;\n"
            "  sendfile on;\n  tcp_nopush on;\n  keepalive_timeout 65;\n"
            "  keepalive_requests 100000;\n  server_tokens off;\n"
            f"{ssl}{servers}"
            "}\n"
        )

    def _start(self) -> None:
        cmd = [
            self.nginx,
            "-p",
            str(self.dir),
            "-e",
            str(self.dir / "error.log"),
            "-c",
            str(self.dir / "nginx.conf"),
            "-g",
            "daemon off;",
        ]
        self.access_log.touch()
        with open(self.dir / "nginx.stderr", "wb") as stderr:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=stderr)
        deadline = time.monotonic() + 10
        pending = list(self.ips.values())
        while pending:
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = (self.dir / "nginx.stderr").read_text(errors="replace")
                self.stop()
                raise RuntimeError(f"nginx did not start: {err.strip()}")
            try:
                socket.create_connection((pending[0], self.port), timeout=0.5).close()
                pending.pop(0)
            except OSError:
                time.sleep(0.05)
        logger.info(
            "nginx %d serving %d hosts on port %d from %s",
            self._proc.pid,
            self.hosts,
            self.port,
            self.dir,
        )

    def stop(self) -> None:
        """Stop nginx (SIGQUIT: graceful, then SIGKILL after 5 s)."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGQUIT)
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def cpu_seconds(self) -> float:
        """user+sys CPU seconds of the nginx master and its workers so far."""
        try:
            master = psutil.Process(self.pid)
            procs = [master, *master.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0.0
        total = 0.0
        for proc in procs:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            total += times.user + times.system
        return total

    # --- the access log --------------------------------------------------------------------
    def log_offset(self) -> int:
        """The access log's size now: pass it to ``access_log_entries`` to read what follows."""
        return self.access_log.stat().st_size

    def access_log_entries(self, start: int = 0, end: int | None = None) -> list[LogEntry]:
        """Parsed access-log lines between byte offsets ``start`` and ``end``."""
        with open(self.access_log, "rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(end - start)
        entries = []
        for line in data.decode("utf-8", "replace").splitlines():
            fields = line.split(" ")
            if len(fields) != 7:
                continue
            msec, ip, host, uri, status, conn, reused = fields
            entries.append(
                LogEntry(float(msec), ip, host, uri, int(status), int(conn), reused == "r")
            )
        return entries

    def entry_url(self, entry: LogEntry) -> str:
        return self.origin_of.format(entry.host) + entry.uri


def self_signed_certificate(directory: Path, names: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate for ``names`` (host names or IPs) and its key, in PEM files."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def synthweb_pages(count: int) -> list[tuple[str, bytes]]:
    """``count`` (URL, HTML) pages of a 10-host web, from the generator (no server started)."""
    web = SynthWeb(hosts=10, pages_per_host=max(2, count // 10))
    web.port = 8000
    out = []
    for host_no, host in enumerate(web.hostnames):
        for index in range(web.pages_per_host):
            rng = random.Random(f"{web.seed}:{host_no}:{index}")
            out.append((web.url(host, index), web._page_html(rng, host, index).encode()))
    return out[:count]


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choices(_WORDS, k=rng.randint(low, high)))


def _paragraph(rng: random.Random) -> str:
    sentences = []
    for _ in range(rng.randint(3, 7)):
        sentences.append(_words(rng, 6, 16).capitalize() + ".")
    return " ".join(sentences)


def main(argv: list[str] | None = None) -> None:
    """Serve a synthetic web until interrupted; print seeds and the resolve map."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--pages", type=int, default=30, help="pages per host")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with SynthWeb(args.hosts, args.pages, port=args.port) as web:
        print("\n".join(web.seeds))
        print(json.dumps(web.resolve))
        print(
            f"{len(web.pages)} pages, {web.page_bytes / len(web.pages) / 1024:.1f} KiB/page, "
            f"log {web.access_log}; Ctrl-C to stop"
        )
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
