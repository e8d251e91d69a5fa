"""Every larbinscrapy setting: its default, what it takes and what it means, one line each.

``LarbinAddon`` (``larbinscrapy/addon.py``) installs these at the ``addon`` priority, so a
project's own ``settings.py`` still wins; this repository's profile (``settings/base.py``)
imports them. Plain values after ``publish`` (what Scrapy sees); ``SETTINGS`` keeps the
declarations, which ``larbinscrapy.conf.check.check`` uses at start and ``docs/settings_table.py``
turns into ``docs/settings.md``. Where Scrapy already has a setting with the meaning we need
(``DOWNLOAD_DELAY``, ``DEPTH_LIMIT``, ``JOBDIR``, ``ROBOTSTXT_OBEY``...), we use Scrapy's name.

To add a setting: one line ``LARBIN_<COMPONENT>_<OPTION> = Setting(default, kind, range...,
doc="what it means")`` in its section, then ``python docs/settings_table.py``.
"""

from __future__ import annotations

from larbinscrapy.conf.check import Setting, publish

# --- Scrapy settings we set on purpose -----------------------------------------------------
USER_AGENT = Setting(
    "larbinscrapy/0.1 (+https://github.com/larbinscrapy/larbinscrapy)",
    doc="a placeholder: set your own, with a contact URL (and LARBIN_FROM), before crawling the real web",
)
ROBOTSTXT_OBEY = Setting(True, doc="robots.txt through our fixed subclass of Scrapy's middleware")
ROBOTSTXT_PARSER = Setting(
    "larbinscrapy.politeness.robotstxt.RobotsTxtParser",
    doc="RFC 9309 as Google's parser reads it, for the product token; compact rules per site",
)
DOWNLOAD_DELAY = Setting(
    1.0,
    float,
    min=0,
    doc="larbin waitDuration, per hostname: seconds from the end of one fetch to the next start",
)
DOWNLOAD_DELAY_JITTER = Setting(0, doc="politeness is exact per IP; jitter only lowers throughput")
CONCURRENT_REQUESTS = Setting(
    128, int, min=1, doc="connections in flight over all IPs (larbin nb_conn)"
)
CONCURRENT_REQUESTS_PER_DOMAIN = Setting(
    1, int, min=1, doc="per download slot, and our slot is the hostname: one connection per host"
)
DOWNLOAD_TIMEOUT = Setting(
    30,
    float,
    above=0,
    doc="larbin timeout_page base, seconds (LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND adds to it)",
)
DOWNLOAD_MAXSIZE = Setting(
    5 * 1024 * 1024,
    int,
    min=0,
    doc="larbin maxPageSize-like cap: bigger bodies are dropped and counted; 0 = no cap",
)
DOWNLOAD_WARNSIZE = Setting(
    0, int, min=0, doc="no warning per big page: DOWNLOAD_MAXSIZE is the one limit"
)
RETRY_TIMES = Setting(
    1,
    int,
    min=0,
    doc="a broad crawl does not insist; dead IPs are dropped by the politeness middleware",
)
RETRY_GIVE_UP_LOG_LEVEL = Setting(
    "DEBUG",
    doc="a page still failing after its retry is normal on the web: counted in retry/max_reached, not an ERROR",
)
REDIRECT_MAX_TIMES = Setting(
    5, int, min=0, doc="RFC 9309's minimum for robots.txt, and enough for pages"
)
DEPTH_LIMIT = Setting(
    0,
    int,
    min=0,
    doc="link depth from the seeds, over all sites; 0 = no limit (LARBIN_DEPTH counts inside one site)",
)
AUTOTHROTTLE_ENABLED = Setting(
    False,
    bool,
    doc="Scrapy's AutoThrottle: adapts each host's delay to its latency (the politeness middleware keeps its floor)",
)
AUTOTHROTTLE_START_DELAY = Setting(
    5.0, float, min=0, doc="AutoThrottle's first delay, seconds (Scrapy's default)"
)
AUTOTHROTTLE_MAX_DELAY = Setting(
    60.0, float, min=0, doc="AutoThrottle's longest delay, seconds (Scrapy's default)"
)
AUTOTHROTTLE_TARGET_CONCURRENCY = Setting(
    1.0, float, above=0, doc="AutoThrottle's requests in flight per host (Scrapy's default)"
)
AUTOTHROTTLE_DEBUG = Setting(
    False, bool, doc="AutoThrottle logs every response's delay (Scrapy's default)"
)
DEPTH_PRIORITY = Setting(0, doc="the frontier orders by site and tier, not by depth")
COOKIES_ENABLED = Setting(False, doc="broad crawls do not keep sessions")
CONCURRENT_ITEMS = Setting(
    2,
    int,
    min=1,
    doc="the scraper starts this many asyncio tasks per page: the default 100 is costly (RESULTS.md)",
)
REACTOR_THREADPOOL_MAXSIZE = Setting(
    20,
    int,
    min=1,
    doc="the reactor's thread pool (DNS does not use it: c-ares, larbinscrapy/politeness/resolver.py)",
)
LOG_LEVEL = Setting("INFO", doc="DEBUG logs every page and request")
LOGSTATS_INTERVAL = Setting(
    60.0,
    float,
    min=0,
    doc="seconds between the crawl's log lines (CrawlLogLine, Scrapy's default); 0 = none",
)
TELNETCONSOLE_ENABLED = Setting(False, doc="never open a code-running port by default")
REMOTE_CONTROL_ENABLED = Setting(
    False, doc="the status page's API (LARBIN_STATUS_*) is the control port"
)
AJAXCRAWL_ENABLED = Setting(False, doc="a scan of every page for a meta tag almost no site uses")
FEED_EXPORT_ENCODING = Setting("utf-8", doc="feeds in UTF-8, not \\u escapes")

