"""The base profile: every larbinscrapy setting with its default, one line each.

Other profiles (``settings.distributed``) start with ``from settings.base import *``.
Where Scrapy already has a setting with the meaning we need (``DOWNLOAD_DELAY``,
``DEPTH_LIMIT``, ``JOBDIR``, ``ROBOTSTXT_OBEY``...), we use Scrapy's name.
"""

from __future__ import annotations

import scrapy.settings.default_settings as scrapy_defaults

BOT_NAME = "larbinscrapy"
SPIDER_MODULES = ["larbinscrapy.spiders"]
NEWSPIDER_MODULE = "larbinscrapy.spiders"
USER_AGENT = "larbinscrapy/0.1 (+https://github.com/larbinscrapy/larbinscrapy)"

# --- Scrapy settings we set on purpose -----------------------------------------------------
ROBOTSTXT_OBEY = True  # robots.txt through our fixed subclass of Scrapy's middleware (protego)
ROBOTSTXT_PARSER = "scrapy.robotstxt.ProtegoRobotParser"
DOWNLOAD_DELAY = 1.0  # larbin waitDuration, per hostname: seconds from the end of one fetch to the next start
DOWNLOAD_DELAY_JITTER = 0  # politeness is exact per IP; jitter only lowers throughput
CONCURRENT_REQUESTS = 128  # connections in flight over all IPs (larbin nb_conn)
CONCURRENT_REQUESTS_PER_DOMAIN = 1  # per download slot, and our slot is the hostname: one connection per host
DOWNLOAD_TIMEOUT = 30  # larbin timeout_page base, seconds (LARBIN_TIMEOUT_BYTES_PER_SECOND adds to it)
DOWNLOAD_MAXSIZE = 5 * 1024 * 1024  # larbin maxPageSize-like cap: bigger bodies are dropped and counted
DOWNLOAD_WARNSIZE = 0
RETRY_TIMES = 1  # a broad crawl does not insist; dead IPs are dropped by the politeness middleware
REDIRECT_MAX_TIMES = 5
DEPTH_PRIORITY = 0
COOKIES_ENABLED = False  # broad crawls do not keep sessions
CONCURRENT_ITEMS = 2  # the scraper starts this many asyncio tasks per page: the default 100 costs ~15% CPU
REACTOR_THREADPOOL_MAXSIZE = 20  # DNS lookups run in the reactor thread pool
LOG_LEVEL = "INFO"
TELNETCONSOLE_ENABLED = False  # never open a code-running port by default
REMOTE_CONTROL_ENABLED = False
AJAXCRAWL_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
STATS_CLASS = "larbinscrapy.lean.stats.LeanStatsCollector"  # Scrapy's in-memory stats without a deprecation wrapper around every call
LOG_FORMATTER = "larbinscrapy.lean.logformatter.QuietLogFormatter"  # no per-page "Crawled"/"Scraped" DEBUG records unless LOG_LEVEL=DEBUG

SCHEDULER = "larbinscrapy.frontier.scheduler.LarbinScheduler"
DOWNLOADER = "larbinscrapy.lean.downloader.LeanDownloader"  # Scrapy's, its middleware chain without a coroutine per layer and per request
DUPEFILTER_CLASS = "larbinscrapy.seen.dupefilter.BitmapDupeFilter"
REQUEST_FINGERPRINTER_CLASS = "larbinscrapy.parse.urls.CanonicalUrlFingerprinter"
TWISTED_DNS_RESOLVER = "larbinscrapy.politeness.dns.PinnedResolver"
DOWNLOAD_HANDLERS = {  # larbin's page timeout (DOWNLOAD_TIMEOUT + 1 s per LARBIN_TIMEOUT_BYTES_PER_SECOND bytes)
    "http": "larbinscrapy.fetch.deadline.PageDeadlineHandler",
    "https": "larbinscrapy.fetch.deadline.PageDeadlineHandler",
}

