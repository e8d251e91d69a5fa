"""larbinscrapy's Scrapy commands (``COMMANDS_MODULE``): ``scrapy addurls``, and ``scrapy crawl``
whose exit status tells a crawl stopped by a fatal error from a finished one."""