SCHEDULER = Setting(
    "larbinscrapy.frontier.scheduler.LarbinScheduler",
    doc="larbin's frontier: per-site queues, per-IP politeness, overflow on disk",
)
DUPEFILTER_CLASS = Setting(
    "larbinscrapy.seen.dupefilter.BitmapDupeFilter",
    doc="larbin hashTable: the seen-URL set (LARBIN_DUPEFILTER_*)",
)
REQUEST_FINGERPRINTER_CLASS = Setting(
    "larbinscrapy.parse.urls.CanonicalUrlFingerprinter",
    doc="one fingerprint per canonical URL (larbin's URL hash)",
)
TWISTED_DNS_RESOLVER = Setting(
    "larbinscrapy.politeness.dns.PinnedResolver",
    doc="each host resolved once, pinned to the IP the politeness and SSRF checks saw",
)
DOWNLOAD_HANDLERS = Setting(
    {
        "http": "larbinscrapy.fetch.deadline.PageDeadlineHandler",
        "https": "larbinscrapy.fetch.deadline.PageDeadlineHandler",
    },
    doc="larbin's page timeout (DOWNLOAD_TIMEOUT + 1 s per LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND bytes)",
)

SPIDER_MIDDLEWARES = Setting(
    {
        # larbin check(): filters + cheap seen test, turning page links into requests
        "larbinscrapy.middlewares.gate.LinkGateMiddleware": 10,
        # The gate does their work (URL length, depth): each extra spider middleware
        # is an async-generator layer over every output of every page.
        "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
        "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
        "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
    },
    doc="the link gate (larbin check()); Scrapy's URL length, depth and referer work folded into it",
)
DOWNLOADER_MIDDLEWARES = Setting(
    {
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "larbinscrapy.middlewares.robots.RobotsMiddleware": 100,
        "larbinscrapy.middlewares.pause.PauseGate": 960,  # holds every request while paused (status page)
        "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,  # the gate's domain filter
        "scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware": None,  # PageDeadlineHandler times pages
        "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,  # no credentials in broad crawls
        "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,  # links.extract follows the target
        # Scrapy's bounded decompression, its bomb refusals counted (larbin/dropped/decompression_bomb)
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
        "larbinscrapy.middlewares.checktype.BoundedDecompressionMiddleware": 590,
        # larbin checkType: non-HTML answers stopped at their headers (after politeness saw them)
        "larbinscrapy.middlewares.checktype.ContentTypeMiddleware": 940,
        # redirect targets pass the link gate's URL filters (same priority as Scrapy's)
        "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
        "larbinscrapy.middlewares.redirect.FilteredRedirectMiddleware": 600,
        # per-IP politeness, DNS pinning and the SSRF guard, right before the download
        "larbinscrapy.middlewares.politeness.PolitenessMiddleware": 950,
        # LARBIN_REVISIT: conditional GET on revisits; below retry/redirect, so it sees final outcomes
        "larbinscrapy.middlewares.conditional.ConditionalGetMiddleware": 540,
    },
    doc="robots.txt (RFC 9309), politeness, DNS pinning and the SSRF guard, checkType, filtered redirects",
)
ITEM_PIPELINES = Setting(
    {
        # Each raises NotConfigured unless its LARBIN_* setting turns it on (docs/pipelines.md).
        "larbinscrapy.pipelines.contentdup.ContentDupPipeline": 100,  # larbin NO_DUP, on
        "larbinscrapy.pipelines.simplesave.SimpleSavePipeline": 300,  # LARBIN_SIMPLE_SAVE
        "larbinscrapy.pipelines.mirrorsave.MirrorSavePipeline": 310,  # LARBIN_MIRROR_SAVE
        "larbinscrapy.pipelines.warc.WarcPipeline": 320,  # LARBIN_WARC
        "larbinscrapy.pipelines.sqlite_example.SQLitePipeline": 500,  # LARBIN_SQLITE_PATH (docs/pipelines.md)
    },
    doc="content duplicates, simple save, mirror save, WARC, the SQLite example: each off unless its LARBIN_* setting turns it on (the first is on)",
)
EXTENSIONS = Setting(
    {
        "larbinscrapy.jobdir.JobDirCheck": -1,  # before Scrapy's SpiderState creates JOBDIR: one clear line
        "scrapy.extensions.spiderstate.SpiderState": None,  # truncates spider.state before writing it
        "larbinscrapy.jobdir.AtomicSpiderState": 0,
        "larbinscrapy.status.statsfile.StatsFile": 500,  # on when LARBIN_STATS_FILE is set
        "larbinscrapy.pipelines.receipts.ItemReceipts": 505,  # a page is acknowledged once its items are stored
        "larbinscrapy.revisit.extension.RevisitExtension": 510,  # on when LARBIN_REVISIT is set
        "larbinscrapy.seeds.sitemaps.SitemapReader": 520,  # on when LARBIN_SITEMAPS is set
        "scrapy.extensions.logstats.LogStats": None,  # replaced by the broad-crawl line below
        "larbinscrapy.status.logline.CrawlLogLine": 0,  # every LOGSTATS_INTERVAL: rates, queues, IPs
        "larbinscrapy.status.extension.StatusServer": 530,  # larbin httpPort/inputPort (LARBIN_STATUS_*)
        "larbinscrapy.fetch.inflight.InFlightSizer": 540,  # on when LARBIN_FETCH_IN_FLIGHT_MAX and the connections cap exceed CONCURRENT_REQUESTS
    },
    doc="JOBDIR checks and atomic spider state, stats file, revisits, sitemaps, the crawl log line, the status page, requests in flight sized",
)