SPIDER_MIDDLEWARES = {
    # larbin check(): filters + cheap seen test, turning page links into requests
    "larbinscrapy.middlewares.gate.LinkGateMiddleware": 10,
    # The gate does their work (URL length, depth): each extra spider middleware
    # is an async-generator layer over every output of every page.
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
    # Scrapy's start and referer middlewares without their layer over every page's output:
    # the gate sets Referer (same policies and settings) on what it lets through.
    "scrapy.spidermiddlewares.start.StartSpiderMiddleware": None,
    "larbinscrapy.lean.folded.StartOnlyMiddleware": 25,
    "scrapy.spidermiddlewares.referer.RefererMiddleware": None,
    "larbinscrapy.lean.folded.GateRefererMiddleware": 700,
}
DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "larbinscrapy.middlewares.robots.RobotsMiddleware": 100,
    "larbinscrapy.status.gate.PauseGate": 960,  # holds every request while paused (status page)
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,  # the gate's domain filter
    "scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware": None,  # PageDeadlineHandler times pages
    "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,  # no credentials in broad crawls
    "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,  # links.extract follows the target
    # Scrapy's bounded decompression, its bomb refusals counted (larbin/dropped/decompression_bomb)
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "larbinscrapy.fetch.checktype.BoundedDecompressionMiddleware": 590,
    # larbin checkType: non-HTML answers stopped at their headers (after politeness saw them)
    "larbinscrapy.fetch.checktype.ContentTypeMiddleware": 940,
    # the same downloader/* stats at a fifth of the cost per page
    "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
    "larbinscrapy.lean.folded.DownloaderStatsMiddleware": 850,
    # redirect targets pass the link gate's URL filters (same priority as Scrapy's)
    "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
    "larbinscrapy.middlewares.redirect.FilteredRedirectMiddleware": 600,
    # per-IP politeness, DNS pinning and the SSRF guard, right before the download
    "larbinscrapy.middlewares.politeness.PolitenessMiddleware": 950,
    # LARBIN_REVISIT: conditional GET on revisits; below retry/redirect, so it sees final outcomes
    "larbinscrapy.revisit.middleware.ConditionalGetMiddleware": 540,
}
# Scrapy's base lists less three components that are off by default and cost start-up only to be
# imported (Scrapy imports every key of these dicts, even one set to None): the remote-control
# extension (aiohttp, ~120 ms; REMOTE_CONTROL_ENABLED is off), the cookies middleware
# (tldextract, ~45 ms; COOKIES_ENABLED is off) and the telnet console (twisted.conch, ~2 ms;
# TELNETCONSOLE_ENABLED is off); larbinscrapy's shims import the last two only when turned on.
EXTENSIONS_BASE = {  # Scrapy's, without RemoteControl (to use it: add it to EXTENSIONS and set REMOTE_CONTROL_ENABLED), its TelnetConsole built only when TELNETCONSOLE_ENABLED
    **{k: v for k, v in scrapy_defaults.EXTENSIONS_BASE.items()
       if k not in ("scrapy.extensions.remote_control.RemoteControl",
                    "scrapy.extensions.telnet.TelnetConsole")},
    "larbinscrapy.lean.optional.TelnetConsole": 0,
}
DOWNLOADER_MIDDLEWARES_BASE = {  # Scrapy's, its CookiesMiddleware built only when COOKIES_ENABLED
    **{k: v for k, v in scrapy_defaults.DOWNLOADER_MIDDLEWARES_BASE.items()
       if k != "scrapy.downloadermiddlewares.cookies.CookiesMiddleware"},
    "larbinscrapy.lean.optional.CookiesMiddleware": 700,
}
ITEM_PIPELINES = {
    # Each raises NotConfigured unless its LARBIN_* setting turns it on (docs/pipelines.md).
    "larbinscrapy.pipelines.contentdup.ContentDupPipeline": 100,  # larbin NO_DUP, on
    "larbinscrapy.pipelines.simplesave.SimpleSavePipeline": 300,  # LARBIN_SIMPLE_SAVE
    "larbinscrapy.pipelines.mirrorsave.MirrorSavePipeline": 310,  # LARBIN_MIRROR_SAVE
    "larbinscrapy.pipelines.warc.WarcPipeline": 320,  # LARBIN_WARC
    "larbinscrapy.pipelines.sqlite_example.SQLitePipeline": 500,  # LARBIN_SQLITE_PATH (docs/pipelines.md)
}
EXTENSIONS = {
    "larbinscrapy.jobdir.JobDirCheck": -1,  # before Scrapy's SpiderState creates JOBDIR: one clear line
    "scrapy.extensions.spiderstate.SpiderState": None,  # truncates spider.state before writing it
    "larbinscrapy.jobdir.AtomicSpiderState": 0,
    "larbinscrapy.status.statsfile.StatsFile": 500,  # on when LARBIN_STATS_FILE is set
    "larbinscrapy.revisit.extension.RevisitExtension": 510,  # on when LARBIN_REVISIT is set
    "larbinscrapy.seeds.sitemaps.SitemapReader": 520,  # on when LARBIN_SITEMAPS is set
    "scrapy.extensions.logstats.LogStats": None,  # replaced by the broad-crawl line below
    "larbinscrapy.status.logline.CrawlLogLine": 0,  # every LOGSTATS_INTERVAL: rates, queues, IPs
    "larbinscrapy.status.extension.StatusServer": 530,  # larbin httpPort/inputPort (LARBIN_HTTP_*)
    "larbinscrapy.lean.gcfreeze.StartupFreeze": 1000,  # LARBIN_GC_FREEZE: start-up objects out of the collector's way
}
ADDONS = {"larbinscrapy.larbinconf.LarbinConfAddon": 0}  # reads LARBIN_CONF (larbin.conf)
COMMANDS_MODULE = "larbinscrapy.commands"  # scrapy addurls; scrapy crawl exits 1 when a crawl stops on a fatal error