# --- Seeds and link following (spider arguments override these) ---------------------------
LARBIN_SEEDS = Setting(
    "", str, doc="path of the seeds file (one URL per line); -a seeds=... overrides"
)
LARBIN_URLS = Setting("", str, doc="comma-separated seed URLs; -a urls=... overrides")
LARBIN_DEPTH = Setting(
    5,
    int,
    min=-1,
    doc="larbin depthInSite: link depth followed inside one site, -1 = no limit (-a depth=)",
)
LARBIN_DOMAINS = Setting(
    "",
    parse="larbinscrapy.gate.urlfilter.parse_domains",
    takes="comma-separated host suffixes",
    doc="larbin limitToDomain: comma-separated host suffixes, empty = all (-a domains=)",
)
LARBIN_EXTERNAL = Setting(
    True, bool, doc="follow links to other hosts (larbin noExternalLinks = not this) (-a external=)"
)
LARBIN_IMAGES = Setting(False, bool, doc="also follow <img src> (-a images=)")

# --- Filters before the frontier (larbin check()/filter1()) ----------------------------------
LARBIN_GATE_FORBIDDEN_EXTENSIONS = Setting(
    ".tar .gz .tgz .zip .Z .rpm .deb .ps .dvi .pdf .png .jpg .jpeg .bmp .smi .tiff .gif"
    " .mov .avi .mpeg .mpg .mp3 .qt .wav .ram .rm .jar .java .class .diff .doc .xls .ppt"
    " .mdb .rtf .exe .pps .so .psd",
    parse="larbinscrapy.gate.urlfilter.parse_extensions",
    takes="extensions separated by spaces or commas",
    old="LARBIN_FORBIDDEN_EXTENSIONS",
    doc="larbin.conf forbiddenExtensions: never queued (case-insensitive)",
)
URLLENGTH_LIMIT = Setting(
    512,
    int,
    min=1,
    old="LARBIN_MAX_URL_LENGTH",
    doc="larbin maxUrlSize (Scrapy's name): longer URLs and seed lines are dropped; Scrapy's 0 = no limit is refused",
)
LARBIN_GATE_CGI_LEVEL = Setting(
    0,
    int,
    min=0,
    max=2,
    old="LARBIN_CGI_LEVEL",
    doc='larbin CGILEVEL: 0 all URLs, 1 none with ? or =, 2 also none with "cgi"',
)

# --- Robots meta (the spider; larbinscrapy/parse/links.py) ---------------------------------------
LARBIN_OBEY_NOFOLLOW = Setting(
    True,
    bool,
    doc='obey <meta name=robots|BOT_NAME content=nofollow>, X-Robots-Tag and rel="nofollow"',
)
LARBIN_OBEY_NOINDEX = Setting(
    True, bool, doc='noindex pages: item["noindex"] = True and storage pipelines skip them'
)

# --- Bounded memory per response (the spider) ----------------------------------------------
LARBIN_LINKS_PER_PAGE_MAX = Setting(
    10_000,
    int,
    min=0,
    old="LARBIN_MAX_LINKS_PER_PAGE",
    doc="links kept from one page (item links and the gate); the rest counted as page_links; 0 = all",
)

# --- Trap defence (larbinscrapy/gate/urlfilter.py, larbinscrapy/gate/traps.py); 0 turns a test off ------
LARBIN_GATE_PATH_SEGMENTS_MAX = Setting(
    20,
    int,
    min=0,
    old="LARBIN_MAX_PATH_SEGMENTS",
    doc="URLs with more path segments are dropped (path_segments); 0 = no limit",
)
LARBIN_GATE_PATH_REPEATS_MAX = Setting(
    2,
    int,
    min=0,
    old="LARBIN_MAX_PATH_REPEATS",
    doc="a run of path segments repeated more often in a row is a trap (path_repeat); 0 = off",
)
LARBIN_GATE_PAGES_PER_SITE_MAX = Setting(
    100_000,
    int,
    min=0,
    old="LARBIN_MAX_PAGES_PER_SITE",
    doc="new URLs queued per site, then the rest are dropped (site_budget); 0 = no limit",
)
LARBIN_GATE_QUERIES_PER_PATH_MAX = Setting(
    1000,
    int,
    min=0,
    old="LARBIN_MAX_QUERIES_PER_PATH",
    doc="distinct query strings queued per site + path (queries: calendars, sort orders); 0 = no limit",
)

# --- Frontier (the scheduler) --------------------------------------------------------------
LARBIN_FRONTIER_URLS_PER_SITE_MAX = Setting(
    40,
    int,
    min=1,
    old="LARBIN_MAX_URLS_PER_SITE",
    doc="larbin maxUrlsBySite: in-memory queue per site; overflow waits on disk",
)
LARBIN_FRONTIER_SEGMENT_URLS = Setting(
    10_000,
    int,
    min=1,
    old="LARBIN_SEGMENT_URLS",
    doc="URLs per on-disk FIFO segment file (larbin PersistentFifo: 10,000)",
)
LARBIN_FRONTIER_PICKLE = Setting(
    False,
    bool,
    doc="store request meta values JSON cannot hold by pickle (else such requests stay in memory)",
)
LARBIN_FRONTIER_PRIORITY_EXTENSIONS = Setting(
    "",
    parse="larbinscrapy.gate.urlfilter.parse_extensions",
    takes="extensions separated by spaces or commas",
    old="LARBIN_PRIORITY_EXTENSIONS",
    doc="larbin specificSearch: extensions queued in the priority tier",
)
LARBIN_FETCH_CONTENT_TYPES = Setting(
    "",
    parse="larbinscrapy.fetch.checktype.parse_content_types",
    takes="MIME types separated by spaces or commas",
    old="LARBIN_SAVE_CONTENT_TYPES",
    doc='larbin checkType: types downloaded besides HTML ("application/pdf image/*"); others stop at the headers',
)
LARBIN_FRONTIER_CHECKPOINT_INTERVAL = Setting(
    1.0,
    float,
    above=0,
    old="LARBIN_CHECKPOINT_INTERVAL",
    doc="seconds between flushes of queue files and checkpoint",
)
LARBIN_FRONTIER_LOADED_SITES_MAX = Setting(
    2000,
    int,
    min=1,
    old="LARBIN_LOADED_SITES",
    doc="sites with URLs in memory at once, counted as full sites: the frontier holds at most this x LARBIN_FRONTIER_URLS_PER_SITE_MAX URLs in memory, so more sites when most hold one or two (larbin: namedSiteListSize cap)",
)

# --- Dupefilter (larbin hashTable) ---------------------------------------------------------
LARBIN_DUPEFILTER_MODE = Setting(
    "scalable",
    str,
    choices=("scalable", "bloom", "bitmap"),
    doc='"scalable" (Bloom filters that grow with the crawl), "bloom" (one, 1.8 bytes/URL at 0.1%) or "bitmap" (larbin: one hash, FP grows)',
)
LARBIN_DUPEFILTER_BITS = Setting(
    64_000_000, int, min=8, doc="bitmap size in bits (larbin hashSize: 64,000,000 = 8 MB)"
)
LARBIN_DUPEFILTER_CAPACITY = Setting(
    10_000_000, int, min=1, doc="bloom: URLs it is sized for; scalable: URLs of its first filter"
)
LARBIN_DUPEFILTER_ERROR_RATE = Setting(
    0.001,
    float,
    above=0,
    below=1,
    doc="bloom, scalable: target false-positive rate; bitmap: warning threshold",
)
LARBIN_DUPEFILTER_GROWTH = Setting(
    2, int, min=2, doc="scalable: each next filter holds this many times the URLs of the last"
)
LARBIN_DUPEFILTER_TIGHTENING = Setting(
    0.5,
    float,
    above=0,
    below=1,
    doc="scalable: each next filter's error rate is this times the last's",
)
LARBIN_GATE_URL_CACHE = Setting(
    65_536,
    int,
    min=0,
    old="LARBIN_DUPEFILTER_URL_CACHE",
    doc="link gate: recent raw links remembered (x2 generations, as 64-bit hashes) to skip filtering and hashing repeats; 0 = off",
)
LARBIN_DUPEFILTER_SNAPSHOT_INTERVAL = Setting(
    300, float, above=0, doc="seconds between snapshots (journal in between)"
)
LARBIN_DUPEFILTER_RESET_CORRUPT = Setting(
    False, bool, doc="start clean if the snapshot is corrupt, instead of failing"
)