# --- Seeds and link following (spider arguments override these) ---------------------------
LARBIN_SEEDS = ""  # path of the seeds file (one URL per line); -a seeds=... overrides
LARBIN_URLS = ""  # comma-separated seed URLs; -a urls=... overrides
LARBIN_DEPTH = 5  # larbin depthInSite: link depth followed inside one site (-a depth=)
LARBIN_DOMAINS = ""  # larbin limitToDomain: comma-separated host suffixes, empty = all (-a domains=)
LARBIN_EXTERNAL = True  # follow links to other hosts (larbin noExternalLinks = not this) (-a external=)
LARBIN_IMAGES = False  # also follow <img src> (-a images=)

# --- Filters before the frontier (larbin check()/filter1()) ----------------------------------
LARBIN_FORBIDDEN_EXTENSIONS = (
    ".tar .gz .tgz .zip .Z .rpm .deb .ps .dvi .pdf .png .jpg .jpeg .bmp .smi .tiff .gif"
    " .mov .avi .mpeg .mpg .mp3 .qt .wav .ram .rm .jar .java .class .diff .doc .xls .ppt"
    " .mdb .rtf .exe .pps .so .psd"
)  # larbin.conf forbiddenExtensions: never queued (case-insensitive)
LARBIN_MAX_URL_LENGTH = 512  # larbin maxUrlSize: longer URLs are dropped
LARBIN_CGI_LEVEL = 0  # larbin CGILEVEL: 0 all URLs, 1 none with ? or =, 2 also none with "cgi"

# --- Robots meta (the spider; larbinscrapy/parse/links.py) ---------------------------------------
LARBIN_OBEY_NOFOLLOW = True  # obey <meta name=robots|BOT_NAME content=nofollow>, X-Robots-Tag and rel="nofollow"
LARBIN_OBEY_NOINDEX = True  # noindex pages: item["noindex"] = True and storage pipelines skip them

# --- Bounded memory per response (the spider) ----------------------------------------------
LARBIN_MAX_LINKS_PER_PAGE = 10_000  # links kept from one page (item links and the gate); the rest counted as page_links; 0 = all

# --- Trap defence (larbinscrapy/gate/urlfilter.py, larbinscrapy/gate/traps.py); 0 turns a test off ------
LARBIN_MAX_PATH_SEGMENTS = 20  # URLs with more path segments are dropped (path_segments)
LARBIN_MAX_PATH_REPEATS = 2  # a run of path segments repeated more often in a row is a trap (path_repeat)
LARBIN_MAX_PAGES_PER_SITE = 100_000  # new URLs queued per site, then the rest are dropped (site_budget)
LARBIN_MAX_QUERIES_PER_PATH = 1000  # distinct query strings queued per site + path (queries: calendars, sort orders)

# --- Frontier (the scheduler) --------------------------------------------------------------
LARBIN_MAX_URLS_PER_SITE = 40  # larbin maxUrlsBySite: in-memory queue per site; overflow waits on disk
LARBIN_SEGMENT_URLS = 10_000  # URLs per on-disk FIFO segment file (larbin PersistentFifo: 10,000)
LARBIN_PRIORITY_EXTENSIONS = ""  # larbin specificSearch: extensions queued in the priority tier
LARBIN_SAVE_CONTENT_TYPES = ""  # larbin checkType: types downloaded besides HTML ("application/pdf image/ *"); others stop at the headers
LARBIN_CHECKPOINT_INTERVAL = 1.0  # seconds between flushes of queue files and checkpoint
LARBIN_LOADED_SITES = 2000  # sites with URLs in memory at once (larbin: namedSiteListSize cap)

# --- Dupefilter (larbin hashTable) ---------------------------------------------------------
LARBIN_DUPEFILTER_MODE = "scalable"  # "scalable" (Bloom filters that grow with the crawl), "bloom" (one, 1.8 bytes/URL at 0.1%) or "bitmap" (larbin: one hash, FP grows)
LARBIN_DUPEFILTER_BITS = 64_000_000  # bitmap size in bits (larbin hashSize: 64,000,000 = 8 MB)
LARBIN_DUPEFILTER_CAPACITY = 10_000_000  # bloom: URLs it is sized for; scalable: URLs of its first filter
LARBIN_DUPEFILTER_ERROR_RATE = 0.001  # bloom, scalable: target false-positive rate; bitmap: warning threshold
LARBIN_DUPEFILTER_GROWTH = 2  # scalable: each next filter holds this many times the URLs of the last
LARBIN_DUPEFILTER_TIGHTENING = 0.5  # scalable: each next filter's error rate is this times the last's
LARBIN_DUPEFILTER_URL_CACHE = 65_536  # link gate: recent raw links remembered (x2 generations, ~75 bytes each) to skip filtering and hashing repeats; 0 = off
LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL = 300  # seconds between snapshots (journal in between)
LARBIN_DUPEFILTER_RESET_CORRUPT = False  # start clean if the snapshot is corrupt, instead of failing

# --- Politeness, DNS, SSRF (larbin NamedSite / IPSite) -------------------------------------
LARBIN_RESOLVE = {}  # resolver override, like curl --resolve: {"host.test": "127.0.1.1"} (JSON)
LARBIN_DNS_TTL = 3600  # seconds a resolved address (or a failure) is kept
LARBIN_DNS_TIMEOUT = 10  # seconds before a lookup counts as failed
LARBIN_MAX_CRAWL_DELAY = 30  # cap on robots.txt Crawl-delay, seconds
LARBIN_TIMEOUT_BYTES_PER_SECOND = 2000  # larbin: page timeout grows 1 s per this many bytes
LARBIN_HTTP_HANDLER = "larbinscrapy.lean.http1.LeanHttpDownloadHandler"  # what PageDeadlineHandler wraps: plain http on llhttp (larbinscrapy/lean/http1.py), the rest delegated to Scrapy's HTTP11DownloadHandler (set it to go back)
LARBIN_HTTP1_IDLE_TIMEOUT = 240.0  # seconds an idle keep-alive connection is kept (Twisted's pool: 240)
LARBIN_IP_MAX_FAILURES = 3  # consecutive timeouts/refusals before an IP is dropped (noConnection)
LARBIN_IP_BACKOFF = 10.0  # extra delay after each consecutive failure, seconds
# host and IP levels, throttling answers, bandwidth (larbinscrapy/politeness/hosts.py; README "Politeness")
LARBIN_IP_DELAY = 0.25  # seconds from the end of one fetch to the next start on one IP (all its hostnames); at most DOWNLOAD_DELAY
LARBIN_IP_CONNECTIONS = 1  # fetches open to one IP at once
LARBIN_MAX_RETRY_AFTER = 3600.0  # longest Retry-After honoured, seconds; a host asking more is set aside
LARBIN_THROTTLE_BACKOFF = 60.0  # pause after a 429 without Retry-After, seconds; doubles per answer in a row
LARBIN_THROTTLE_MAX_BACKOFF = 86400.0  # the doubling back-off stops growing here, seconds
LARBIN_THROTTLE_MAX_IN_A_ROW = 10  # throttling answers in a row (no normal one between) before a host is set aside; 0 = never
LARBIN_MAX_BANDWIDTH = 0  # bytes per second received over the whole crawl (larbin MAXBANDWIDTH); 0 = no cap
LARBIN_FROM = ""  # From header: the crawler operator's contact address (RFC 9110); empty = not sent
LARBIN_SSRF_GUARD = True  # refuse private, loopback, link-local, multicast and reserved IPs
LARBIN_ALLOWED_NETWORKS = ""  # comma-separated CIDRs the guard lets through (tests: 127.0.0.0/8)