# --- Politeness, DNS, SSRF (larbin NamedSite / IPSite) -------------------------------------
LARBIN_RESOLVE: Setting[dict[str, str]] = Setting(
    {},
    parse="larbinscrapy.politeness.dns.parse_resolve",
    takes='a mapping of host to IP: a JSON object or "host:ip,host:ip"',
    doc='resolver override, like curl --resolve: {"host.test": "127.0.1.1"} (JSON)',
)
LARBIN_DNS_SERVERS = Setting(
    "",
    parse="larbinscrapy.politeness.dns.parse_servers",
    takes="comma-separated nameservers (ip, ip:port, [v6]:port)",
    doc="nameservers to ask instead of /etc/resolv.conf's (a broad crawl runs its own caching resolver); empty: the system's",
)
LARBIN_DNS_TTL_MIN = Setting(
    300, float, min=0, doc="an answer is kept at least this many seconds, whatever its TTL"
)
LARBIN_DNS_TTL_MAX = Setting(
    86400, float, min=0, doc="an answer is kept at most this many seconds, whatever its TTL"
)
LARBIN_DNS_NEGATIVE_TTL = Setting(
    300,
    float,
    min=0,
    doc="seconds an NXDOMAIN or a failed name is kept before it is asked again (RFC 2308)",
)
LARBIN_DNS_TTL = Setting(
    0,
    float,
    min=0,
    doc="deprecated: a fixed TTL for every answer (sets LARBIN_DNS_TTL_MIN and _MAX); 0: off",
)
DNS_TIMEOUT = Setting(
    30,
    float,
    above=0,
    old="LARBIN_DNS_TIMEOUT",
    doc="Scrapy's name: seconds one try of a name may take in all (resolv.conf's timeout and attempts apply inside it)",
)
LARBIN_DNS_RETRIES = Setting(
    2,
    int,
    min=0,
    doc="tries again of a name that timed out or got SERVFAIL/REFUSED, before its host is dropped",
)
LARBIN_DNS_RETRY_DELAY = Setting(
    5, float, min=0, doc="seconds before the first try again of a name; doubled for each next one"
)
LARBIN_DNS_LOSSY_RETRIES = Setting(
    3,
    int,
    min=0,
    doc="tries again of a name that timed out, beyond LARBIN_DNS_RETRIES (the delay doubling on), while the resolver is losing answers: another name was answered on a later try in the last 10 minutes",
)
LARBIN_DNS_IN_FLIGHT_MAX = Setting(
    500,
    int,
    min=1,
    doc="names being asked at once; more wait their turn (their timeout starts when asked)",
)
LARBIN_DNS_CACHE_MAX = Setting(
    100_000,
    int,
    min=1,
    doc="names whose answer (or failure) is kept; past that the older half is forgotten and asked again when met (larbin/dns/evicted), except names asked ahead of their turn and not yet used (at most a quarter of it; past that a name is asked at its turn)",
)
LARBIN_DNS_CNAME_MAX = Setting(
    8, int, min=0, doc="CNAME hops followed from a name before it counts as a cname_loop"
)
LARBIN_ROBOTS_CRAWL_DELAY_MAX = Setting(
    30, float, min=0, old="LARBIN_MAX_CRAWL_DELAY", doc="cap on robots.txt Crawl-delay, seconds"
)
LARBIN_FETCH_TIMEOUT_BYTES_PER_SECOND = Setting(
    2000,
    float,
    above=0,
    old="LARBIN_TIMEOUT_BYTES_PER_SECOND",
    doc="larbin: page timeout grows 1 s per this many bytes",
)
LARBIN_FETCH_HANDLER = Setting(
    "",
    parse="larbinscrapy.conf.check.import_path",
    takes="the import path of a download handler class",
    old="LARBIN_HTTP_HANDLER",
    doc="what PageDeadlineHandler wraps; empty: LARBIN_LEAN_ENGINE chooses (the lean handler of larbinscrapy/lean/http1.py, else Scrapy's HTTP11DownloadHandler)",
)
LARBIN_FETCH_IDLE_TIMEOUT = Setting(
    240.0,
    float,
    above=0,
    old="LARBIN_HTTP1_IDLE_TIMEOUT",
    doc="seconds an idle keep-alive connection is kept (Twisted's pool: 240)",
)
LARBIN_FETCH_IDLE_MAX = Setting(
    4096,
    int,
    min=0,
    doc="idle keep-alive connections kept at most, http and https together, the least recently used closed past it (an idle https connection holds OpenSSL's state, tens of KB: benchmarks/RESULTS.md; a broad crawl leaves thousands idle until their servers close them); 0: no cap but LARBIN_FETCH_CONNECTIONS_MAX",
)
LARBIN_IP_FAILURES_MAX = Setting(
    3,
    int,
    min=1,
    old="LARBIN_IP_MAX_FAILURES",
    doc="consecutive timeouts/refusals before an IP is dropped (noConnection)",
)
LARBIN_FETCH_IN_FLIGHT_MAX = Setting(
    1024,
    int,
    min=0,
    doc="requests in flight the crawl grows to from CONCURRENT_REQUESTS (never past the open connections' cap, LARBIN_FETCH_CONNECTIONS_MAX), a quarter a second while the downloader is full and the CPU has room (under 90% of a core): latency hidden without sizing CONCURRENT_REQUESTS by hand; at most CONCURRENT_REQUESTS (0): CONCURRENT_REQUESTS is fixed, as in Scrapy",
)
LARBIN_FETCH_CONNECTIONS_MAX = Setting(
    0,
    int,
    min=0,
    doc="open connections of the lean handler at most, http and https together (idle ones closed least recently used first at the cap); 0: RLIMIT_NOFILE less half of it, at most 256, kept for files",
)
LARBIN_IP_BACKOFF = Setting(
    10.0, float, min=0, doc="extra delay after each consecutive failure, seconds"
)
LARBIN_IP_FAILURE_WINDOW = Setting(
    20, int, min=1, doc="outcomes per IP remembered to judge its recent failure rate"
)
LARBIN_IP_FAILURE_RATE = Setting(
    0.5,
    float,
    min=0,
    max=1,
    doc="a URL's failure backs its IP off only above this share of the window",
)
LARBIN_ROBOTS_TTL = Setting(
    86400.0,
    float,
    above=0,
    doc="robots.txt rules expire after this, seconds (RFC 9309: at most 24 h)",
)
LARBIN_ROBOTS_RETRY = Setting(
    60.0,
    float,
    above=0,
    doc="first wait before an unreachable (5xx) robots.txt is fetched again, doubling",
)
LARBIN_ROBOTS_RETRY_MAX = Setting(
    300.0,
    float,
    above=0,
    doc="a robots.txt throttled (429, 503 + Retry-After) this long, seconds: the site is disallowed",
)
LARBIN_ROBOTS_RESIDENT_MAX = Setting(
    1_000_000,
    int,
    min=2,
    doc="sites whose robots.txt rules stay in memory (~200 bytes each); past that the least recently used half is forgotten and read again if met again, after the host's delay (larbin/robots/evicted); a failing site's back-off stays",
)
LARBIN_ROBOTS_UNAVAILABLE_DAYS = Setting(
    30.0, float, min=0, doc="a robots.txt unreachable this long is taken as absent (allow)"
)
# host and IP levels, throttling answers, bandwidth (larbinscrapy/politeness/hosts.py; docs/politeness.md)
LARBIN_IP_DELAY = Setting(
    0.25,
    float,
    min=0,
    doc="seconds between two requests to one IP (all its hostnames), from when the first was written: its latency is not added; at most DOWNLOAD_DELAY",
)
LARBIN_IP_CONNECTIONS = Setting(1, int, min=1, doc="fetches open to one IP at once")
LARBIN_IP_RESIDENT_MAX = Setting(
    10_000,
    int,
    min=1,
    doc="IPs whose politeness state stays in memory as objects; older idle ones are evicted (packed in a tuple, or forgotten when a new IP's)",
)
LARBIN_HOST_RESIDENT_MAX = Setting(
    10_000,
    int,
    min=1,
    doc="hostnames whose politeness state stays in memory as objects; older idle ones are evicted (packed in 50 bytes, or forgotten when a new host's)",
)
LARBIN_HOST_SILENT_TIMEOUT = Setting(
    10.0,
    float,
    min=0,
    doc="page timeout of a hostname's first fetch, seconds, until it answers once (its IP's connection, shared with every name on the address, is held meanwhile); one that stays silent is set aside, its URLs dropped (silent); 0: DOWNLOAD_TIMEOUT",
)
LARBIN_THROTTLE_RETRY_AFTER_MAX = Setting(
    3600.0,
    float,
    min=0,
    old="LARBIN_MAX_RETRY_AFTER",
    doc="longest Retry-After honoured, seconds; a host asking more is set aside",
)
LARBIN_THROTTLE_BACKOFF = Setting(
    60.0,
    float,
    min=0,
    doc="pause after a 429 without Retry-After, seconds; doubles per answer in a row",
)
LARBIN_THROTTLE_BACKOFF_MAX = Setting(
    86400.0,
    float,
    min=0,
    old="LARBIN_THROTTLE_MAX_BACKOFF",
    doc="the doubling back-off stops growing here, seconds",
)
LARBIN_THROTTLE_IN_A_ROW_MAX = Setting(
    10,
    int,
    min=0,
    old="LARBIN_THROTTLE_MAX_IN_A_ROW",
    doc="throttling answers in a row (no normal one between) before a host is set aside; 0 = never",
)
LARBIN_BANDWIDTH_MAX = Setting(
    0,
    float,
    min=0,
    old="LARBIN_MAX_BANDWIDTH",
    doc="bytes per second received over the whole crawl (larbin MAXBANDWIDTH); 0 = no cap",
)
LARBIN_FROM = Setting(
    "", str, doc="From header: the crawler operator's contact address (RFC 9110); empty = not sent"
)
LARBIN_SSRF_GUARD = Setting(
    True, bool, doc="refuse private, loopback, link-local, multicast and reserved IPs"
)
LARBIN_ALLOWED_NETWORKS = Setting(
    "",
    parse="larbinscrapy.politeness.dns.parse_networks",
    takes="comma-separated networks (CIDR)",
    doc="comma-separated CIDRs the guard lets through (tests: 127.0.0.0/8)",
)

# --- Distributed mode (settings/distributed.py turns it on; docs/distributed.md) -------------
LARBIN_REDIS_FRONTIER_KEY = Setting(
    "%(spider)s:frontier",
    parse="larbinscrapy.conf.check.key_template",
    takes="a key template with %(spider)s",
    doc="prefix of every frontier key (a cluster adds each shard's hash tag in front)",
)
LARBIN_REDIS_CLUSTER = Setting(
    False,
    bool,
    doc="True: REDIS_URL names any node of a Redis Cluster; the frontier is sharded by host over it",
)
LARBIN_REDIS_SHARDS = Setting(
    32,
    int,
    min=1,
    max=16384,
    doc="cluster only: shards (hash tags spread evenly over the slots) that hosts are hashed into",
)
LARBIN_REDIS_DUPEFILTER_KEY = Setting(
    "%(spider)s:seen",
    parse="larbinscrapy.conf.check.key_template",
    takes="a key template with %(spider)s",
    doc="the seen-URL bit string (split in 2^32-bit strings past 512 MiB)",
)
LARBIN_REDIS_CONTENTDUP_KEY = Setting(
    "%(spider)s:contentdup",
    parse="larbinscrapy.conf.check.key_template",
    takes="a key template with %(spider)s",
    doc="hash: content hash -> first URL",
)
LARBIN_REDIS_LEASE_TIMEOUT = Setting(
    60.0,
    float,
    above=0,
    old="LARBIN_LEASE_TIMEOUT",
    doc="seconds without a heartbeat before a worker's leased requests go back to the queue",
)
LARBIN_REDIS_IDLE_BEFORE_CLOSE = Setting(
    5.0,
    float,
    min=0,
    old="LARBIN_IDLE_BEFORE_CLOSE",
    doc="seconds the shared frontier must stay empty with nothing leased before a worker closes",
)
LARBIN_REDIS_OUTAGE_TIMEOUT = Setting(
    60.0,
    float,
    min=0,
    doc="seconds Redis may stay unreachable mid-crawl before a worker stops (exit 1); 0: wait for ever",
)
LARBIN_REDIS_KEEP_ALIVE = Setting(
    False,
    bool,
    old="LARBIN_KEEP_ALIVE",
    doc="True: never close on an empty frontier, wait for new seeds (scrapy-redis's habit)",
)
LARBIN_ALLOW_NO_SEEDS = Setting(
    False, bool, doc="start without seeds (distributed workers take them from Redis)"
)
REDIS_URL = Setting(
    "redis://127.0.0.1:6379/0",
    doc="scrapy-redis's connection setting (REDIS_PARAMS adds client options)",
)
REDIS_START_URLS_KEY = Setting(
    "%(name)s:start_urls", doc="list workers read seeds from: redis-cli lpush larbin:start_urls URL"
)
REDIS_START_URLS_BATCH_SIZE = Setting(
    100, int, min=1, doc="seeds taken from that list per read (every 0.25 s)"
)
SCHEDULER_PERSIST = Setting(
    True,
    doc="keep frontier and seen bits when a crawl finishes (False: the last worker deletes them)",
)