# --- Distributed mode (settings/distributed.py turns it on; docs/distributed.md) -------------
LARBIN_REDIS_FRONTIER_KEY = "%(spider)s:frontier"  # prefix of every frontier key (a cluster adds each shard's hash tag in front)
LARBIN_REDIS_CLUSTER = False  # True: REDIS_URL names any node of a Redis Cluster; the frontier is sharded by host over it
LARBIN_REDIS_SHARDS = 32  # cluster only: shards (hash tags spread evenly over the slots) that hosts are hashed into
LARBIN_REDIS_DUPEFILTER_KEY = "%(spider)s:seen"  # the seen-URL bit string (split in 2^32-bit strings past 512 MiB)
LARBIN_REDIS_CONTENTDUP_KEY = "%(spider)s:contentdup"  # hash: content hash -> first URL
LARBIN_LEASE_TIMEOUT = 60.0  # seconds without a heartbeat before a worker's leased requests go back to the queue
LARBIN_IDLE_BEFORE_CLOSE = 5.0  # seconds the shared frontier must stay empty with nothing leased before a worker closes
LARBIN_REDIS_OUTAGE_TIMEOUT = 30.0  # seconds Redis may stay unreachable mid-crawl before a worker stops (exit 1); 0: wait for ever
LARBIN_KEEP_ALIVE = False  # True: never close on an empty frontier, wait for new seeds (scrapy-redis's habit)
LARBIN_ALLOW_NO_SEEDS = False  # start without seeds (distributed workers take them from Redis)
REDIS_URL = "redis://127.0.0.1:6379/0"  # scrapy-redis's connection setting (REDIS_PARAMS adds client options)
REDIS_START_URLS_KEY = "%(name)s:start_urls"  # list workers read seeds from: redis-cli lpush larbin:start_urls URL
REDIS_START_URLS_BATCH_SIZE = 100  # seeds taken from that list per read (every 0.25 s)
SCHEDULER_PERSIST = True  # keep frontier and seen bits when a crawl finishes (False: the last worker deletes them)

# --- Start-up (larbinscrapy/lean/gcfreeze.py) ----------------------------------------------------
LARBIN_GC_FREEZE = True  # gc.freeze() at engine start: full collections (and the exit) skip the ~70k objects built before it

# --- Status -------------------------------------------------------------------------------
LARBIN_STATS_FILE = ""  # write the crawl's stats as JSON here (larbin's status page); empty = off
LARBIN_STATS_INTERVAL = 10.0  # seconds between rewrites of LARBIN_STATS_FILE while crawling

# --- Status page, control API, metrics (larbin httpPort/inputPort; larbinscrapy/status/) ------
LARBIN_HTTP_HOST = "127.0.0.1"  # address of the status page; outside loopback needs LARBIN_HTTP_ALLOW_REMOTE
LARBIN_HTTP_PORT = [8081, 8181]  # larbin httpPort: the first free port of this range; 0 or empty = off
LARBIN_HTTP_TOKEN = ""  # API token; empty = a random one per run (written to JOBDIR/http-token, 0600)
LARBIN_HTTP_ALLOW_REMOTE = False  # allow a LARBIN_HTTP_HOST outside loopback (plain HTTP: logs a warning)
LARBIN_HTTP_HISTORY = 3600  # seconds of rates the charts keep (larbin's page: the last hour)
LARBIN_HTTP_SAMPLE_INTERVAL = 1.0  # seconds between samples of the rates
LARBIN_HTTP_BUSIEST_HOSTS = 10  # hosts listed by pages fetched
LARBIN_HTTP_MAX_BODY = 1_048_576  # bytes: a bigger POST body is refused (413)
LARBIN_HTTP_MAX_URLS = 10_000  # URLs in one POST /api/urls
LARBIN_CONF = ""  # larbin.conf to read into these settings (unknown keys warned; -s still wins)

# --- Pipelines (larbin NO_DUP, SIMPLE_SAVE, MIRROR_SAVE) ------------------------------------
LARBIN_CONTENT_DUP = True  # drop pages whose body was already stored under another URL
LARBIN_NEAR_DUP_DISTANCE = 0  # simhash Hamming distance for near duplicates; 0 = off