# --- Engine replacements (larbinscrapy/lean/; docs/DESIGN.md) ----------------------------
LARBIN_LEAN_ENGINE = Setting(
    True,
    bool,
    doc="larbinscrapy/lean/ in place of Scrapy's downloader chain, HTTP/1.1 handler, stats, log formatter, JSON lines exporter, some middlewares, Request; False = Scrapy's own",
)
LARBIN_GC_FREEZE = Setting(
    True,
    bool,
    doc="gc.freeze() at engine start: full collections (and the exit) skip the objects built before it",
)
LARBIN_GC_FREEZE_INTERVAL = Setting(
    0.0,
    float,
    min=0,
    doc="seconds between gc.collect() + gc.freeze() during the crawl (a broad crawl's long-lived state out of full collections); 0: only at engine start",
)
LARBIN_MALLOC_TRIM_INTERVAL = Setting(
    30.0,
    float,
    min=0,
    doc="seconds between malloc_trim(0) calls (glibc: the C heap's free pages go back to the system; with LARBIN_GC_FREEZE); 0: never",
)
LARBIN_GC_THRESHOLDS = Setting(
    "50000,10,10",
    parse="larbinscrapy.lean.gcfreeze.parse_thresholds",
    takes="one to three integers, e.g. 700,10,100",
    doc="gc.set_threshold() at engine start (a crawl's pages leave no cycles: the first threshold far above Python's 700 spares collections that find nothing); empty: Python's own",
)

# --- Status -------------------------------------------------------------------------------
LARBIN_STATS_FILE = Setting(
    "", str, doc="write the crawl's stats as JSON here (larbin's status page); empty = off"
)
LARBIN_STATS_INTERVAL = Setting(
    10.0, float, above=0, doc="seconds between rewrites of LARBIN_STATS_FILE while crawling"
)

# --- Status page, control API, metrics (larbin httpPort/inputPort; larbinscrapy/status/) ------
LARBIN_STATUS_HOST = Setting(
    "127.0.0.1",
    str,
    old="LARBIN_HTTP_HOST",
    doc="address of the status page; outside loopback needs LARBIN_STATUS_ALLOW_REMOTE",
)
LARBIN_STATUS_PORT = Setting(
    [8081, 8181],
    parse="larbinscrapy.status.extension.parse_port_range",
    takes="a port, a range such as 8081,8181, or 0 (off)",
    old="LARBIN_HTTP_PORT",
    doc="larbin httpPort: the first free port of this range; 0 or empty = off",
)
LARBIN_STATUS_TOKEN = Setting(
    "",
    str,
    old="LARBIN_HTTP_TOKEN",
    doc="API token; empty = a random one per run (written to JOBDIR/http-token, 0600)",
)
LARBIN_STATUS_ALLOW_REMOTE = Setting(
    False,
    bool,
    old="LARBIN_HTTP_ALLOW_REMOTE",
    doc="allow a LARBIN_STATUS_HOST outside loopback (plain HTTP: logs a warning)",
)
LARBIN_STATUS_HISTORY = Setting(
    3600,
    float,
    above=0,
    old="LARBIN_HTTP_HISTORY",
    doc="seconds of rates the charts keep (larbin's page: the last hour)",
)
LARBIN_STATUS_SAMPLE_INTERVAL = Setting(
    1.0,
    float,
    above=0,
    old="LARBIN_HTTP_SAMPLE_INTERVAL",
    doc="seconds between samples of the rates",
)
LARBIN_STATUS_BUSIEST_HOSTS = Setting(
    10, int, min=0, old="LARBIN_HTTP_BUSIEST_HOSTS", doc="hosts listed by pages fetched"
)
LARBIN_STATUS_BODY_MAX = Setting(
    1_048_576,
    int,
    min=1,
    old="LARBIN_HTTP_MAX_BODY",
    doc="bytes: a bigger POST body is refused (413)",
)
LARBIN_STATUS_URLS_MAX = Setting(
    10_000, int, min=1, old="LARBIN_HTTP_MAX_URLS", doc="URLs in one POST /api/urls"
)
LARBIN_CONF = Setting(
    "", str, doc="larbin.conf to read into these settings (unknown keys warned; -s still wins)"
)

# --- Pipelines (larbin NO_DUP, SIMPLE_SAVE, MIRROR_SAVE) ------------------------------------
LARBIN_CONTENT_DUP = Setting(
    True, bool, doc="drop pages whose body was already stored under another URL"
)
LARBIN_CONTENT_DUP_NEAR_DISTANCE = Setting(
    0,
    int,
    min=0,
    max=31,
    old="LARBIN_NEAR_DUP_DISTANCE",
    doc="simhash Hamming distance for near duplicates; 0 = off",
)

# --- Feeds ---------------------------------------------------------------------------------
FEED_EXPORT_FIELDS = Setting(
    [
        "url",
        "status",
        "depth",
        "referer",
        "fetched_at",
        "content_type",
        "length",
        "title",
        "keywords",
        "description",
        "links",
        "ip",
        "noindex",
        "canonical",
        "changed",
        "fetch_count",  # only with LARBIN_REVISIT (absent fields are not exported)
    ],
    doc="items carry the raw body for the storage pipelines; feeds (-O items.jsonl) leave it out",
)

# --- Storage: the pipelines' files and items' acknowledgement (docs/storage.md, docs/pipelines.md) ---
LARBIN_CONTENT_DUP_FLUSH_INTERVAL = Setting(
    1.0, float, above=0, doc="seconds between flushes of JOBDIR/contentdup/journal"
)
LARBIN_ITEM_RECEIPTS = Setting(
    True,
    bool,
    doc="a page is acknowledged to the frontier once its items reached the OS (False: once its outlinks are queued)",
)
LARBIN_ITEM_FLUSH_DELAY = Setting(
    0.0,
    float,
    min=0,
    doc="seconds scraped items wait for the flush that acknowledges their pages (0: the next reactor turn)",
)
LARBIN_SIMPLE_SAVE = Setting(
    False, bool, doc="larbin SIMPLE_SAVE: bodies to save/dNNNNN/fNNNNN plus index.jsonl"
)
LARBIN_SIMPLE_SAVE_DIR = Setting("save", str, doc="simple-save output directory")
LARBIN_SIMPLE_SAVE_FILES_PER_DIR = Setting(
    2000, int, min=1, doc="files per dNNNNN directory (larbin: 2,000)"
)
LARBIN_MIRROR_SAVE = Setting(
    False, bool, doc="larbin MIRROR_SAVE: bodies to mirror/<host>[_<port>]/<path>"
)
LARBIN_MIRROR_DIR = Setting("mirror", str, doc="mirror-save output directory")
LARBIN_WARC = Setting(False, bool, doc="write WARC/1.1 request/response records (gzip per record)")
LARBIN_WARC_DIR = Setting("warc", str, doc="WARC output directory")
LARBIN_WARC_SIZE_MAX = Setting(
    1_000_000_000,
    int,
    min=1,
    old="LARBIN_WARC_MAX_SIZE",
    doc="bytes after which a WARC file is closed and the next opened",
)
LARBIN_WARC_PREFIX = Setting(
    "larbin", str, doc="WARC file names: <prefix>-<UTC timestamp>-<serial>.warc.gz"
)
LARBIN_SQLITE_PATH = Setting(
    "", str, doc="the docs/pipelines.md SQLite example: database file; empty = off"
)
LARBIN_SQLITE_BATCH = Setting(
    100, int, min=1, doc="SQLite example: rows per commit (also committed after 1 s)"
)

# --- Revisits and sitemaps (larbinscrapy/revisit/, larbinscrapy/seeds/sitemaps.py) ----------------
LARBIN_REVISIT = Setting(
    False, bool, doc="continuous crawl: refetch pages when due (the crawl then runs until stopped)"
)
LARBIN_REVISIT_INTERVAL = Setting(
    86400.0, float, above=0, doc="seconds from a page's first fetch to its first revisit"
)
LARBIN_REVISIT_INTERVAL_MIN = Setting(
    3600.0, float, above=0, old="LARBIN_REVISIT_MIN", doc="shortest revisit interval, seconds"
)
LARBIN_REVISIT_INTERVAL_MAX = Setting(
    30 * 86400.0, float, above=0, old="LARBIN_REVISIT_MAX", doc="longest revisit interval, seconds"
)
LARBIN_REVISIT_STREAK = Setting(
    5,
    int,
    min=1,
    doc="larbin's rule: this many unchanged fetches in a row multiply the interval, changed divide it",
)
LARBIN_REVISIT_FACTOR = Setting(
    2.0, float, above=1, doc="what the interval is multiplied or divided by after a streak"
)
LARBIN_REVISIT_BUCKET = Setting(
    300.0,
    float,
    above=0,
    doc="seconds of due time per schedule file, at most (LARBIN_REVISIT_INTERVAL_MIN / 8 if smaller): a due page waits at most two buckets",
)
LARBIN_REVISIT_GONE_INTERVAL = Setting(
    7 * 86400.0,
    float,
    min=0,
    doc="seconds before a 404/410 page is fetched again, multiplied by LARBIN_REVISIT_FACTOR at each further 404/410; 0 = never again",
)
LARBIN_REVISIT_ERRORS_MAX = Setting(
    5,
    int,
    min=0,
    doc="5xx answers in a row after which a page is no longer revisited (each one multiplies its wait by LARBIN_REVISIT_FACTOR); 0 = revisited for ever",
)
LARBIN_REVISIT_INFLIGHT = Setting(
    10_000,
    int,
    min=1,
    doc="due pages handed to the frontier and not yet fetched, at most (on a Redis Cluster each shard of the schedule holds its share, at least 1)",
)
LARBIN_REVISIT_LEASE = Setting(
    3600.0,
    float,
    above=0,
    doc="seconds a due page may stay unfetched in the frontier before it is rescheduled",
)
LARBIN_REDIS_REVISIT_KEY = Setting(
    "%(spider)s:revisit",
    parse="larbinscrapy.conf.check.key_template",
    takes="a key template with %(spider)s",
    doc="distributed: prefix of the schedule's keys (:due, :flight, :state)",
)
LARBIN_SITEMAPS = Setting(
    True,
    bool,
    doc="read each site's sitemaps (robots.txt Sitemap: lines, else /sitemap.xml); False = off",
)
LARBIN_SITEMAP_GUESS = Setting(
    True,
    bool,
    doc="ask /sitemap.xml of a site whose robots.txt names no sitemap; False: listed ones only",
)
LARBIN_SITEMAP_PRIORITY = Setting(
    "normal",
    str,
    choices=("priority", "normal"),
    doc='frontier tier of sitemap URLs: "priority" or "normal"',
)
LARBIN_SITEMAP_FILES_MAX = Setting(
    20,
    int,
    min=1,
    old="LARBIN_SITEMAP_MAX_FILES",
    doc="sitemap files (indexes included) read per site",
)
LARBIN_SITEMAP_URLS_MAX = Setting(
    50_000,
    int,
    min=1,
    old="LARBIN_SITEMAP_MAX_URLS",
    doc="URLs taken from one sitemap file (the protocol's limit)",
)
LARBIN_SITEMAP_BYTES_MAX = Setting(
    50 * 1024 * 1024,
    int,
    min=1,
    old="LARBIN_SITEMAP_MAX_BYTES",
    doc="bytes of one sitemap file, uncompressed (the protocol's limit)",
)

SETTINGS = publish(globals())  # last: every Setting above becomes its plain default
__all__ = list(
    SETTINGS
)  # what ``from larbinscrapy.conf.defaults import *`` gives a profile: the settings