# --- Feeds ---------------------------------------------------------------------------------
# Items carry the raw body for the storage pipelines; feeds (-O items.jsonl) leave it out.
FEED_EXPORT_FIELDS = [
    "url", "status", "depth", "referer", "fetched_at", "content_type", "length",
    "title", "keywords", "description", "links", "ip", "noindex", "canonical",
    "changed", "fetch_count",  # only with LARBIN_REVISIT (absent fields are not exported)
]
# Scrapy's JSON lines exporter with each item class's fields planned once (larbinscrapy.lean.exporters):
# the same bytes at ~40% of the CPU per item. Scrapy's other formats are unchanged.
FEED_EXPORTERS = {
    "jsonl": "larbinscrapy.lean.exporters.JsonLinesExporter",
    "jsonlines": "larbinscrapy.lean.exporters.JsonLinesExporter",
}  # JSON lines feeds: Scrapy's exporter, fields planned once per item class; other formats Scrapy's
LARBIN_CONTENT_DUP_FLUSH_INTERVAL = 1.0  # seconds between flushes of JOBDIR/contentdup/journal
LARBIN_SIMPLE_SAVE = False  # larbin SIMPLE_SAVE: bodies to save/dNNNNN/fNNNNN plus index.jsonl
LARBIN_SIMPLE_SAVE_DIR = "save"  # simple-save output directory
LARBIN_SIMPLE_SAVE_FILES_PER_DIR = 2000  # files per dNNNNN directory (larbin: 2,000)
LARBIN_MIRROR_SAVE = False  # larbin MIRROR_SAVE: bodies to mirror/<host>[_<port>]/<path>
LARBIN_MIRROR_DIR = "mirror"  # mirror-save output directory
LARBIN_WARC = False  # write WARC/1.1 request/response records (gzip per record)
LARBIN_WARC_DIR = "warc"  # WARC output directory
LARBIN_WARC_MAX_SIZE = 1_000_000_000  # bytes after which a WARC file is closed and the next opened
LARBIN_WARC_PREFIX = "larbin"  # WARC file names: <prefix>-<UTC timestamp>-<serial>.warc.gz
LARBIN_SQLITE_PATH = ""  # the docs/pipelines.md SQLite example: database file; empty = off
LARBIN_SQLITE_BATCH = 100  # SQLite example: rows per commit (also committed after 1 s)

# --- Revisits and sitemaps (larbinscrapy/revisit/, larbinscrapy/seeds/sitemaps.py) ----------------
LARBIN_REVISIT = False  # continuous crawl: refetch pages when due (the crawl then runs until stopped)
LARBIN_REVISIT_INTERVAL = 86400.0  # seconds from a page's first fetch to its first revisit
LARBIN_REVISIT_MIN = 3600.0  # shortest revisit interval, seconds
LARBIN_REVISIT_MAX = 30 * 86400.0  # longest revisit interval, seconds
LARBIN_REVISIT_STREAK = 5  # larbin's rule: this many unchanged fetches in a row multiply the interval, changed divide it
LARBIN_REVISIT_FACTOR = 2.0  # what the interval is multiplied or divided by after a streak
LARBIN_REVISIT_BUCKET = 300.0  # seconds of due time per schedule file; a due page waits at most this long
LARBIN_REVISIT_INFLIGHT = 10_000  # due pages handed to the frontier and not yet fetched, at most
LARBIN_REVISIT_LEASE = 3600.0  # seconds a due page may stay unfetched in the frontier before it is rescheduled
LARBIN_REDIS_REVISIT_KEY = "%(spider)s:revisit"  # distributed: prefix of the schedule's keys (:due, :flight, :state)
LARBIN_SITEMAPS = True  # read each site's sitemaps (robots.txt Sitemap: lines, else /sitemap.xml); False = off
LARBIN_SITEMAP_PRIORITY = "normal"  # frontier tier of sitemap URLs: "priority" or "normal"
LARBIN_SITEMAP_MAX_FILES = 20  # sitemap files (indexes included) read per site
LARBIN_SITEMAP_MAX_URLS = 50_000  # URLs taken from one sitemap file (the protocol's limit)
LARBIN_SITEMAP_MAX_BYTES = 50 * 1024 * 1024  # bytes of one sitemap file, uncompressed (the protocol's limit)
